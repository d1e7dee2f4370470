"""The CLI's fixed cost: what ``sofa-gui analyze`` imports for a Kineto JSON trace.

``python -X importtime`` lists every module imported. The heavy dependencies that only
other formats need (pandas for the SOFA/Nsight groupings, sqlite3, pyarrow's
CSV/Parquet/compute modules) and Qt must not be among them, on the first open (which
writes the cache) nor on the cached reopen. How long the imports take, against the
dependencies every run needs, is a benchmark's table (``benchmarks/cli_imports.py``),
not a timed assert.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cli_imports import import_profile  # noqa: E402

HEAVY = ("pandas", "sqlite3", "pyarrow.csv", "pyarrow.parquet", "pyarrow.compute",
         "pyarrow.dataset", "PySide6", "pyqtgraph", "scipy", "duckdb")


def test_analyze_imports_no_heavy_module_first_open_or_cached(tmp_path):
    for run in ("first open", "cached reopen"):
        modules, _ = import_profile(tmp_path)
        heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY)
        assert not heavy, f"{run} imported {heavy}"
