"""What the equivalence checks share: a git revision's grid computed in a subprocess, and the
command line (``--against REV`` / ``--save FILE`` / ``--compare FILE``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def grid_at(rev: str, module: str) -> dict:
    """``benchmarks/<module>.py``'s ``snapshot()`` computed by revision ``rev``'s planner: its tree
    is exported with ``git archive`` into a temporary folder and the snapshot runs there."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        out = Path(tmp) / "snapshot.json"
        code = f"import sys, json; sys.path.insert(0, {str(Path(__file__).parent)!r}); import {module} as m; open({str(out)!r}, 'w').write(json.dumps(m.snapshot()))"
        subprocess.run([sys.executable, "-c", code], cwd=tmp, check=True, env={**os.environ, "PYTHONPATH": tmp})
        return json.loads(out.read_text())


def main(doc: str, module: str, snapshot: Callable[[], dict], compare: Callable[..., int], noun: str, rel: float | None = None) -> int:
    """The command line of an equivalence check: ``snapshot()`` here, saved or compared (with
    ``compare(base, here[, rel])``) against a saved grid or a revision's."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--against", default="main", help="git revision whose planner is the baseline (default: main)")
    ap.add_argument("--save", type=Path, help="write this checkout's grid to this JSON file and stop (no comparison)")
    ap.add_argument("--compare", type=Path, help="compare against a grid saved with --save instead of a git revision")
    if rel is not None:
        ap.add_argument("--rel", type=float, default=rel, help=f"relative tolerance for floats (default {rel:g})")
    args = ap.parse_args()
    here = snapshot()
    if args.save:
        args.save.write_text(json.dumps(here))
        print(f"saved {len(here)} {noun} to {args.save}")
        return 0
    base = json.loads(args.compare.read_text()) if args.compare else grid_at(args.against, module)
    return compare(base, here, args.rel) if rel is not None else compare(base, here)
