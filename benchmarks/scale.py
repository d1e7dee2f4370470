"""How load, analysis and the cached reopen grow with size.

Inputs, generated into a temp dir (never the repository):

* ``tiny``: a Chrome trace of ``n`` one-microsecond CPU ops on one thread, one name;
* ``threads``: ``n`` threads with one CPU op each (the per-lane paths);
* ``sofa``: a SOFA logdir of ``n`` rows (``benchmarks/ingest_sofa_nsys.py``'s generator,
  half in ``gputrace.csv``, half in ``cputrace.csv``);
* ``reopen``: an ``n``-slice trace built with numpy and written to the cache; the
  cached open is timed with and without the CRC-32 check of the table files.

Each measurement runs in a fresh process; ``--code DIR`` runs the children against
another checkout (e.g. main, for a before/after pair). Columns: load s, analyze s
(``analyze()`` in-process) and ``analyze --json`` (the whole CLI: start, load, analysis,
JSON out) in CPU seconds (user + system; wall time on a shared machine is noisy by 2-5x,
it is shown in brackets), and CPU µs per event of the CLI. Run before/after back to back.

Usage: ``python benchmarks/scale.py [--tiny 1e6 2e6] [--threads 1e5] [--sofa 1e6 2e6]
[--reopen 1e6 1e7] [--code DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_tiny(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        f.write('{"traceEvents":[')
        step = 1 << 16
        for lo in range(0, n, step):
            f.write(("," if lo else "") + ",".join(
                f'{{"ph":"X","cat":"cpu_op","name":"a","ts":{i},"dur":1,"pid":1,"tid":1}}'
                for i in range(lo, min(n, lo + step))))
        f.write("]}")
    return path


def write_threads(path: Path, n: int) -> Path:
    with open(path, "w") as f:
        f.write('{"traceEvents":[' + ",".join(
            f'{{"ph":"X","cat":"cpu_op","name":"op","ts":{t * 10},"dur":2,"pid":1,"tid":{t}}}'
            for t in range(n)) + "]}")
    return path


def write_sofa(folder: Path, n: int) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ingest_sofa_nsys import write_sofa as gen
    gen(folder, n // 2)
    return folder


def child_load(path: str) -> dict:
    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.importers import load_trace
    t0 = time.process_time()
    trace = load_trace(path, use_cache=False)
    t1 = time.process_time()
    analyze(trace)
    return {"events": trace.events, "load": t1 - t0, "analyze": time.process_time() - t1}


def child_reopen(folder: str, n: int) -> dict:
    import numpy as np

    from sofa_gui.core import store
    from sofa_gui.core.builder import TraceBuilder
    from sofa_gui.core.trace import Kind, LaneKind
    d = Path(folder) / "entry"
    if not d.exists():
        b = TraceBuilder("synthetic", "test")
        lane = b.lane("t", "thread", LaneKind.CPU)
        b.add_slices(np.arange(n, dtype=np.int64) * 10, np.full(n, 5), lane,
                     np.zeros(n, np.int32) + b.intern("op"), kind=int(Kind.CPU_OP))
        d.mkdir(parents=True)
        store.write_trace(d, b.finish())
    store.read_trace(d)  # page cache warm, modules loaded
    t0 = time.perf_counter()
    store.read_trace(d)
    t1 = time.perf_counter()
    store.verify_checksums = lambda *_a: None
    store.read_trace(d)
    t2 = time.perf_counter()
    size = sum(f.stat().st_size for f in d.iterdir())
    return {"events": n, "checked": t1 - t0, "unchecked": t2 - t1, "bytes": size}


def _child(code: Path, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run([sys.executable, __file__, "--child", *args], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cli(code: Path, path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of ``analyze --json --no-cache`` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(code))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # cwd outside any checkout: ``-m`` puts the cwd first on sys.path, before PYTHONPATH
    subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", "--json", "--no-cache",
                    str(path)], env=env, stdout=subprocess.DEVNULL, check=True, cwd=path.parent)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", nargs="*", default=["1e6", "2e6"])
    ap.add_argument("--threads", nargs="*", default=["1e5"])
    ap.add_argument("--sofa", nargs="*", default=["1e6", "2e6"])
    ap.add_argument("--reopen", nargs="*", default=["1e6", "1e7"])
    ap.add_argument("--code", default=str(ROOT), help="checkout whose sofa_gui the runs use")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        kind, *rest = a.child
        out = child_load(*rest) if kind == "load" else child_reopen(rest[0], int(rest[1]))
        print(json.dumps(out))
        return 0
    code = Path(a.code).resolve()
    print(f"sofa_gui from {code}; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="sofa-scale-") as td:
        tmp = Path(td)
        print("| input | events | load cpu s | analyze cpu s | analyze --json cpu s "
              "| (wall s) | CPU µs/event (CLI) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        jobs = [("tiny", s, write_tiny, ".json") for s in a.tiny]
        jobs += [("threads", s, write_threads, ".json") for s in a.threads]
        jobs += [("sofa", s, write_sofa, "") for s in a.sofa]
        for kind, size, make, suffix in jobs:
            n = int(float(size))
            path = make(tmp / f"{kind}-{n}{suffix}", n)
            r = _child(code, "load", str(path))
            wall, cpu = _cli(code, path)
            print(f"| {kind} | {r['events']:,} | {r['load']:.2f} | {r['analyze']:.2f} | "
                  f"{cpu:.2f} | ({wall:.1f}) | {cpu / r['events'] * 1e6:.1f} |", flush=True)
        print("\n| cached reopen | events | entry MB | with CRC-32 check s | without s |")
        print("|---|---:|---:|---:|---:|")
        for size in a.reopen:
            n = int(float(size))
            r = _child(code, "reopen", str(tmp / f"reopen-{n}"), str(n))
            print(f"| numpy-built | {n:,} | {r['bytes'] / 1e6:,.0f} | {r['checked']:.3f} | "
                  f"{r['unchecked']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
