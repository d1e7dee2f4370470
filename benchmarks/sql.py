"""SQL benchmark: a group-by over every slice of a generated 1M-event trace, once cached.

    python benchmarks/sql.py                   # 1M slices into TMPDIR/sofa-sql, then measure
    python benchmarks/sql.py --slices 300000   # a smaller run

The trace is ``benchmarks/huge.py``'s generated Kineto JSON (CPU ops, runtime launches,
kernels, flows: 5 JSON events per operator, 3 of them slices), made with ``--slices``
slices. The first ``sofa-gui analyze`` writes the cache (and the analysis cache);
then, in a fresh process, the cached trace is opened, the SQL tables registered
(:class:`sofa_gui.core.query.db.TraceDB`) and each query run ``--repeat`` times,
interleaved with the same answer computed by numpy on the trace's columns, so a busy
machine slows both alike: the ratio is the figure to compare across machines. Last, the
whole ``sofa-gui sql`` command (process start, cached open, analysis cache, query) is
timed. Prints one table; the file and its cache go to ``--dir`` (never the repository).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

QUERIES = {
    "group by name (count, sum, max)":
        "SELECT name, count(*) AS n, sum(dur_us) AS total, max(dur_us) AS longest "
        "FROM slices GROUP BY name ORDER BY total DESC",
    "group by kind, lane":
        "SELECT kind, lane, count(*), sum(dur_us) FROM slices GROUP BY ALL",
    "top 10 kernels of one iteration":
        "SELECT name, sum(dur_us) AS t FROM kernels WHERE iteration = 3 "
        "GROUP BY 1 ORDER BY t DESC LIMIT 10",
}


def _numpy_group_by_name(trace) -> tuple[int, float, int]:
    """The first query's answer from the columns: count, sum and max of dur by name."""
    import numpy as np

    s = trace.slices
    n = len(trace.names)
    count = np.bincount(s.name, minlength=n)
    total = np.bincount(s.name, weights=s.dur, minlength=n)
    longest = np.zeros(n, np.int64)
    np.maximum.at(longest, s.name, s.dur)
    return int((count > 0).sum()), float(total.sum()), int(longest.max())


def probe(path: str, repeat: int) -> dict:
    """In this process: cached open, table registration, the queries (median of runs)."""
    from sofa_gui.core.analysis.cache import analyze_cached
    from sofa_gui.core.analysis.pipeline import Options
    from sofa_gui.core.importers import load_trace
    from sofa_gui.core.query.db import TraceDB

    t0 = time.perf_counter()
    trace = load_trace(path)
    analysis = analyze_cached(trace, Options())
    t1 = time.perf_counter()
    db = TraceDB(trace, analysis)
    t2 = time.perf_counter()
    out = {"events": trace.events, "slices": len(trace.slices), "open_s": t1 - t0,
           "tables_s": t2 - t1, "queries": {}}
    from sofa_gui.core.analysis import calltree

    lanes, _ = calltree.pick_lanes(trace, None)
    t3 = time.perf_counter()
    tree = calltree.build(trace, lanes)
    out["calltree_s"], out["calltree_nodes"] = time.perf_counter() - t3, len(tree)
    for label, sql in QUERIES.items():
        db.run(sql)  # warm: the first run plans and pages the columns in
        ours, ref = [], []
        for _ in range(repeat):
            a = time.perf_counter()
            rows = len(db.run(sql).rows)
            b = time.perf_counter()
            if label.startswith("group by name"):
                groups = _numpy_group_by_name(trace)[0]
                assert groups == rows, (groups, rows)
            c = time.perf_counter()
            ours.append(b - a)
            ref.append(c - b)
        out["queries"][label] = {"median_s": statistics.median(ours), "rows": rows,
                                 "numpy_s": statistics.median(ref)
                                 if label.startswith("group by name") else None}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", type=int, default=1_000_000)
    ap.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "sofa-sql"))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the file and the cache")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe, args.repeat)))
        return 0
    from huge import generate

    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    trace = work / f"synthetic_{args.slices}_slices.json"
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(work / "cache"), "PYTHONPATH": str(ROOT)}
    try:
        if not trace.exists():
            generate(trace, -(-args.slices * 5 // 3))  # JSON events: 3 slices in 5
        shutil.rmtree(work / "cache", ignore_errors=True)  # the first open below writes it
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(trace)], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        first = time.perf_counter() - t0
        r = subprocess.run([sys.executable, __file__, "--probe", str(trace), "--repeat",
                            str(args.repeat)], env=env, check=True, capture_output=True,
                           text=True)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        cli = _time_cli(trace, env, args.repeat)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    _report(got, first, cli, os.getloadavg()[0])
    return 0


def _time_cli(trace: Path, env: dict, repeat: int) -> tuple[float, float]:
    """Median wall times of the whole ``sofa-gui sql`` command and, interleaved with it,
    of ``sofa-gui analyze`` (the same start, cached open and analysis cache), cached."""
    sql = QUERIES["group by name (count, sum, max)"]
    cmds = ([sys.executable, "-m", "sofa_gui", "sql", str(trace), sql, "--csv"],
            [sys.executable, "-m", "sofa_gui", "analyze", str(trace)])
    walls: tuple[list, list] = ([], [])
    for _ in range(max(3, repeat // 2)):
        for cmd, out in zip(cmds, walls):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            out.append(time.perf_counter() - t0)
    return statistics.median(walls[0]), statistics.median(walls[1])


def _report(got: dict, first: float, cli: tuple[float, float], load: float) -> None:
    print(f"trace: {got['events']:,} events, {got['slices']:,} slices; machine load "
          f"average {load:.1f} on {os.cpu_count()} cores (timings on a busy machine are slow)")
    print(f"first open + analysis (writes the caches): {first:.1f} s; cached open + analysis "
          f"cache: {got['open_s']:.2f} s; tables registered: {got['tables_s'] * 1e3:.0f} ms")
    print("\n| query | rows | median | numpy on the columns | ratio |\n|---|---|---|---|---|")
    for label, q in got["queries"].items():
        ref = q["numpy_s"]
        ratio = f"{q['median_s'] / ref:.1f}x" if ref else ""
        ref_text = f"{ref * 1e3:.0f} ms" if ref else ""
        print(f"| {label} | {q['rows']:,} | {q['median_s'] * 1e3:.0f} ms | {ref_text} | "
              f"{ratio} |")
    print(f"| whole `sofa-gui sql ... --csv` command, cached | | {cli[0]:.2f} s | | |")
    print(f"| whole `sofa-gui analyze` command, cached (interleaved) | | {cli[1]:.2f} s | | |")
    print(f"| call tree of the main thread, whole trace ({got['calltree_nodes']:,} nodes) | | "
          f"{got['calltree_s'] * 1e3:.0f} ms | | |")


if __name__ == "__main__":
    sys.exit(main())
