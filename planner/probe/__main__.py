"""``python -m planner.probe --child``: the measuring process the parent starts."""

import sys

from planner.probe.child import main

sys.exit(main())
