"""Hand-made traces with known geometry for the timeline and view tests (no Qt needed)."""

from __future__ import annotations

import numpy as np

from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import CopyKind, Kind, LaneKind

#: An epoch-like clock, as real Kineto files have: tests must survive float conversion.
BASE = 1_700_000_000_000_000_000
US = 1000


def small_trace():
    """Two groups: CPU (nested ops, runtime calls) and GPU 0 (kernel, copy), plus a counter.

    Times (µs after BASE): main A [0,1000) with B [100,400), C [500,900) nested;
    launch [200,260) corr 1 -> kernel [300,700); memcpy call [600,650) corr 2 -> copy
    [700,800) H2D; counter "memory" steps 0 -> 5e9 at 500 µs.
    """
    b = TraceBuilder("small", "test")
    cpu = b.lane(("cpu", 1), "python main", LaneKind.CPU, "host 1", pid=1, tid=1)
    rt = b.lane(("cpu", 2), "thread 2", LaneKind.CPU, "host 1", pid=1, tid=2)
    gpu = b.lane(("gpu", 7), "stream 7", LaneKind.GPU, "GPU 0", device=0, stream=7)
    mem = b.lane(("counter", 0), "memory", LaneKind.COUNTER, "GPU 0", device=0)
    us = np.array
    b.add_slices(BASE + us([0, 100, 500]) * US, us([1000, 300, 400]) * US, cpu,
                 ["train_step", "aten::conv2d", "<b>not bold</b>"], kind=int(Kind.CPU_OP))
    b.add_slices(BASE + us([200, 600]) * US, us([60, 50]) * US, rt,
                 ["cudaLaunchKernel", "cudaMemcpyAsync"], kind=int(Kind.RUNTIME),
                 correlation=us([1, 2]))
    b.add_slices(BASE + us([300, 700]) * US, us([400, 100]) * US, gpu,
                 ["void gemm_kernel<float>(float*)", "Memcpy HtoD (Pageable -> Device)"],
                 kind=us([int(Kind.KERNEL), int(Kind.MEMCPY)]),
                 copy_kind=us([0, int(CopyKind.H2D)]), correlation=us([1, 2]),
                 bytes=us([-1, 4 << 20]),
                 args=[b'{"grid": [64, 1, 1], "block": [256, 1, 1]}', None])
    b.add_counter("memory", "bytes", mem, BASE + us([0, 500, 1000]) * US, [0.0, 5e9, 5e9])
    return b.finish()


def synthetic(n: int, lanes: int = 10, seed: int = 1):
    """``n`` flat slices over ``lanes`` GPU lanes in two groups (random names and sizes)."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder("synthetic", "test")
    names = b.intern_many([f"kernel_{i}" for i in range(50)])
    per = max(n // lanes, 1)
    for lane in range(lanes):
        lid = b.lane(("g", lane), f"stream {lane}", LaneKind.GPU, f"GPU {lane % 2}",
                     device=lane % 2, stream=lane)
        dur = rng.lognormal(6, 1.5, per).astype(np.int64) + 1
        start = BASE + np.cumsum(dur + rng.exponential(400, per).astype(np.int64)) - dur
        b.add_slices(start, dur, lid, names[rng.integers(0, 50, per)], kind=int(Kind.KERNEL))
    return b.finish(correlate=False)


def deep_trace(levels: int = 30):
    """One CPU lane with ``levels`` properly nested slices (a deep Python stack) and a GPU
    lane below it."""
    b = TraceBuilder("deep", "test")
    cpu = b.lane(("cpu", 1), "python main", LaneKind.CPU, "host", pid=1, tid=1)
    gpu = b.lane(("gpu", 0), "stream 0", LaneKind.GPU, "GPU 0", device=0, stream=0)
    i = np.arange(levels)
    b.add_slices(BASE + i * US, (2 * levels + 100 - 2 * i) * US, cpu,
                 [f"frame_{k}" for k in range(levels)], kind=int(Kind.PYTHON))
    b.add_slices([BASE + 10 * US], [50 * US], gpu, ["kernel"], kind=int(Kind.KERNEL))
    return b.finish()
