"""What one framework call costs, what a batch adds to it and what the profiler adds: the
measurements behind the batching estimate's constants
(``sofa_gui/core/analysis/findings/batch_estimate.py``).

    python benchmarks/corpus/call_cost.py [--rounds 5]

(on an idle machine; one intra-op thread, as the corpus captures).  Printed, medians over
the rounds:

* **profiler cost per recorded event**: loops of small calls of a few kinds (one op, a
  linear layer of several nested ops, an index), each timed without the profiler and under
  ``torch.profiler`` (CPU activity, input shapes recorded, as a capture), the difference
  over the events the profiler recorded; and steps of 20 to 3,000 tiny ops marked by
  ``prof.step()`` as a capture marks them: what a ``ProfilerStep#N`` span holds beyond its
  ops, and how far into it the first op starts;
* **matmul time by batch**: ``addmm`` of ``m`` rows on the weights of small layers,
  unprofiled: one call at batch 1 (its fixed cost and one row's math) and the rate at
  which a larger batch's further rows run (FLOP/s);
* **elementwise time by batch**: GELU, ReLU, layer norm and argmax on ``m`` rows of 96:
  the time a batch's further elements add (ns per element).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from functools import partial

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule


def _loop_time(fn, n: int) -> float:
    """Seconds per call of ``fn`` over ``n`` calls (after 50 warm-up calls)."""
    for _ in range(50):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def _median_time(fn, n: int, rounds: int) -> float:
    return statistics.median(_loop_time(fn, n) for _ in range(rounds))


def _profiled(fn, n: int) -> tuple[float, float]:
    """(seconds per call, events per call) under ``torch.profiler``."""
    for _ in range(50):
        fn()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = (time.perf_counter() - t0) / n
    return dt, sum(1 for _ in prof.profiler.kineto_results.events()) / n


def calls() -> dict:
    """Small calls of a few kinds, by name."""
    x, w, b = torch.randn(1, 96), torch.randn(96, 96), torch.randn(96)
    rows = torch.randn(64, 48)
    lin = torch.nn.Linear(96, 96)
    return {"neg (one op)": partial(torch.neg, x),
            "F.linear batch 1": partial(F.linear, x, w, b),
            "nn.Linear module batch 1": partial(lin, x),
            "index a row": partial(rows.narrow, 0, 5, 1)}


def profiler_cost(rounds: int, n: int = 2000) -> None:
    for name, fn in calls().items():
        got = []
        for _ in range(rounds):
            bare = _loop_time(fn, n)
            prof, events = _profiled(fn, n)
            got.append((bare, prof, events))
        bare, prof, events = (statistics.median(g[k] for g in got) for k in range(3))
        print(f"{name:<26} events/call {events:5.1f}  us bare {bare * 1e6:7.2f} profiled "
              f"{prof * 1e6:7.2f}  profiler us/event {(prof - bare) * 1e6 / events:5.2f}",
              flush=True)


def _step_spans(step, n: int) -> tuple[float, float]:
    """(mean ``ProfilerStep#N`` span, mean time from a span's start to its first op), s."""
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/trace.json"
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=n),
                     on_trace_ready=partial(_export, path)) as prof:
            prof.step()  # the profiler's own warm-up step, as a capture's
            for _ in range(n):
                step()
                prof.step()
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    spans = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")][1:]
    ops = sorted(e["ts"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                 and not str(e.get("name")).startswith("ProfilerStep#"))
    lead = [min((t for t in ops if sp["ts"] <= t < sp["ts"] + sp["dur"]), default=sp["ts"])
            - sp["ts"] for sp in spans]
    return statistics.mean(e["dur"] for e in spans) * 1e-6, statistics.mean(lead) * 1e-6


def _export(path: str, prof) -> None:
    prof.export_chrome_trace(path)


def step_cost(rounds: int, n: int = 30) -> None:
    x = torch.randn(1, 16)
    for ops in (20, 500, 3000):
        step = partial(_tiny_ops, x, ops)
        got = [(_loop_time(step, n), *_step_spans(step, n)) for _ in range(rounds)]
        bare, span, lead = (statistics.median(g[k] for g in got) for k in range(3))
        print(f"steps of {ops:4d} ops: us bare {bare * 1e6:7.1f}, ProfilerStep span "
              f"{span * 1e6:7.1f} (first op {lead * 1e6:5.1f} us into it)", flush=True)


def _tiny_ops(x, ops: int) -> None:
    for _ in range(ops):
        torch.neg(x)


LAYERS = ((48, 96), (96, 96), (64, 384), (128, 384), (96, 500), (128, 1000))
BATCHES = (1, 4, 16, 64)


def matmul_rates(rounds: int, n: int = 400) -> None:
    for k, m_out in LAYERS:
        w, b = torch.randn(k, m_out), torch.randn(m_out)
        per = {m: _median_time(partial(torch.addmm, b, torch.randn(m, k), w), n, rounds)
               for m in BATCHES}
        flop = 2 * k * m_out
        rates = "  ".join(f"m={m} {per[m] * 1e6:6.1f}us (rows "
                          f"{(m - 1) * flop / max(per[m] - per[1], 1e-9) / 1e9:5.1f} GFLOP/s)"
                          for m in BATCHES[1:])
        print(f"addmm {k}x{m_out:<5} m=1 {per[1] * 1e6:6.1f}us  {rates}", flush=True)


def elementwise_rates(rounds: int, n: int = 2000, width: int = 96) -> None:
    norm = torch.nn.LayerNorm(width)
    ops = {"gelu": F.gelu, "relu": F.relu, "layer_norm": norm,
           "argmax": partial(torch.argmax, dim=-1)}
    for name, op in ops.items():
        per = {m: _median_time(partial(op, torch.randn(m, width)), n, rounds) for m in BATCHES}
        add = (per[64] - per[1]) / (63 * width)
        print(f"{name:<11} m=1 {per[1] * 1e6:6.2f}us m=64 {per[64] * 1e6:6.2f}us  further "
              f"elements {add * 1e9:5.2f} ns each", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with torch.inference_mode():
        profiler_cost(args.rounds)
        step_cost(args.rounds)
        matmul_rates(args.rounds)
        elementwise_rates(args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
