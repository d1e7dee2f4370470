"""Real CPU ``torch.profiler`` runs with known bottlenecks, for the advisor's tests.

Each run is an ordinary small training loop with one problem built in (warm-up
steps, thousands of tiny ops, a per-sample ``.item()`` loop, a checkpoint every N
steps, a DataLoader without workers), and most have a fixed twin (dense op,
vectorised reads, one loader worker).  Each is profiled with ``torch.profiler``
(its ``ProfilerStep#N`` annotations kept; the machine's core count, the cores other
processes kept busy meanwhile, how much slower one core computes while another is
busy and what a loader worker's batch costs the main thread -- calibrations run once
before the captures, ``sofa_gui.recorder.calibrate`` -- recorded as trace metadata
``cpu_cores``, ``cpu_busy_other_cores``, ``cpu_core_interference`` and
``cpu_batch_handover_*``) and written to ``NAME.json.gz``; every run is also
timed *without* the profiler, so a pair's real speed-up is known.  The timings go
to ``runs.json`` beside the traces, with the cores other processes kept busy while
they were taken and the main process's minor page faults per step.  ``--rounds N``
repeats the captures and timings N times (round k > 1 into ``OUT/rK/``), so a pair's
figures come with their spread.

    nice -n -15 python benchmarks/gen_advice_runs.py [--out tests/data/advice] [--only NAME]
                                                     [--no-calibrate] [--rounds N]

The input-bound pair on a quiet machine (the check of the advisor's estimate), then the table:

    python benchmarks/gen_advice_runs.py --out tests/data/advice/quiet \
        --only input_nw0 --only input_nw1 && python benchmarks/advice.py --only input

Timings on a shared machine are noisy: the script takes the median step time of
several unprofiled repeats.

**Steady heap** (default; ``--default-heap`` turns it off).  Under the profiler, the
input pair's AFTER (a loader worker) took 1,000-1,800 minor page faults in every
backward and its step grew by up to ~10 ms: its main heap grows 4-7 MB per step (glibc
``mallinfo2``), the gradients landing on fresh pages each step.  Traced with uprobes on
``malloc``/``free`` and the gradients' ``data_ptr()`` (``benchmarks/heap_probe.py``):
``posix_memalign`` leaves a ~112 B chunk in front of the 4 MB grad-W2 and the 7 MB
grad-W1 (the alignment split; freed into glibc's tcache, it is not coalesced).
During the next step's ``next(it)`` the profiler allocates two 96 B blocks (called from
Python) that it keeps until its results are collected; one takes that chunk.  The two
freed gradient holes stay apart, backward's grad-W2 goes into the old grad-W1 hole and
grad-W1 to fresh heap: +4 MB (1,024 faults) or +7 MB (1,728) per step.  BEFORE (many
small blocks made and freed by the loading on the main thread; not traced) and the
unprofiled AFTER keep a stable heap after a few steps.  So every run -- both sides of a
pair, profiled and unprofiled -- gets the same allocator setting: glibc's mmap threshold
fixed at 32 MiB and trimming off (``mallopt``), and after the run's set-up (a loader
worker is forked there) ``HEAP_MB`` of heap allocated, written (faulted in) and freed.
The heap's growth then lands on pages already mapped: no page faults, as without the
profiler.  (The prefault takes ~0.3 s after the worker is forked, so the worker starts
ahead and AFTER's first step waits less for its first batches: warm-up, which every
steady figure leaves out.)  Faults per step of the profiled and the unprofiled runs
are in ``runs.json`` (``profiled_minor_faults_per_step``, ``minor_faults_per_step``),
the setting in ``_machine.heap``.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gzip
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import torch
from gen_torch_loops import train_step as sgd_step  # one optimizer step, as in the loop captures
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sofa_gui.core.analysis.run_facts import HANDOVER_KEYS  # noqa: E402
from sofa_gui.recorder.calibrate import batch_handover, core_interference  # noqa: E402

OUT = ROOT / "tests" / "data" / "advice"
RUNS = {}


def run(name: str, steps: int, pair: str = ""):
    """Register ``fn() -> step callable``: set-up once, then one call per step."""
    def deco(fn):
        RUNS[name] = (fn, steps, pair)
        return fn
    return deco


def mlp(d_in=256, width=512):
    return torch.nn.Sequential(torch.nn.Linear(d_in, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 1))


# -- warm-up: a scripted model optimises itself on its first calls, a lazy cache fills --------
@run("warmup", 10)
def warmup():
    model = torch.jit.script(torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)]))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cache = {}

    def step(i):
        if "table" not in cache:  # first use builds a lookup table (e.g. a vocabulary)
            cache["table"] = torch.cat([torch.randn(10, 256) for _ in range(2000)])
        x = cache["table"][i * 64:(i + 1) * 64]
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


# -- thousands of tiny matmuls vs the same math as one batched op ------------------------------
TINY_N = 1000


@run("tiny_ops", 5, pair="tiny_ops_dense")
def tiny_ops():
    w = torch.randn(TINY_N, 16, 16)
    x = torch.randn(TINY_N, 8, 16)

    def step(i):
        out = [x[k] @ w[k] for k in range(TINY_N)]  # one small matmul per item
        return sum(o.sum() for o in out[:4])
    return step


@run("tiny_ops_dense", 5)
def tiny_ops_dense():
    w = torch.randn(TINY_N, 16, 16)
    x = torch.randn(TINY_N, 8, 16)

    def step(i):
        out = torch.bmm(x, w)  # the same products in one op
        return out[:4].sum()
    return step


# -- a per-sample .item() loop vs reading the whole batch once ---------------------------------
@run("item_loop", 8, pair="item_vectorised")
def item_loop():
    model, opt = mlp(), None
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 256), torch.randn(512, 1)

    def step(i):
        with torch.no_grad():
            pred = model(x)
        correct = 0
        for k in range(512):  # per-sample metric in Python
            correct += int(pred[k, 0].item() > 0)
        sgd_step(model, opt, x, y)
        return correct
    return step


@run("item_vectorised", 8)
def item_vectorised():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 256), torch.randn(512, 1)

    def step(i):
        with torch.no_grad():
            pred = model(x)
        correct = int((pred[:, 0] > 0).sum().item())
        sgd_step(model, opt, x, y)
        return correct
    return step


# -- a checkpoint every 4 steps ----------------------------------------------------------------
@run("checkpoint", 12)
def checkpoint():
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 1024))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 1024), torch.randn(32, 1024)
    folder = tempfile.mkdtemp(prefix="sofa-ckpt-")

    def step(i):
        sgd_step(model, opt, x, y)
        if i % 4 == 3:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                       os.path.join(folder, "ckpt.pt"))
    return step


# -- input-bound: per-sample Python augmentation, 0 vs 1 loader worker -------------------------
class Augmented(Dataset):
    """Each sample: a small image-like array jittered and normalised in numpy."""

    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.raw = rng.standard_normal((n, 3, 24, 24)).astype(np.float32)

    def __len__(self):
        return len(self.raw)

    def __getitem__(self, k):
        a = self.raw[k]
        for _ in range(6):  # a few cheap augmentations, done in Python per sample
            a = np.roll(a, 1, axis=2) * 0.99 + 0.01
        a = (a - a.mean()) / (a.std() + 1e-6)
        return torch.from_numpy(a.reshape(-1)), torch.tensor([float(a[0, 0, 0])])


def _input_run(workers):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3 * 24 * 24, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dl = DataLoader(Augmented(64 * 400), batch_size=64, num_workers=workers,
                    persistent_workers=workers > 0, prefetch_factor=2 if workers else None)
    it = iter(dl)

    def step(i):
        x, y = next(it)
        sgd_step(model, opt, x, y)
    return step


@run("input_nw0", 12, pair="input_nw1")
def input_nw0():
    return _input_run(0)


@run("input_nw1", 12)
def input_nw1():
    return _input_run(1)


# -- steady heap (see the module docstring) ------------------------------------------------
HEAP_MB = 192  # > the profiled AFTER's growth over its steps (~7 MB per step)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters
HEAP = {"on": False}


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt, libc.malloc, libc.free  # noqa: B018 (glibc only)
    except (OSError, AttributeError, TypeError):
        return None
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def steady_heap_setup() -> dict | None:
    """Fix glibc's mmap threshold (32 MiB) and turn trimming off, once per process: the
    heap then keeps what it faulted in.  None where the C library is not glibc."""
    libc = _libc()
    if libc is None or not (libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
                            and libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)):
        return None
    HEAP["on"] = True
    return {"mmap_threshold_mib": 32, "trim": "off", "prefault_mib": HEAP_MB,
            "how": f"mallopt(M_MMAP_THRESHOLD, 32 MiB), mallopt(M_TRIM_THRESHOLD, 1 GiB); "
                   f"after each run's set-up {HEAP_MB} MiB of heap allocated, written and "
                   f"freed, so heap growth under the profiler lands on mapped pages"}


def prefault_heap() -> int:
    """Allocate, write and free ``HEAP_MB`` of heap in 16 MiB blocks (after the run's
    set-up: pages shared with a just-forked worker are copied now, not in a step);
    returns the page faults it took."""
    libc = _libc() if HEAP["on"] else None
    if libc is None:
        return 0
    f0, size = _minflt(), 16 << 20
    ptrs = [libc.malloc(size) for _ in range(HEAP_MB // 16)]
    for p in ptrs:
        if p:
            ctypes.memset(p, 1, size)
    for p in ptrs:
        libc.free(p)
    return _minflt() - f0


# -- driver ----------------------------------------------------------------------------------
def profile_run(name: str, out: Path, calib: dict | None = None,
                hand: dict | None = None) -> list[int]:
    """Profile one run into ``out/NAME.json.gz``; returns its minor page faults per step."""
    fn, steps, _ = RUNS[name]
    step = fn()
    prefault_heap()
    dest = out / f"{name}.json.gz"
    faults = []

    def export(prof):
        tmp = out / f".{name}.json"
        prof.export_chrome_trace(str(tmp))
        with open(tmp, "rb") as src, gzip.open(dest, "wb", compresslevel=9) as dst:
            dst.write(src.read())
        tmp.unlink()

    load = OtherLoad()
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=export) as prof:
        prof.add_metadata_json("cpu_cores", json.dumps(os.cpu_count()))
        if calib:  # read by the advisor as the run fact cpu_interf
            prof.add_metadata_json("cpu_core_interference", json.dumps(calib["factor"]))
            prof.add_metadata_json("cpu_core_interference_how", json.dumps(
                f"calibration: {calib['kernel']}, {calib['alone_ms']} ms alone, "
                f"{calib['together_ms']} ms with another core busy"))
        if hand:  # read by the advisor as the run fact cpu_handover
            for key, value in zip(HANDOVER_KEYS, (hand["per_batch_us"], hand["per_tensor_us"],
                                                  hand["per_mb_us"], hand["how"])):
                prof.add_metadata_json(key, json.dumps(value))
        prof.step()  # the profiler's own warm-up step: nothing of the loop runs in it
        for i in range(steps):
            f0 = _minflt()
            step(i)
            faults.append(_minflt() - f0)
            if i == steps - 1:  # measured over the run, recorded before the trace is written
                prof.add_metadata_json("cpu_busy_other_cores", json.dumps(load.stop()))
            prof.step()
    return faults


class OtherLoad:
    """Cores kept busy by *other* processes while the run is profiled: all CPU time of
    the machine minus this process tree's (what ``sofa-gui record`` derives from its
    counters)."""

    def __init__(self):
        self.me = psutil.Process()
        self.t0 = time.monotonic()
        self.sys0 = psutil.cpu_times()
        self.own0 = self._own()

    def _own(self) -> float:
        procs = [self.me] + self.me.children(recursive=True)
        total = 0.0
        for p in procs:
            try:
                c = p.cpu_times()
                total += c.user + c.system + c.children_user + c.children_system
            except psutil.Error:
                pass
        return total

    def stop(self) -> float:
        wall = time.monotonic() - self.t0
        a, b = self.sys0, psutil.cpu_times()
        busy = sum(getattr(b, f) - getattr(a, f) for f in ("user", "system", "nice", "irq",
                                                            "softirq", "steal")
                   if hasattr(b, f))
        other = (busy - (self._own() - self.own0)) / wall if wall > 0 else 0.0
        return round(min(max(other, 0.0), os.cpu_count()), 2)


def time_run(name: str, repeats: int = 3) -> dict:
    """Median unprofiled step time (after the first two steps) over ``repeats`` runs, and
    the main process's median minor page faults per step (memory the allocator gave back
    and touches again: a cost that moves with the loading, invisible in the trace)."""
    fn, steps, _ = RUNS[name]
    per, faults = [], []
    for _ in range(repeats):
        step = fn()
        prefault_heap()
        times, flt = [], []
        for i in range(steps):
            f0, t0 = _minflt(), time.perf_counter()
            step(i)
            times.append(time.perf_counter() - t0)
            flt.append(_minflt() - f0)
        per.append(statistics.median(times[2:]) if len(times) > 3 else statistics.median(times))
        faults.append(statistics.median(flt[2:]) if len(flt) > 3 else statistics.median(flt))
    return {"median_step_s": statistics.median(per), "repeats": per,
            "minor_faults_per_step": statistics.median(faults)}


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", action="append", help="run only these (repeatable)")
    ap.add_argument("--repeats", type=int, default=3, help="unprofiled timings per run")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat captures + timings (round k > 1 into OUT/rK/)")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="do not measure (nor record) how much a busy core slows another "
                         "nor a loader worker's hand-over")
    ap.add_argument("--default-heap", action="store_true",
                    help="leave glibc's allocator as it is (no steady heap: see the docstring)")
    args = ap.parse_args(argv)
    heap = None if args.default_heap else steady_heap_setup()
    torch.set_num_threads(1)  # one intra-op thread: the second core is the "free" one
    names = args.only or list(RUNS)
    for k in range(1, args.rounds + 1):
        out = args.out if k == 1 else args.out / f"r{k}"
        if args.rounds > 1:
            print(f"round {k} -> {out}", file=sys.stderr)
        capture_round(out, names, args.repeats, not args.no_calibrate, heap)
    return 0


def capture_round(out: Path, names: list[str], repeats: int, calibrate: bool,
                  heap: dict | None = None) -> None:
    """Calibrations, then every run profiled, then all timed unprofiled (interleaved)."""
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / "runs.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    calib = core_interference() if calibrate else None
    hand = batch_handover() if calibrate and any(n.startswith("input") for n in names) \
        else None
    record["_machine"] = {"cpu_cores": os.cpu_count(), "torch": torch.__version__,
                          "intra_op_threads": 1, "core_interference": calib,
                          "batch_handover": hand, "load_avg_1min": os.getloadavg()[0],
                          "heap": heap or "glibc defaults (--default-heap, or not glibc)"}
    if calib:
        print(f"calibration: compute {calib['factor']:.2f}x slower with another core busy "
              f"({calib['alone_ms']} -> {calib['together_ms']} ms)", file=sys.stderr)
    if hand:
        print(f"calibration: hand-over {hand['per_batch_us']:.0f} us per batch + "
              f"{hand['per_tensor_us']:.0f} us per tensor + {hand['per_mb_us']:.0f} us per MB",
              file=sys.stderr)
    prof_faults = {name: profile_run(name, out, calib, hand) for name in names}
    times = {name: [] for name in names}
    faults = {name: [] for name in names}
    load = OtherLoad()
    for _ in range(repeats):  # pairs interleaved, so both see the same machine load
        for name in names:
            t = time_run(name, 1)
            times[name].append(t["median_step_s"])
            faults[name].append(t["minor_faults_per_step"])
    other = load.stop()
    for name in names:
        record[name] = {"median_step_s": statistics.median(times[name]),
                        "repeats": times[name], "cpu_busy_other_cores": other,
                        "minor_faults_per_step": statistics.median(faults[name]),
                        "profiled_minor_faults_per_step": prof_faults[name]}
        print(f"{name:18s} {1e3 * record[name]['median_step_s']:8.2f} ms/step unprofiled, "
              f"{record[name]['minor_faults_per_step']:.0f} page faults/step; profiled: "
              f"{prof_faults[name]}", file=sys.stderr)
    for name, (_, _, pair) in RUNS.items():
        if pair and name in record and pair in record:
            sp = record[name]["median_step_s"] / record[pair]["median_step_s"]
            record[name]["fixed_by"] = pair
            record[name]["measured_speedup_unprofiled"] = round(sp, 3)
            print(f"{name} -> {pair}: {sp:.2f}x unprofiled", file=sys.stderr)
    record_path.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
