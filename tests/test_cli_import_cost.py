"""The CLI's fixed cost: what ``sofa-gui analyze`` imports for a Kineto JSON trace.

``python -X importtime`` lists every module imported. The heavy dependencies
that only other formats need (pandas for the SOFA/Nsight groupings, sqlite3,
pyarrow's CSV/Parquet/compute modules) and Qt must not be among them, on the
first open (which writes the cache) nor on the cached reopen. The summed import
time has a budget relative to the dependencies every run needs (numpy, pyarrow,
msgspec, imported alone in the same conditions): at most :data:`BUDGET_RATIO`
times their cost (about 1.1x on the development machine; pandas alone would add
about 2.5x). A ratio, best of five interleaved runs each, so a loaded machine
slows both sides alike instead of failing the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from sofa_gui.core.samples import demo_trace_path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "sqlite3", "pyarrow.csv", "pyarrow.parquet", "pyarrow.compute",
         "pyarrow.dataset", "PySide6", "pyqtgraph", "scipy", "duckdb")
BUDGET_RATIO = 2.5
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def _import_profile(cache: Path, *argv: str) -> tuple[set[str], float]:
    """(modules imported, summed self import time in s) of one ``analyze --json`` run
    (or of ``python argv``)."""
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    argv = argv or ("-m", "sofa_gui", "analyze", str(demo_trace_path()), "--json")
    r = subprocess.run([sys.executable, "-X", "importtime", *argv],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [m.groups() for m in map(_LINE.match, r.stderr.splitlines()) if m]
    return {name for *_, name in rows}, sum(int(self_us) for self_us, *_ in rows) / 1e6


def test_analyze_imports_no_heavy_module_first_open_or_cached(tmp_path):
    for run in ("first open", "cached reopen"):
        modules, _ = _import_profile(tmp_path)
        heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY)
        assert not heavy, f"{run} imported {heavy}"


def test_analyze_import_time_within_budget(tmp_path):
    _import_profile(tmp_path)  # writes the cache: the runs below are cached reopens
    runs = [(_import_profile(tmp_path)[1],
             _import_profile(tmp_path, "-c", "import numpy, pyarrow, msgspec")[1])
            for _ in range(5)]
    ours, deps = min(r[0] for r in runs), min(r[1] for r in runs)
    assert ours <= BUDGET_RATIO * deps, \
        f"imports took {ours:.2f} s, {ours / deps:.1f}x numpy+pyarrow+msgspec ({deps:.2f} s)"
