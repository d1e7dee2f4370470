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

A loader worker also hands every batch over, and both sides pay for it: the main process
unpickles it, fetches one shared-memory file descriptor per tensor from the worker (a
connection to a thread of the worker, which answers when it gets the worker's GIL), maps
it and faults its pages in; the worker collates into fresh shared memory (every page
faulted in again for every batch), pickles it and serves the descriptors.
:func:`batch_handover` times that on the machine with PyTorch's own ``DataLoader``: the
main thread's time receiving a batch (one worker, the main thread busy between batches as
a training step is, so the worker is ahead) and the worker's CPU time for it beyond what
making the same batch costs in the main process (its threads' CPU clocks), for batches of
one and two small tensors and one of 4 MiB, in interleaved rounds, with medians of paired
differences: single batches vary by milliseconds.
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


#: The hand-over probe: prints one line of JSON; per layout (one 256 B tensor, two, one
#: 4 MiB tensor per batch) and round, the main thread's seconds in ``next()`` (plus one
#: read per page of the batch and its release) for every batch with one worker, and per
#: batch the CPU seconds of making it in the main process (``num_workers=0``) and of the
#: worker process (all its threads, ``/proc/<pid>/task/*/schedstat``; null where the
#: machine has no such file).  Items are views of tensors made once, so the batch's bytes
#: are written only by the collate, as a real loader's are.  Each round starts fresh
#: workers.
_HANDOVER = r"""
import json, os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)

class Views(Dataset):
    def __init__(self, k, n):
        self.parts = [torch.ones(8, n) for _ in range(k)]
    def __len__(self):
        return 1 << 20
    def __getitem__(self, i):
        return tuple(p[i % 8] for p in self.parts)

def busy(secs):  # the training step's compute: the worker gets ahead meanwhile
    end = time.perf_counter() + secs
    while time.perf_counter() < end:
        pass

def touch(batch):  # first touch of the batch's pages, one read per page
    for t in batch:
        t.view(-1)[::1024].sum()

def cpu_of(pids):
    total = 0
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    return total / 1e9

def workers():
    pids = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    return pids

def loader_round(k, n, nw, batches, walls):
    it = iter(DataLoader(Views(k, n), batch_size=2, num_workers=nw,
                         prefetch_factor=2 if nw else None))
    for _ in range(3):  # the workers' start-up, not timed
        touch(next(it))
    try:
        pids = workers() if nw else []
        cpu0 = cpu_of(pids)
    except (OSError, ValueError, IndexError):
        pids, cpu0 = None, 0.0
    own = 0.0
    for _ in range(batches):
        busy(0.006)
        t0, c0 = time.perf_counter(), time.thread_time()
        batch = next(it)
        touch(batch)
        del batch  # and its release (unmap, close)
        walls.append(time.perf_counter() - t0)
        own += time.thread_time() - c0
    try:
        cpu = None if pids is None else (cpu_of(pids) if nw else own) - cpu0
    except (OSError, ValueError, IndexError):
        cpu = None
    del it
    return None if cpu is None else cpu / batches

batches, rounds = int(sys.argv[1]), int(sys.argv[2])
layouts = {"one": (1, 32), "two": (2, 32), "big": (1, 1 << 19)}  # 2 items a batch
out = {name: {"next": [], "local": [], "worker": []} for name in layouts}
for _ in range(rounds):
    for name, (k, n) in layouts.items():
        o = out[name]
        o["local"].append(loader_round(k, n, 0, batches, []))
        o["worker"].append(loader_round(k, n, 1, batches, o["next"]))
print(json.dumps(out), flush=True)
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


def batch_handover(batches: int = 40, rounds: int = 2, timeout: float = 60.0) -> dict | None:
    """What a DataLoader worker's batch costs on this machine, both sides:
    ``{"per_batch_us", "per_tensor_us", "per_mb_us"}`` the main thread's time receiving it,
    ``{"send_per_batch_us", "send_per_tensor_us", "send_per_mb_us"}`` (None where the
    machine does not show threads' CPU clocks) the worker's CPU time for it beyond making
    it, plus ``"batches"``, ``"spread_us"`` and ``"how"``; ``batches`` per layout and round,
    ``rounds`` of fresh workers.  None without PyTorch or a second core."""
    if (os.cpu_count() or 1) < 2:
        return None
    env = dict(os.environ, **_ONE_THREAD)
    try:
        out = subprocess.run([sys.executable, "-c", _HANDOVER, str(batches), str(rounds)],
                             env=env, capture_output=True, text=True, timeout=timeout,
                             check=True)
        t = json.loads(out.stdout.strip().splitlines()[-1])
        got = {k: t[k] for k in ("one", "two", "big")}
        walls = [[float(x) for x in got[k]["next"]] for k in ("one", "two", "big")]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError, TypeError):
        return None
    main = handover_parts_from(*walls)
    if main is None:
        return None
    return {**main, **send_parts_from(got), "how": main["how"] + _SEND_HOW}


_SEND_HOW = ("; the worker's CPU per batch (its threads' clocks) less making the same batch "
             "in the main process, medians over rounds")


def send_parts_from(got: dict) -> dict:
    """The worker's side (see :func:`batch_handover`) from per-round CPU seconds per batch
    of the worker (``got[layout]["worker"]``) and of the main process making the batch
    (``["local"]``), for the layouts ``one``, ``two``, ``big``: medians over rounds of
    worker minus local, the tensor and MB parts as differences of those medians.  Nones
    where a layout has no usable round."""
    extra = {}
    for name in ("one", "two", "big"):
        pairs = [w - x for w, x in zip(got[name]["worker"], got[name]["local"])
                 if isinstance(w, (int, float)) and isinstance(x, (int, float))]
        extra[name] = statistics.median(pairs) if pairs else None
    if None in extra.values():
        return {"send_per_batch_us": None, "send_per_tensor_us": None, "send_per_mb_us": None}
    tensor = max(extra["two"] - extra["one"], 0.0)
    return {"send_per_batch_us": round(1e6 * max(extra["one"] - tensor, 0.0), 1),
            "send_per_tensor_us": round(1e6 * tensor, 1),
            "send_per_mb_us": round(1e6 * max(extra["big"] - extra["one"], 0.0) / 4.194304, 1)}


def handover_parts_from(one: list[float], two: list[float], big: list[float]) -> dict | None:
    """The main thread's figures from per-batch seconds in ``next()`` (see
    :func:`batch_handover`): medians, the tensor's part as the median of the paired
    differences (two tensors minus one, batch by batch); None when a layout has no batch."""
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
            "how": (f"DataLoader, 1 worker, main thread busy 6 ms between batches; {n} "
                    f"batches per layout; median next() and first touch of the pages: "
                    f"one 256 B tensor {1e6 * m1:.0f} us, two "
                    f"{1e6 * statistics.median(two):.0f} us (quartiles "
                    f"{1e6 * q[0]:.0f}-{1e6 * q[2]:.0f}), one 4 MiB "
                    f"{1e6 * statistics.median(big):.0f} us")}


def _ask(child: subprocess.Popen, cmd: str, seconds: float) -> float:
    child.stdin.write(f"{cmd} {seconds}\n")
    child.stdin.flush()
    return float(child.stdout.readline())


if __name__ == "__main__":
    print(core_interference())
    print(batch_handover())
