"""Why the profiled input pair's AFTER re-faulted its gradient every step: per-step minor
page faults and glibc main-arena size of the input run, in four modes.

    python benchmarks/heap_probe.py [--workers 1] [--steps 10]

* ``plain``: unprofiled, glibc defaults.
* ``retained``: unprofiled, plus 100 small blocks (48 B) allocated and kept at every
  module's forward (6 per step: ~600 blocks, during the forward as the profiler's per-op
  records are) -- what those records do to the heap, without the profiler.
* ``profiled``: under ``torch.profiler`` (CPU), glibc defaults.
* ``profiled+steady``: under the profiler with ``gen_advice_runs.py``'s steady heap.

Each mode runs in its own process (mallopt settings last for the process).  On the
2-vCPU VM (other work running): AFTER ``profiled`` grows 4-7 MB and takes ~1,000-1,750
faults in every step; ``profiled+steady`` 20-45; ``plain`` settles at tens but trims and
regrows now and then (~1,000-2,900 in a few steps); ``retained`` looks like ``plain``:
small kept blocks alone do not reproduce the steady growth.  Timings printed beside them
are noisy on a shared machine; the faults and the arena are not.

What fragments the heap was traced with uprobes (no LD_PRELOAD; root, perf with libc
debug info): ``perf probe -x LIBC 'malloc bytes=%di:u64'``, ``'mret=malloc%return
$retval'``, ``'pfree=free ptr=%di:u64'``, then ``perf record -k CLOCK_MONOTONIC -e
probe_libc:malloc -e probe_libc:mret__return -e probe_libc:pfree`` around a profiled
AFTER that prints the gradients' ``data_ptr()`` per step; the blocks alive inside the
previous step's gradient region are the ones that split it (docs/design/steady-heap.md).
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
MODES = ("plain", "retained", "profiled", "profiled+steady")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                                               "hblkhd", "usmblks", "fsmblks", "uordblks",
                                               "fordblks", "keepcost")]


def one_mode(mode: str, workers: int, steps: int) -> str:
    """Run the input pair's ``workers`` side in this process; one line per mode."""
    import gen_advice_runs as g
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    libc = g._libc()
    libc.mallinfo2.restype = _MallInfo2
    torch.set_num_threads(1)
    if mode.endswith("steady"):
        g.steady_heap_setup()
    step = g._input_run(workers)
    g.prefault_heap()
    kept, rows = [], []
    if mode == "retained":
        torch.nn.modules.module.register_module_forward_hook(
            lambda *_: kept.extend(libc.malloc(48) for _ in range(100)))

    def body(prof):
        for i in range(steps):
            f0, t0 = g._minflt(), time.perf_counter()
            step(i)
            dt, df = time.perf_counter() - t0, g._minflt() - f0
            rows.append(f"{1e3 * dt:.0f} ms {df} flt {libc.mallinfo2().arena / 2**20:.0f} MiB")
            if prof:
                prof.step()
    if mode.startswith("profiled"):
        with profile(activities=[ProfilerActivity.CPU], on_trace_ready=lambda p: None,
                     schedule=schedule(wait=0, warmup=1, active=steps)) as prof:
            prof.step()
            body(prof)
    else:
        body(None)
    return f"{mode:16s} " + " | ".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one child
    args = ap.parse_args(argv)
    if args.mode:
        print(one_mode(args.mode, args.workers, args.steps), flush=True)
        return 0
    print(f"input run, {args.workers} loader worker(s): per step time, minor faults, "
          f"main arena")
    for mode in MODES:
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--workers",
                              str(args.workers), "--steps", str(args.steps)],
                             capture_output=True, text=True, check=False)
        print(out.stdout.strip() or f"{mode}: failed: {out.stderr.strip()[-300:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
