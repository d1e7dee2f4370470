"""Recorder costs: sampling overhead per tick, and opening long recordings.

Two tables:

* ``tick``: wall time of one :class:`HostSampler` tick (all psutil reads, the
  process tree, row buffering) while it watches a tree of N sleeping Python
  children: mean and p99 in ms, and the share of one core at ``--interval``;
* ``open``: :func:`load_trace` (no cache) of a synthetic recording of
  ``hours`` at 0.1 s with ``cores`` per-core series and 8 GPUs x 7 metrics,
  written through the recorder's own :class:`PartWriter` and compacted as a
  real run would be: rows, seconds, Mrows/s.

Usage: ``python benchmarks/recorder.py [--ticks 200] [--hours 0.5 1] [--cores 64]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sofa_gui.core.importers import load_trace
from sofa_gui.core.importers.recording import contract as schema
from sofa_gui.core.importers.recording.contract import FORMAT_NAME, FORMAT_VERSION
from sofa_gui.recorder.clock import EpochClock
from sofa_gui.recorder.parts import PartWriter, compact
from sofa_gui.recorder.sampler import HostSampler


def tick_cost(children: int, ticks: int, interval: float, tmp: Path) -> tuple[float, float]:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
             for _ in range(children)]
    root = procs[0] if procs else None
    try:
        s = HostSampler(EpochClock(), PartWriter(tmp / "c", schema.COUNTERS),
                        PartWriter(tmp / "p", schema.PROCESSES), interval, 3600)
        if root is not None:
            import os

            s.watch(os.getpid())  # this process: its children are the tree
        times = []
        for _ in range(ticks):
            t0 = time.perf_counter()
            s.tick(time.monotonic_ns())
            times.append(time.perf_counter() - t0)
            time.sleep(0.002)
        ms = np.array(times[1:]) * 1e3
        return float(ms.mean()), float(np.percentile(ms, 99))
    finally:
        for p in procs:
            p.kill()
            p.wait()


def synthetic_recording(folder: Path, hours: float, cores: int, gpus: int = 8) -> int:
    folder.mkdir(parents=True)
    n = int(hours * 3600 / 0.1)
    t0 = time.time_ns()
    series = [("CPU cores", f"CPU{c} util %", "%", -1) for c in range(cores)]
    series += [("CPU", s, "%", -1) for s in ("CPU busy %", "CPU user %", "CPU system %")]
    series += [("Memory", "memory used", "B", -1), ("Network", "eth0 tx", "B/s", -1)]
    for g in range(gpus):
        series += [(f"GPU{g} utilization", f"GPU{g} SM util %", "%", g),
                   (f"GPU{g} utilization", f"GPU{g} memory util %", "%", g),
                   (f"GPU{g} memory", f"GPU{g} memory used", "B", g),
                   (f"GPU{g} PCIe", f"GPU{g} PCIe tx", "B/s", g),
                   (f"GPU{g} PCIe", f"GPU{g} PCIe rx", "B/s", g),
                   (f"GPU{g} power", f"GPU{g} power", "W", g),
                   (f"GPU{g} SM clock", f"GPU{g} SM clock", "MHz", g)]
    w = PartWriter(folder / "counters", schema.COUNTERS)
    rng = np.random.default_rng(0)
    per_flush = 20  # ticks per part, as with a 2 s flush at 0.1 s
    k = len(series)
    lanes, names, units, devs = (list(x) for x in zip(*series))
    for start in range(0, n, per_flush):
        m = min(per_flush, n - start)
        t = np.repeat(t0 + (np.arange(start, start + m) * 100_000_000), k)
        w.add(time_ns=t.tolist(), lane=lanes * m, series=names * m, unit=units * m,
              device=devs * m, value=rng.random(m * k).tolist())
        w.flush()
    rows = compact(folder / "counters", folder / "counters.parquet", schema.COUNTERS)
    doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "status": "complete",
           "start": {"epoch_ns": t0}, "sources": {}, "host": {}}
    (folder / "manifest.json").write_text(json.dumps(doc))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--children", type=int, nargs="*", default=[0, 8, 32])
    ap.add_argument("--hours", type=float, nargs="*", default=[0.5, 1.0])
    ap.add_argument("--cores", type=int, default=64)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sofa-rec-bench-"))
    try:
        print(f"{'tree procs':>10} {'tick mean ms':>13} {'tick p99 ms':>12} "
              f"{'core share':>11}")
        for n in args.children:
            d = tmp / f"t{n}"
            d.mkdir()
            mean, p99 = tick_cost(n, args.ticks, args.interval, d)
            print(f"{n + 1:>10} {mean:>13.2f} {p99:>12.2f} "
                  f"{mean / 1e3 / args.interval:>10.1%}")
        print()
        print(f"{'hours':>6} {'cores':>6} {'rows':>12} {'open s':>7} {'Mrows/s':>8}")
        for h in args.hours:
            d = tmp / f"r{h}"
            rows = synthetic_recording(d, h, args.cores)
            t = time.perf_counter()
            trace = load_trace(d, use_cache=False)
            opened = time.perf_counter() - t
            assert len(trace.counters) == rows
            print(f"{h:>6g} {args.cores:>6} {rows:>12,} {opened:>7.2f} {rows / opened / 1e6:>8.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
