"""Serve the app as ``streamlit run`` does, with what a session's first run imports already imported.

    python scripts/run_app.py app.py [streamlit run flags] [-- app args]

The arguments are those of ``streamlit run`` (``make run``, ``make serve`` and the container image
start the app this way; plain ``streamlit run app.py`` still works, it only leaves the imports to
the first session).

Why: a fresh Streamlit process imports a page's modules in the first session's script run, so the
first user of a new server waited for the planner's import chain (pydantic models, dataclasses,
the engines' tables: 0.7-1.5 s on 2 cores) before the first metric. Here they are imported once the
server listens and before it serves its first request (the health check included), the way a
preloading application server does: a load balancer, ``scripts/serve.py`` and the container's
probes send no user to the process before they are done. Done in a background thread instead, the
imports competed with the browser loading Streamlit's frontend (the same cores, the server's GIL):
at load 4-5 on 2 cores they took 2.4 s instead of 0.9 s, ended after the first session had started
(which then waited for them), and the first metric came 0.9 s later; server start to first metric
was the same either way (benchmarks/bench_app.py).

What is done ahead, once a process, in this order:

* imports: the top-level imports of the app script and of its default page (``pages/plan.py``),
  then the image libraries Streamlit imports for a page icon when the app script sets one
  (``st.set_page_config(page_icon=...)``), with their image plugins;
* Streamlit's one check on its first element, whether the script runs outside ``streamlit run``
  (``delta_generator._maybe_print_use_warning``): it is marked done, since the launcher is
  ``streamlit run``; its ``env_util.is_repl`` called ``inspect.stack()``, which maps every frame to
  a module through ``inspect``'s cache of ``sys.modules``, built on first use with a ``realpath`` a
  module file (0.2 s quiet, over 1 s at load 6, with the app's ~1,000 modules);
* Streamlit's material icon table, when the app script names a ``:material/...:`` icon;
* Streamlit's compiled copies of the app script and its default page (its script cache: read,
  magic commands added, compiled; once a process);
* the caches of :data:`WARM_UP` whose module the app imported (the preset list, 48 files read).

The collector is off while these run and back on after: each import allocates, and the full
collections it set off walked the server's whole heap (Streamlit's ~1,000 modules) again and again,
0.73 s of preload against 0.53 s without (medians of 5 fresh servers each, 2 cores). What the
preload leaves alive (modules, classes, functions: alive as long as the server) is then frozen
(``gc.freeze``), so the collections of later script runs do not walk it either.
The preload runs in Streamlit's own server-start step, so a module that registers a custom
component (``st.components.v2``) on import would register it with the running server, as a script
run does.
"""

from __future__ import annotations

import ast
import gc
import importlib
import importlib.util
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PAGE = "pages/plan.py"  # app.py's default page (PAGES[0])
# Streamlit imports these when set_page_config gets a page icon (image_utils.image_to_url).
PAGE_ICON_MODULES = ("numpy", "PIL.Image")

# (module, function): called with no arguments after the imports when the app imported ``module``;
# each fills a process cache the first run reads. No plan is computed ahead.
WARM_UP = (("planner.presets", "list_presets"),)

log = logging.getLogger("kvp.run_app")


def script_imports(path: Path) -> list[str]:
    """Modules a script imports at its top level, in order: ``import a.b`` gives ``a.b``;
    ``from a import b`` gives ``a.b`` when that is a module, else ``a``."""
    names: list[str] = []
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module != "__future__":
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names if _is_module(f"{node.module}.{alias.name}")]
    return list(dict.fromkeys(names))


def sets_page_icon(path: Path) -> bool:
    """Whether the script calls ``set_page_config`` with a ``page_icon``."""
    return any(
        isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "set_page_config" and any(k.arg == "page_icon" for k in node.keywords)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    )


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def first_run_modules(main_script: Path) -> list[str]:
    """What a session's first run imports: the app script's imports, its default page's, the page icon's."""
    scripts = [main_script, main_script.parent / FIRST_PAGE]
    icon = list(PAGE_ICON_MODULES) if sets_page_icon(main_script) else []
    return list(dict.fromkeys([m for s in scripts if s.is_file() for m in script_imports(s)] + icon))


def uses_material_icons(path: Path) -> bool:
    """Whether the script names a material icon (Streamlit then loads its table of their names)."""
    return ":material/" in path.read_text(encoding="utf-8")


def preload(main_script: Path, script_cache=None) -> tuple[int, float]:
    """Import :func:`first_run_modules` and warm the first run's once-a-process work (module
    docstring); ``script_cache``: the running server's (Streamlit's ScriptCache). (Modules newly
    imported, seconds.) A step that fails is logged and skipped: the session that needs it meets
    the error as it would have."""
    if str(main_script.parent) not in sys.path:
        sys.path.insert(0, str(main_script.parent))
    before, start = len(sys.modules), time.perf_counter()
    collecting = gc.isenabled()
    gc.disable()
    try:
        _preload_steps(main_script, script_cache)
    finally:
        if collecting:
            gc.enable()
    gc.freeze()
    return len(sys.modules) - before, time.perf_counter() - start


def _preload_steps(main_script: Path, script_cache) -> None:
    steps = [(name, importlib.import_module, (name,)) for name in first_run_modules(main_script)]
    if sets_page_icon(main_script):
        steps.append(("PIL.Image.preinit", lambda: importlib.import_module("PIL.Image").preinit(), ()))
    if uses_material_icons(main_script):
        steps.append(("streamlit.material_icon_names", importlib.import_module, ("streamlit.material_icon_names",)))
    steps.append(("streamlit run check", _mark_use_warning_checked, ()))
    if script_cache is not None:
        steps += [(f"compile {s}", script_cache.get_bytecode, (str(s),)) for s in (main_script, main_script.parent / FIRST_PAGE) if s.is_file()]
    for name, step, args in steps:
        _try(name, step, *args)
    for module, function in WARM_UP:
        if module in sys.modules:
            _try(f"{module}.{function}", getattr(sys.modules[module], function))


def _mark_use_warning_checked() -> None:
    """Streamlit warns once a process, on the first element, when a script is not run by
    ``streamlit run`` (or runs in a REPL); served by this launcher it is, so it would say nothing."""
    from streamlit import delta_generator

    if not hasattr(delta_generator, "_use_warning_has_been_displayed"):
        raise AttributeError("streamlit.delta_generator._use_warning_has_been_displayed is gone (a Streamlit upgrade)")
    delta_generator._use_warning_has_been_displayed = True


def _try(name: str, step, *args) -> None:
    try:
        step(*args)
    except Exception as exc:  # noqa: BLE001 - never stop the server over a preload
        log.warning("preload step %s failed: %s: %s", name, type(exc).__name__, exc)


def _preload_and_report(main_script: Path, script_cache) -> None:
    count, seconds = preload(main_script, script_cache)
    print(f"  Preloaded {count} modules in {seconds:.2f} s.", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0].startswith("-"):
        print("usage: python scripts/run_app.py app.py [streamlit run flags] [-- app args]", file=sys.stderr)
        return 2
    main_script = Path(argv[0]).resolve()
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path.pop(0)  # as under `streamlit run`: scripts/ is not on the app's path

    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import bootstrap, cli

    # Streamlit's older pages/ layout off before the first session, as st.navigation turns it off:
    # a fresh server's first deep link then runs app.py's navigation at once, without the rerun
    # that pages.ui.navigation.through_app makes under plain `streamlit run` (see there why)
    PagesManager.uses_pages_directory = False
    on_server_start = bootstrap._on_server_start  # runs once the server listens (Streamlit 1.67)

    def on_start(server) -> None:
        on_server_start(server)
        # on the server's event loop: no request (health check, page, websocket) is served before it ends
        _preload_and_report(main_script, getattr(getattr(server, "_runtime", None), "_script_cache", None))

    bootstrap._on_server_start = on_start
    return cli.main.main(args=["run", *argv], prog_name="streamlit", standalone_mode=True)


if __name__ == "__main__":
    sys.exit(main())
