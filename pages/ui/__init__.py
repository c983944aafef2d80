"""Building blocks of the app's pages (not pages themselves): one concern a module.

* :mod:`~pages.ui.state` - the session's plan state shared by every page;
* :mod:`~pages.ui.models` - model source (presets, Hub, upload, paste);
* :mod:`~pages.ui.urlstate` - share links and plan files;
* :mod:`~pages.ui.suggest` - deployment suggestions when the model changes;
* :mod:`~pages.ui.inputs` - the Plan page's controls;
* :mod:`~pages.ui.results` - the Plan page's result cards, one function a card;
* :mod:`~pages.ui.charts` - plotly figures;
* :mod:`~pages.ui.export` - share box, PDF, plan files.

Numbers are formatted by :mod:`planner.units`, as in the CLI and the PDF.
"""
