"""Fleet benchmark: ``sofa-gui fleet`` on 64 ranks x ~200k events, 1 and 2 workers.

    python benchmarks/fleet.py                       # 64 ranks, 2x tiled HTA rank0 (~218k events)
    python benchmarks/fleet.py --ranks 16 --workers 1,2,4 --keep

Rank files are the public HTA ``negative_queue_length_values_check/rank0`` trace (108,936
events, 5 steps) tiled end to end (``--tile``, steps renumbered), one per rank with its own
``distributedInfo.rank``; rank 7's compute is stretched 1.5x (the straggler to find).
Each row is a fresh ``sofa-gui fleet --json`` process on the embedded LocalCluster:
"first" with an empty worker cache (import + analysis + cache write), "cached" again
with the cache the first run wrote.  Client peak RSS is the CLI process alone (it also
hosts the embedded scheduler); worker peak RSS is the largest worker process.
Files go to /tmp (never the repository).
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
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "traces" / "public" / "holistic-trace-analysis" / \
    "negative_queue_length_values_check" / "rank0.json.gz"
SLOW_RANK, STRETCH = 7, 1.5
MARK = 987654321


def generate(out: Path, n_ranks: int, times: int) -> int:
    """Write rank-{i}.json; returns events per rank."""
    sys.path.insert(0, str(ROOT))
    from sofa_gui.core.fleet.synth import read_events, stretch_compute, tile

    doc = read_events(SOURCE)
    events = tile(doc["traceEvents"], times)
    out.mkdir(parents=True, exist_ok=True)

    def dump(evs) -> bytes:
        d = dict(doc, traceEvents=evs,
                 distributedInfo={"backend": "nccl", "rank": MARK, "world_size": n_ranks})
        return json.dumps(d, separators=(",", ":")).encode()

    body = dump(events)
    slow = dump(stretch_compute(events, STRETCH))
    marker = b'"rank":%d' % MARK
    for i in range(n_ranks):
        src = slow if i == SLOW_RANK else body
        (out / f"rank-{i}.json").write_bytes(src.replace(marker, b'"rank":%d' % i, 1))
    return len(events)


def run_fleet(run: Path, workers: int, cache: Path) -> dict:
    env = dict(os.environ, SOFA_GUI_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    proc = psutil.Popen([sys.executable, "-m", "sofa_gui", "fleet", str(run), "--workers",
                         str(workers), "--json"], env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
    peak = {"client": 0, "worker": 0}

    def poll():
        while proc.poll() is None:
            try:
                peak["client"] = max(peak["client"], proc.memory_info().rss)
                for c in proc.children(recursive=True):
                    peak["worker"] = max(peak["worker"], c.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.05)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    t.join()
    if proc.returncode:
        raise SystemExit(f"fleet failed with exit code {proc.returncode}")
    doc = json.loads(out)
    secs = [r["seconds"] for r in doc["ranks"]]
    cpu = [r.get("cpu_seconds", 0.0) for r in doc["ranks"]]
    return {"wall": wall, "task_median": statistics.median(secs), "task_sum": sum(secs),
            "cpu_median": statistics.median(cpu),
            "client_mb": peak["client"] / 2**20, "worker_mb": peak["worker"] / 2**20,
            "json_kb": len(out) / 1024, "errors": sum(r["error"] is not None for r in doc["ranks"]),
            "stragglers": [(s["rank"], s["cause"]) for s in doc["stragglers"]],
            "iterations": len(doc["iterations"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--tile", type=int, default=2, help="copies of the source's steps per rank")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "sofa_fleet_bench"))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if not SOURCE.exists():
        raise SystemExit(f"source trace not found: {SOURCE}")
    base = Path(a.dir)
    run = base / f"run-{a.ranks}x{a.tile}"
    t0 = time.perf_counter()
    n_events = generate(run, a.ranks, a.tile) if not run.exists() else -1
    size = sum(p.stat().st_size for p in run.iterdir())
    print(f"{a.ranks} ranks, {n_events if n_events > 0 else '?'} events per rank (JSON events),"
          f" {size / 2**30:.2f} GB on disk, generated in {time.perf_counter() - t0:.0f} s; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    print()
    print("| workers | cache | wall s | ranks/s | task median s | task median CPU s | "
          "sum of tasks s | client peak RSS MB | worker peak RSS MB | JSON KB | "
          "stragglers (cause) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for w in [int(x) for x in a.workers.split(",")]:
        cache = base / f"cache-w{w}"
        shutil.rmtree(cache, ignore_errors=True)
        for label in ("first", "cached"):
            r = run_fleet(run, w, cache)
            st = ", ".join(f"{rk} ({c})" for rk, c in r["stragglers"]) or "none"
            print(f"| {w} | {label} | {r['wall']:.1f} | {a.ranks / r['wall']:.2f} | "
                  f"{r['task_median']:.2f} | {r['cpu_median']:.2f} | {r['task_sum']:.0f} | "
                  f"{r['client_mb']:.0f} | "
                  f"{r['worker_mb']:.0f} | {r['json_kb']:.0f} | {st} |", flush=True)
            if r["errors"]:
                print(f"  ({r['errors']} ranks failed)")
        shutil.rmtree(cache, ignore_errors=True)
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
