"""The CLI's fixed cost: what ``sofa-gui analyze --json`` spends importing on a cached
reopen of the bundled sample, against the dependencies every run needs (numpy, pyarrow,
msgspec imported alone), in interleaved runs; a table, as every timing here is (two
processes share the cores of the machines this runs on, so the ratio within one run is
the figure, not the seconds).

    python benchmarks/cli_imports.py [--runs 5]

``tests/test_cli_import_cost.py`` checks with :func:`import_profile` that no heavy module
(pandas, sqlite3, pyarrow's CSV/Parquet/compute, Qt) is imported at all.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")
DEPS = ("-c", "import numpy, pyarrow, msgspec")


def import_profile(cache: Path, *argv: str) -> tuple[set[str], float]:
    """(modules imported, summed self import time in s) of one ``analyze --json`` run of
    the bundled sample (or of ``python argv``), with ``cache`` as the analysis cache."""
    from sofa_gui.core.samples import demo_trace_path

    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    argv = argv or ("-m", "sofa_gui", "analyze", str(demo_trace_path()), "--json")
    r = subprocess.run([sys.executable, "-X", "importtime", *argv],
                       capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    rows = [m.groups() for m in map(_LINE.match, r.stderr.splitlines()) if m]
    return {name for *_, name in rows}, sum(int(self_us) for self_us, *_ in rows) / 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        import_profile(cache)  # writes the cache: the runs below are cached reopens
        print("| run | analyze imports (s) | numpy+pyarrow+msgspec (s) | ratio |")
        print("|---|---|---|---|")
        runs = []
        for k in range(args.runs):
            ours, deps = import_profile(cache)[1], import_profile(cache, *DEPS)[1]
            runs.append((ours, deps))
            print(f"| {k + 1} | {ours:.3f} | {deps:.3f} | {ours / deps:.2f}x |")
        ours, deps = min(r[0] for r in runs), min(r[1] for r in runs)
        print(f"| best | {ours:.3f} | {deps:.3f} | {ours / deps:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
