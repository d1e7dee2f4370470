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
ahead), for batches of one and two small tensors and one of 4 MiB.
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


#: The hand-over probe: prints one line of JSON, the median seconds the main thread spends
#: in ``next()`` (plus one read per page of the batch) per batch layout.
_HANDOVER = r"""
import json, statistics, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)

class Fresh(Dataset):  # new tensors per item: each is copied into shared memory, as a batch is
    def __init__(self, numels):
        self.numels = numels
    def __len__(self):
        return 1 << 20
    def __getitem__(self, k):
        return tuple(torch.ones(n) for n in self.numels)

def busy(secs):  # the training step's compute: the worker gets ahead meanwhile
    end = time.perf_counter() + secs
    while time.perf_counter() < end:
        pass

def median_next(numels, n):
    it = iter(DataLoader(Fresh(numels), batch_size=None, num_workers=1, prefetch_factor=2))
    next(it)
    times = []
    for _ in range(n):
        busy(0.012)
        t0 = time.perf_counter()
        batch = next(it)
        for t in batch:  # first touch of the mapped pages, one read per page
            t[::1024].sum()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)

n = int(sys.argv[1])
print(json.dumps({k: median_next(v, n) for k, v in
                  (("one", [64]), ("two", [64, 64]), ("big", [1 << 20]))}), flush=True)
"""


def batch_handover(batches: int = 30, timeout: float = 60.0) -> dict | None:
    """What a DataLoader worker's batch costs the main thread on this machine:
    ``{"per_batch_us", "per_tensor_us", "per_mb_us", "batches", "how"}`` (one worker, the
    main thread busy between batches; medians); None without PyTorch or a second core."""
    if (os.cpu_count() or 1) < 2:
        return None
    env = dict(os.environ, **_ONE_THREAD)
    try:
        out = subprocess.run([sys.executable, "-c", _HANDOVER, str(batches)], env=env,
                             capture_output=True, text=True, timeout=timeout, check=True)
        t = json.loads(out.stdout.strip().splitlines()[-1])
        one, two, big = (float(t[k]) for k in ("one", "two", "big"))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        return None
    per_tensor = max(two - one, 0.0)
    return {"per_batch_us": round(1e6 * max(one - per_tensor, 0.0), 1),
            "per_tensor_us": round(1e6 * per_tensor, 1),
            "per_mb_us": round(1e6 * max(big - one, 0.0) / 4.194304, 1),
            "batches": batches,
            "how": (f"DataLoader, 1 worker, main thread busy 12 ms between batches; median "
                    f"next() of {batches} batches: one 256 B tensor {1e6 * one:.0f} us, two "
                    f"{1e6 * two:.0f} us, one 4 MiB {1e6 * big:.0f} us")}


def _ask(child: subprocess.Popen, cmd: str, seconds: float) -> float:
    child.stdin.write(f"{cmd} {seconds}\n")
    child.stdin.flush()
    return float(child.stdout.readline())


if __name__ == "__main__":
    print(core_interference())
    print(batch_handover())
