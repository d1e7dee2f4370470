"""HTA (Holistic Trace Analysis) on the same file, for the "we are >= 10x faster" row.

    python benchmarks/hta_compare.py --hta-python $HTA_VENV/bin/python [TRACE]

HTA is not a dependency of sofa_gui: install it in a venv of its own
(``python -m venv hta && hta/bin/pip install HolisticTraceAnalysis``) and pass its
interpreter.  TRACE defaults to the bundled ResNet-50 sample tiled 13 times (984,094
events, ``benchmarks/ingest.py``'s real-content row), written to the temp dir once.  Times
HTA's import, ``TraceAnalysis`` (load) and ``get_temporal_breakdown``
in a fresh process, then ``sofa-gui analyze --json --no-cache`` on the same file, and
prints both with the ratio.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HTA_SCRIPT = """
import sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
a.get_temporal_breakdown(visualize=False)
t3 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f}")
"""


def _hta(python: str, trace: Path) -> list[float]:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "rank-0.json").symlink_to(trace.resolve())
        out = subprocess.run([python, "-c", HTA_SCRIPT, d], capture_output=True, text=True,
                             check=True, timeout=1800).stdout.split()
    return [float(x) for x in out[-3:]]


def _ours(trace: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(trace), "--json",
                    "--no-cache"], stdout=subprocess.DEVNULL, check=True, timeout=1800)
    return time.perf_counter() - t0


def _tiled_sample() -> Path:
    """The bundled sample tiled 13 times, in the temp dir (written once, then reused)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ingest import write_tiled

    path = Path(tempfile.gettempdir()) / "sofa-gui-bench" / "tiled13.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(".part")
        write_tiled(part, 13)
        part.replace(path)  # never a half-written file under the reused name
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hta-python", required=True, help="a Python with HolisticTraceAnalysis")
    ap.add_argument("trace", nargs="?", help="a Kineto trace (default: the tiled sample)")
    args = ap.parse_args(argv)
    trace = Path(args.trace) if args.trace else _tiled_sample()
    imp, load, brk = _hta(args.hta_python, trace)
    ours = _ours(trace)
    hta = imp + load + brk
    print("| tool | import | load | temporal breakdown | total | x |")
    print("|---|---|---|---|---|---|")
    print(f"| HTA | {imp:.2f} s | {load:.2f} s | {brk:.2f} s | {hta:.2f} s | 1.0x |")
    print(f"| `sofa-gui analyze --json --no-cache` (load + all analyses) | - | - | - | "
          f"{ours:.2f} s | {hta / ours:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
