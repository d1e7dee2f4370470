"""How much slower one core computes while another core is busy: a fact about the machine.

Work moved to a "free" core (a DataLoader worker, a parallel ``tf.data`` map) is not
free: the cores share caches and memory bandwidth and, on SMT machines and many VMs,
the execution units of one physical core, so the step left on the first core slows
down.  :func:`core_interference` measures it with a fixed kernel (a single-threaded
matrix multiply over 4 MiB of weights, more than a core's L2, plus element-wise passes
over a 1 MiB array) timed alone and while a second process runs the same kernel, in
interleaved rounds.  The advisor reads the factor (trace metadata
``cpu_core_interference``, see ``run_facts``) to slow the compute that overlaps work
moved to other cores.  The kernel is fixed, not fitted to any workload: a step whose
kernels are more (or less) memory-bound than it sees more (or less) interference.

A loader worker also hands every batch over: the main process unpickles it, receives one
shared-memory file descriptor per tensor from the worker and maps it.
:func:`batch_handover` times that on the machine with PyTorch's own ``DataLoader`` (one
worker, the main thread busy between batches as a training step is, so the worker is
ahead), for batches of one and two small tensors (interleaved) and one of 4 MiB, and
takes medians of paired differences: single batches vary by milliseconds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

#: One child process: reads commands on stdin; ``run S`` runs the kernel for S seconds
#: and prints the median CPU time of one rep (CPU time, not wall: time the process waits
#: while other processes hold the cores is not interference); ``busy S`` runs it for S
#: seconds and prints ``done``.
_CHILD = r"""
import sys, time
import numpy as np
rng = np.random.default_rng(0)
a = rng.standard_normal((64, 1024), dtype=np.float32)
w = rng.standard_normal((1024, 1024), dtype=np.float32)
x = rng.standard_normal(1 << 18, dtype=np.float32)

def rep():
    a @ w
    for _ in range(4):
        (x * 1.01 + 0.5).sum()

rep()
print("ready", flush=True)
for line in sys.stdin:
    cmd, secs = line.split()
    end = time.perf_counter() + float(secs)
    times = []
    while time.perf_counter() < end:
        t0 = time.thread_time()
        rep()
        times.append(time.thread_time() - t0)
    times.sort()
    print(times[len(times) // 2] if cmd == "run" else "done", flush=True)
"""
#: One thread per child: the factor is about two cores, not about BLAS thread pools.
_ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")}


def core_interference(seconds: float = 0.25, rounds: int = 3) -> dict | None:
    """``{"factor": together / alone, "alone_ms", "together_ms", "rounds", "kernel"}``
    (median CPU time of one rep alone and with a busy sibling, median over rounds);
    None on a one-core machine or when the children cannot run (no numpy, no fork)."""
    if (os.cpu_count() or 1) < 2:
        return None
    env = dict(os.environ, **_ONE_THREAD)
    try:
        probe, sib = (subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True, env=env) for _ in range(2))
    except OSError:
        return None
    try:
        if probe.stdout.readline().strip() != "ready" or \
                sib.stdout.readline().strip() != "ready":
            return None
        alone, together = [], []
        for _ in range(rounds):  # interleaved: both see the same drift of the machine
            alone.append(_ask(probe, "run", seconds))
            sib.stdin.write(f"busy {seconds + 0.1}\n")
            sib.stdin.flush()
            time.sleep(0.05)  # the sibling is running before the probe starts
            together.append(_ask(probe, "run", seconds))
            sib.stdout.readline()
    except (OSError, ValueError):
        return None
    finally:
        for p in (probe, sib):
            p.kill()
            p.wait()
    a, t = statistics.median(alone), statistics.median(together)
    return {"factor": round(t / a, 3), "alone_ms": round(1e3 * a, 3),
            "together_ms": round(1e3 * t, 3), "rounds": rounds,
            "kernel": "1-thread 64x1024 @ 1024x1024 float32 matmul + 4 passes over 1 MiB"}


#: The hand-over probe: prints one line of JSON, the seconds the main thread spends in
#: ``next()`` (plus one read per page of the batch and its release) for every batch, per
#: layout.  One loader serves the one- and two-tensor batches in turn (item k has layout
#: k % 2), so they are timed interleaved, beside the same worker, and their difference is
#: taken cycle by cycle; the 4 MiB batches get their own loader (a batch after one of them
#: waits longer for the worker).  Each round starts fresh workers.
_HANDOVER = r"""
import json, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)

class Cycle(Dataset):  # new tensors per item: each is copied into shared memory, as a batch is
    def __init__(self, layouts):
        self.layouts = layouts
    def __len__(self):
        return 1 << 20
    def __getitem__(self, k):
        return tuple(torch.ones(n) for n in self.layouts[k % len(self.layouts)])

def busy(secs):  # the training step's compute: the worker gets ahead meanwhile
    end = time.perf_counter() + secs
    while time.perf_counter() < end:
        pass

def loader_round(layouts, cycles, times):
    it = iter(DataLoader(Cycle(layouts), batch_size=None, num_workers=1, prefetch_factor=2))
    for _ in layouts:  # the worker's start-up and a first cycle, not timed
        next(it)
    for k in range(len(layouts) * cycles):
        busy(0.012)
        t0 = time.perf_counter()
        batch = next(it)
        for t in batch:  # first touch of the mapped pages, one read per page
            t[::1024].sum()
        del batch  # and its release (unmap, close)
        times[k % len(layouts)].append(time.perf_counter() - t0)

cycles, rounds = int(sys.argv[1]), int(sys.argv[2])
one, two, big = [], [], []
for _ in range(rounds):
    loader_round(([64], [64, 64]), cycles, (one, two))  # 256 B tensors
    loader_round(([1 << 20],), cycles, (big,))  # 4 MiB
print(json.dumps({"one": one, "two": two, "big": big}), flush=True)
"""


def calibrate_cores(notes: list[str]) -> dict:
    """``{"core_interference": ..., "batch_handover": ...}`` as the manifest's host section
    keeps them (None where not measured, with a line in ``notes`` saying why)."""
    out = {"core_interference": core_interference(), "batch_handover": batch_handover()}
    if out["core_interference"] is None:
        notes.append("--calibrate-cores: could not measure (one core, or no numpy)")
    if out["batch_handover"] is None:
        notes.append("--calibrate-cores: batch hand-over not measured (one core, or no "
                     "PyTorch in sofa-gui's Python)")
    return out


def batch_handover(batches: int = 80, rounds: int = 2, timeout: float = 60.0) -> dict | None:
    """What a DataLoader worker's batch costs the main thread on this machine:
    ``{"per_batch_us", "per_tensor_us", "per_mb_us", "batches", "spread_us", "how"}`` (one
    worker, the main thread busy between batches; ``batches`` per layout over ``rounds``
    fresh workers).  Robust statistics, because single batches vary by milliseconds on a
    shared machine: the median batch of one tensor, the median of the *paired* differences
    (two tensors minus the one-tensor batch of the same cycle) and, per MB, the 4 MiB
    batches' median minus the one-tensor median.
    ``spread_us``: the interquartile range of the two-tensor batches.  None without
    PyTorch or a second core."""
    if (os.cpu_count() or 1) < 2:
        return None
    env = dict(os.environ, **_ONE_THREAD)
    cycles = max(1, -(-batches // max(1, rounds)))
    try:
        out = subprocess.run([sys.executable, "-c", _HANDOVER, str(cycles), str(rounds)],
                             env=env, capture_output=True, text=True, timeout=timeout,
                             check=True)
        t = json.loads(out.stdout.strip().splitlines()[-1])
        one, two, big = ([float(x) for x in t[k]] for k in ("one", "two", "big"))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError, TypeError):
        return None
    return handover_parts_from(one, two, big)


def handover_parts_from(one: list[float], two: list[float], big: list[float]) -> dict | None:
    """The calibration's figures from per-batch seconds, cycle by cycle (see
    :func:`batch_handover`); None when a layout has no batch."""
    n = min(len(one), len(two), len(big))
    if n == 0:
        return None
    one, two, big = one[:n], two[:n], big[:n]
    m1 = statistics.median(one)
    per_tensor = max(statistics.median(b - a for a, b in zip(one, two)), 0.0)
    per_mb = max(statistics.median(big) - m1, 0.0) / 4.194304
    q = statistics.quantiles(two, n=4) if n > 1 else [two[0]] * 3
    return {"per_batch_us": round(1e6 * max(m1 - per_tensor, 0.0), 1),
            "per_tensor_us": round(1e6 * per_tensor, 1),
            "per_mb_us": round(1e6 * per_mb, 1),
            "batches": n, "spread_us": round(1e6 * (q[2] - q[0]), 1),
            "how": (f"DataLoader, 1 worker, main thread busy 12 ms between batches; {n} "
                    f"batches per layout (one and two tensors interleaved); median next(): "
                    f"one 256 B tensor "
                    f"{1e6 * m1:.0f} us, two {1e6 * statistics.median(two):.0f} us "
                    f"(quartiles {1e6 * q[0]:.0f}-{1e6 * q[2]:.0f}), one 4 MiB "
                    f"{1e6 * statistics.median(big):.0f} us")}


def _ask(child: subprocess.Popen, cmd: str, seconds: float) -> float:
    child.stdin.write(f"{cmd} {seconds}\n")
    child.stdin.flush()
    return float(child.stdout.readline())


if __name__ == "__main__":
    print(core_interference())
    print(batch_handover())
