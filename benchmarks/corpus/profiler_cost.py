"""What the profiler adds to each phase of a corpus case, and what each variant's phases
take: the measurements behind the host-side estimates' constants
(``sofa_gui/core/analysis/findings/host_estimate.py``).

    python benchmarks/corpus/profiler_cost.py [--rounds 5] CASE[:VARIANT,...] ...
    $JAX_VENV/bin/python benchmarks/corpus/profiler_cost.py --jax jax_infer_readback
    $TF_VENV/bin/python benchmarks/corpus/profiler_cost.py --tf tf_infer_labels_readback

(on an idle machine).  Per round and variant (the case's ``run`` and ``fix`` unless
named), the loop is built afresh, its warm-up steps run, the heap is collected, then its
steps are timed twice in turn: without the profiler (as the truth is) and under it (as a
capture is: ``torch.profiler`` with CPU activity and input shapes recorded,
``jax.profiler.trace`` with its Python tracer, or ``tf.profiler.experimental``; a Keras
``fit`` case's steps by Keras' ``TensorBoard(profile_batch=...)`` callback, each variant's
``fit`` built afresh with its warm-up steps).  Printed
per variant: the mean step and each phase's mean time (what is in no named phase is
``rest``), unprofiled and profiled, the events ``torch.profiler`` records per step and, per
phase, the profiled time over the unprofiled one.  Medians over the rounds.  One intra-op
thread, as the captures.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpus.common import CASES, ROUND_S, release, time_steps  # noqa: E402

JAX = "--jax" in sys.argv
TF = "--tf" in sys.argv


def timed(step, first: int, n: int, profiled: bool) -> tuple[list, float]:
    """(per step (wall s, phase seconds), events recorded per step)."""
    if not profiled:
        return time_steps(step, first, n, ROUND_S, 50 * n), 0.0
    if JAX:
        import jax

        with tempfile.TemporaryDirectory() as tmp, jax.profiler.trace(tmp):
            return time_steps(step, first, n), 0.0
    if TF:
        import tensorflow as tf

        with tempfile.TemporaryDirectory() as tmp:
            tf.profiler.experimental.start(tmp)
            try:
                return time_steps(step, first, n), 0.0
            finally:
                tf.profiler.experimental.stop()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        got = time_steps(step, first, n)
    return got, sum(1 for _ in prof.profiler.kineto_results.events()) / max(len(got), 1)


def phases(got: list) -> dict[str, float]:
    """Mean ms per step of each phase, ``rest`` for what no phase holds, ``step`` the wall."""
    out: dict[str, float] = {}
    for _, ph in got:
        for k, v in ph.items():
            out[k] = out.get(k, 0.0) + v
    n = len(got)
    out = {k: v / n * 1e3 for k, v in out.items()}
    out["step"] = statistics.mean(w for w, _ in got) * 1e3
    out["rest"] = out["step"] - sum(v for k, v in out.items() if k != "step")
    return out


def fit_timed(name: str, variant: str, profiled: bool) -> tuple[list, float]:
    """A Keras ``fit`` case's steps of ``variant`` (per step (wall s, {})), with Keras'
    ``TensorBoard`` callback profiling them as a capture does or without it; its last step
    is left out either way (under the profiler it stops the profiler and writes the
    capture, no step's work)."""
    from corpus import run_tf

    spec, c = run_tf.FIT[name], CASES[name]
    pipe = spec.pipe if variant == "run" else variant
    with tempfile.TemporaryDirectory() as tmp:
        got = run_tf.run_fit(spec, pipe, c.steps, Path(tmp) if profiled else None,
                             skip=c.warmup)
    return got[:-1], 0.0


def measure(name: str, variants: list[str], rounds: int) -> dict:
    """{(variant, profiled): [phases per round]} and {variant: events per step}."""
    c = CASES[name]
    got: dict = {}
    events: dict = {}
    fit = TF and name in sys.modules["corpus.run_tf"].FIT
    for _ in range(rounds):
        for v in variants:
            for profiled in (False, True):
                if fit:
                    steps, ev = fit_timed(name, v, profiled)
                    got.setdefault((v, profiled), []).append(phases(steps))
                    events.setdefault(v, []).append(ev) if profiled else None
                    continue
                step = c.build(v)
                time_steps(step, 0, c.warmup)
                gc.collect()
                steps, ev = timed(step, c.warmup, c.steps, profiled)
                release(step)
                got.setdefault((v, profiled), []).append(phases(steps))
                events.setdefault(v, []).append(ev) if profiled else None
    return got, {v: statistics.median(e) for v, e in events.items()}


def report(name: str, variants: list[str], rounds: int) -> None:
    got, events = measure(name, variants, rounds)
    for v in variants:
        bare, prof = got[(v, False)], got[(v, True)]
        keys = sorted({k for r in bare + prof for k in r}, key=lambda k: (k != "step", k))
        med = {k: (statistics.median(r.get(k, 0.0) for r in bare),
                   statistics.median(r.get(k, 0.0) for r in prof)) for k in keys}
        cols = "  ".join(f"{k} {a:.3f}/{b:.3f} ({b / a if a > 0.001 else 0:.2f}x)"
                         for k, (a, b) in med.items())
        print(f"{name:<26} {v:<8} events/step {events[v]:8.0f}  ms bare/profiled: {cols}",
              flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", help="CASE or CASE:VARIANT,VARIANT")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jax", action="store_true", help="JAX cases (run in the JAX venv)")
    ap.add_argument("--tf", action="store_true",
                    help="TensorFlow cases (run in the TensorFlow venv)")
    args = ap.parse_args(argv)
    if args.jax:
        from corpus import run_jax  # noqa: F401  (registers the JAX cases)
    elif args.tf:
        import tensorflow as tf

        from corpus import run_tf  # noqa: F401  (registers the TensorFlow cases)
        tf.config.threading.set_inter_op_parallelism_threads(2)
        tf.config.threading.set_intra_op_parallelism_threads(1)
    else:
        import torch

        from corpus import (  # noqa: F401  (the torch cases)
            torch_cases,
            torch_cases_apps,
            torch_cases_calls,
            torch_cases_daily,
            torch_cases_field,
            torch_cases_more,
            torch_cases_more_daily,
            torch_cases_routine,
            torch_cases_users,
        )
        torch.set_num_threads(1)
    for spec in args.cases:
        name, _, vs = spec.partition(":")
        c = CASES[name]
        report(name, vs.split(",") if vs else (["run", "fix"] if c.fix else ["run"]),
               args.rounds)
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"[{time.perf_counter() - t0:.0f} s]", file=sys.stderr)
    sys.exit(rc)
