"""Breakdown + advisor speed on synthetic traces of 1e5 / 1e6 / 3e6 slices (and real traces).

Each synthetic trace has one main thread (framework ops and launches) and one
device with 4 streams (kernels, copies, memsets, collectives), half the slices
on each side, cut into 100 iterations.  Columns (seconds, best of ``--repeat``):

* ``breakdown``: :func:`compute_breakdown` (host + device painting, idle causes,
  copies, counters);
* ``findings``: :func:`find_bottlenecks` on that breakdown;
* ``Mslices/s``: slices per second through both.

Usage: ``python benchmarks/breakdown.py [1e5 1e6 3e6] [--real PATH ...] [--repeat N]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sofa_gui.core.analysis.breakdown import compute_breakdown
from sofa_gui.core.analysis.findings import find_bottlenecks
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import Kind, LaneKind


def synthetic(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    half = n // 2
    b = TraceBuilder("synthetic", "bench")
    cpu = b.lane(("cpu",), "main", LaneKind.CPU, pid=1, tid=1)
    streams = [b.lane(("gpu", s), f"stream {s}", LaneKind.GPU, device=0, stream=s)
               for s in range(4)]
    names = [f"kernel_{i}" for i in range(200)]
    t = np.cumsum(rng.integers(1_000, 20_000, half))
    kind = rng.choice(np.array([Kind.KERNEL] * 6 + [Kind.MEMCPY, Kind.MEMSET, Kind.COMMUNICATION],
                               np.int8), half)
    b.add_slices(t, rng.integers(500, 15_000, half), rng.choice(streams, half),
                 b.intern_many(names)[rng.integers(0, len(names), half)], kind=kind, device=0,
                 copy_kind=np.where(kind == Kind.MEMCPY, rng.integers(1, 5, half), 0),
                 bytes=rng.integers(0, 1 << 22, half))
    ops = ["aten::conv2d", "aten::add", "cudaLaunchKernel", "Optimizer.step#SGD.step",
           "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "cudaStreamSynchronize"]
    op_kind = np.array([Kind.CPU_OP, Kind.CPU_OP, Kind.RUNTIME, Kind.CPU_OP, Kind.CPU_OP,
                        Kind.RUNTIME], np.int8)
    which = rng.integers(0, len(ops), half)
    ht = np.cumsum(rng.integers(1_000, 20_000, half))
    b.add_slices(ht, rng.integers(500, 900, half), cpu, b.intern_many(ops)[which],
                 kind=op_kind[which])
    trace = b.finish()
    cuts = np.linspace(trace.start_ns, trace.end_ns, 101).astype(np.int64)
    return trace, Iterations("pattern", "bench", cuts[:-1], cuts[1:], 1.0)


def real(path: str):
    from sofa_gui.core.analysis.iterations import detect_iterations
    from sofa_gui.core.importers import load_trace

    trace = load_trace(path, use_cache=False)
    return trace, detect_iterations(trace)


def timed(trace, iters, repeat: int) -> tuple[float, float]:
    best_b = best_f = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        bd = compute_breakdown(trace, iters)
        t1 = time.perf_counter()
        find_bottlenecks(trace, iters, bd)
        t2 = time.perf_counter()
        best_b, best_f = min(best_b, t1 - t0), min(best_f, t2 - t1)
    return best_b, best_f


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", default=["1e5", "1e6", "3e6"])
    ap.add_argument("--real", nargs="*", default=[])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'trace':<44s} {'slices':>10s} {'iters':>6s} {'breakdown':>10s} {'findings':>9s} "
          f"{'Mslices/s':>10s}")
    cases = [(f"synthetic {s}", lambda s=s: synthetic(int(float(s)))) for s in args.sizes]
    cases += [(p.rsplit("/", 1)[-1][:44], lambda p=p: real(p)) for p in args.real]
    for label, make in cases:
        trace, iters = make()
        tb, tf = timed(trace, iters, args.repeat)
        rate = len(trace.slices) / (tb + tf) / 1e6
        print(f"{label:<44s} {len(trace.slices):>10,d} {len(iters):>6d} {tb:>10.3f} "
              f"{tf:>9.3f} {rate:>10.2f}")


if __name__ == "__main__":
    main()
