"""Findings grounded in utilisation counters, for runs without a device trace.

When a recording or a SOFA logdir has counters but no accelerator trace, the
breakdown cannot see idle gaps; the counters still show *why* a GPU starves or a
run is slow.  Each sample interval (see :mod:`.counter_signals`) gets one host
state, first match wins:

* ``contention`` -- all cores together are >= :data:`CPU_SATURATED_PCT` busy, yet the
  profiled process tree gets less than :data:`CONTENDED_SHARE` of that busy CPU:
  other processes take the machine;
* ``saturated`` -- all cores >= :data:`CPU_SATURATED_PCT` busy (by the program, or
  nobody knows by whom);
* ``single_thread`` -- the process tree uses one core's worth
  (:data:`ONE_CORE_PCT`) while the machine has spare cores; without process
  samples (SOFA), one core >= :data:`CORE_BUSY_PCT` while the others average
  <= :data:`OTHERS_IDLE_PCT`.

Rules (shares are fractions of the analysed time that has the needed counters):

* ``input_pipeline_bound`` -- the run's GPU is below :data:`GPU_LOW_PCT` SM
  utilisation while the host is ``saturated`` or ``single_thread``: the host cannot
  prepare work fast enough.  Share: the GPU's idle fraction in those intervals,
  ``sum(w * (1 - sm/100)) / sum(w)``.
* ``cpu_contention`` -- ``contention`` intervals; share as above when the run uses
  a GPU, otherwise half of their time (assumes the program would at least double
  its CPU with the machine to itself, the :data:`.compute_rules.COMPUTE_GAIN` rule).
* ``cpu_bound`` -- ``single_thread`` intervals of a run that uses no GPU; share:
  half of their time (spreading the work over two cores halves it).

Thresholds: GPU 50% (SOFA's ``spotlight_gpu`` takes SM >= 50% as an active GPU;
the PyTorch profiler plugin flags GPU utilisation < 50%); a GPU is "used" once it
reaches 10% (SOFA's idle threshold); 90% for a saturated machine or a pegged
core.  None of these rules runs when the trace has device activity: the
breakdown's own idle attribution is exact there.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as _pct
from ..counter_signals import HostSignals, host_signals
from ..host_side import window_of
from ..results import Cause, Evidence, Finding
from .compute_rules import COMPUTE_GAIN
from .context import MAX_EVIDENCE, Ctx, make_finding
from .registry import RULES, counter_rule, declare

declare("cpu_contention", "CPU contention from other processes", 0.05, 0.20,
        "same grading as input-bound; from counters only (other processes hold a "
        "saturated CPU)", partition="host_state")
declare("cpu_bound", "CPU bound on one thread", 0.05, 0.20,
        "same grading as input-bound; from counters only (one thread pegged, the other "
        "cores not saturated)", partition="host_state")

GPU_LOW_PCT = 50.0
CPU_SATURATED_PCT = 90.0
CORE_BUSY_PCT = 90.0
OTHERS_IDLE_PCT = 25.0
ONE_CORE_PCT = (80.0, 120.0)
CONTENDED_SHARE = 0.5
NONE, SINGLE_THREAD, SATURATED, CONTENTION = range(4)


def host_state(sig: HostSignals) -> np.ndarray:
    """Per interval: NONE, SINGLE_THREAD, SATURATED or CONTENTION (see the module doc)."""
    busy = sig.busy
    n = sig.n_cores
    proc = sig.proc
    known = ~np.isnan(proc)
    saturated = busy >= CPU_SATURATED_PCT
    contention = saturated & known & (proc < CONTENDED_SHARE * busy * n)
    if n >= 2:
        top = sig.cores.max(axis=0)
        others = (sig.cores.sum(axis=0) - top) / (n - 1)
        by_cores = (top >= CORE_BUSY_PCT) & (others <= OTHERS_IDLE_PCT)
        lo, hi = ONE_CORE_PCT
        by_proc = (proc >= lo) & (proc <= hi)
        single = np.where(known, by_proc, by_cores)
    else:
        single = np.zeros(len(sig), bool)
    return np.where(contention, CONTENTION, np.where(
        saturated, SATURATED, np.where(single, SINGLE_THREAD, NONE))).astype(np.int8)


def counter_rules(ctx: Ctx) -> list[Finding]:
    """Counter findings of every registered counter check (including below-threshold
    ones, severity "none")."""
    bd = ctx.bd
    if bd.device is not None:
        return []
    sig = host_signals(ctx.trace, bd.starts, bd.ends)
    if sig is None:
        return []
    state = host_state(sig)
    out = [check(ctx, sig, state) for r in RULES.values() for check in r.counter_checks]
    return [f for f in out if f is not None]


# -- rules ---------------------------------------------------------------------------------
@counter_rule("input_pipeline_bound")
def _input_bound(ctx: Ctx, sig: HostSignals, state: np.ndarray) -> Finding | None:
    if not sig.has_gpu:
        return None
    gpu_known = ~np.isnan(sig.gpu)
    if not gpu_known.any():
        return None
    idle = np.where(gpu_known, 1.0 - np.nan_to_num(sig.gpu) / 100.0, 0.0)
    hit = gpu_known & (sig.gpu < GPU_LOW_PCT) & np.isin(state, [SATURATED, SINGLE_THREAD])
    share, evidence = _measure(ctx, sig, hit, idle, gpu_known, _input_label)
    summary = (f"From utilisation counters (no device trace): the GPU sits idle "
               f"{_pct(share)} of the analysed time while the host CPU is saturated or one "
               f"thread is pegged, i.e. the host cannot prepare batches as fast as the GPU "
               f"consumes them (GPU < {GPU_LOW_PCT:g}% SM with all cores >= "
               f"{CPU_SATURATED_PCT:g}% busy or the process at one core). "
               f"{RULES['input_pipeline_bound'].grading('input-bound', 'TensorFlow profiler')}")
    assumption, notes = few_samples(int(hit.sum()), 0.8)
    return make_finding(ctx, "input_pipeline_bound", share, summary, evidence,
                        title="Input pipeline bound (GPU starved, host busy)",
                        assumption=assumption, causes=runs_as_causes(evidence), notes=notes)


@counter_rule("cpu_contention")
def _contention(ctx: Ctx, sig: HostSignals, state: np.ndarray) -> Finding | None:
    if np.isnan(sig.proc).all():
        return None
    gpu_known = ~np.isnan(sig.gpu)
    factor = np.where(gpu_known, 1.0 - np.nan_to_num(sig.gpu) / 100.0, 1.0 - 1.0 / COMPUTE_GAIN)
    hit = state == CONTENTION
    share, evidence = _measure(ctx, sig, hit, factor, np.ones(len(sig), bool), _contention_label)
    what = ("the GPU idles meanwhile" if sig.has_gpu else
            f"the share assumes the program would get at least {COMPUTE_GAIN:g}x its CPU "
            "time with the machine to itself")
    summary = (f"Other processes hold the CPU: {_pct(_frac(sig, hit))} of the analysed time "
               f"all {sig.n_cores} cores are >= {CPU_SATURATED_PCT:g}% busy while "
               f"{sig.proc_name} gets less than {CONTENDED_SHARE:.0%} of that busy CPU; "
               f"{what}.")
    assumption, notes = few_samples(int(hit.sum()), 0.8)
    return make_finding(ctx, "cpu_contention", share, summary, evidence, assumption=assumption,
                        causes=runs_as_causes(evidence), notes=notes)


@counter_rule("cpu_bound")
def _cpu_bound(ctx: Ctx, sig: HostSignals, state: np.ndarray) -> Finding | None:
    if sig.has_gpu or sig.n_cores < 2:
        return None  # with a GPU, a pegged host thread starves it: input_pipeline_bound
    hit = state == SINGLE_THREAD
    others = _others_busy(sig)
    free = np.clip(1.0 - np.nan_to_num(others) / 100.0, 0.0, 1.0)
    # spreading the work gains only what the other cores have free
    factor = (1.0 - 1.0 / COMPUTE_GAIN) * free
    share, evidence = _measure(ctx, sig, hit, factor, np.ones(len(sig), bool),
                               _single_thread_label)
    by = (f"{sig.proc_name} uses one core's worth of CPU" if not np.isnan(sig.proc).all()
          else f"one core is >= {CORE_BUSY_PCT:g}% busy")
    busy = float(np.nanmean(others[hit])) if hit.any() else 0.0
    summary = (f"Single-thread bound: {_pct(_frac(sig, hit))} of the analysed time {by} "
               f"while {_others(sig.n_cores)} {busy:.0f}% busy on average. The share assumes "
               f"the work spreads over the free part of the other cores (at most "
               f"{COMPUTE_GAIN:g}x faster).")
    assumption, notes = few_samples(int(hit.sum()), 0.8)
    return make_finding(ctx, "cpu_bound", share, summary, evidence, assumption=assumption,
                        causes=runs_as_causes(evidence), notes=notes)


# -- shared --------------------------------------------------------------------------------
#: Fewer sample intervals than this cannot show a state of the run: a finding from them
#: says so and keeps a low confidence (at most :data:`FEW_SAMPLES_CONFIDENCE`).
HANDFUL, FEW_SAMPLES_CONFIDENCE = 5, 0.3


def few_samples(n: int, assumption: float) -> tuple[float, tuple[str, ...]]:
    """(confidence factor, notes) of a counter finding resting on ``n`` sample intervals."""
    if n >= HANDFUL:
        return assumption, ("from utilisation counters",)
    return min(assumption, FEW_SAMPLES_CONFIDENCE), (
        f"from only {n} counter sample{'s' if n != 1 else ''}: too few to show a state of "
        f"the run",)


def _others_busy(sig: HostSignals) -> np.ndarray:
    """Per interval: mean busy % of the cores other than the busiest one."""
    if sig.n_cores < 2:
        return np.zeros(len(sig))
    top = sig.cores.max(axis=0)
    return (sig.cores.sum(axis=0) - top) / (sig.n_cores - 1)


def _frac(sig: HostSignals, hit: np.ndarray) -> float:
    total = int(sig.weight.sum())
    return float(sig.weight[hit].sum()) / total if total else 0.0


def runs_as_causes(evidence: list[Evidence]) -> list[Cause]:
    """Counter findings have no ops to blame: their causes are the sampled stretches."""
    total = float(sum(e.end_ns - e.start_ns for e in evidence)) or 1.0
    return [Cause(e.label, int(e.end_ns - e.start_ns), 1, (e.end_ns - e.start_ns) / total, e)
            for e in evidence]


def _measure(ctx: Ctx, sig: HostSignals, hit, factor, known, label) -> tuple[float, list]:
    """Share ``sum(w * factor over hit) / sum(w over known)`` and evidence: the runs of
    consecutive hit intervals that weigh most."""
    w = sig.weight.astype(np.float64)
    total = float(w[known].sum())
    gain = np.where(hit, w * factor, 0.0)
    share = float(gain.sum()) / total if total else 0.0
    return share, _runs_evidence(ctx, sig, hit, gain, label)


def _runs_evidence(ctx: Ctx, sig: HostSignals, hit, gain, label) -> list[Evidence]:
    idx = np.flatnonzero(hit & (gain > 0))
    if not len(idx):
        return []
    breaks = np.flatnonzero((np.diff(idx) != 1) | (sig.start[idx[1:]] != sig.end[idx[:-1]]))
    runs = np.split(idx, breaks + 1)
    runs.sort(key=lambda r: -float(gain[r].sum()))
    bd = ctx.bd
    lo, hi = int(bd.starts[0]), int(bd.ends[-1])
    lanes = sig.gpu_lanes + sig.proc_lanes + sig.core_lanes
    out = []
    for r in runs[:MAX_EVIDENCE]:
        a, b = max(int(sig.start[r[0]]), lo), min(int(sig.end[r[-1]]), hi)
        it = int(window_of(np.array([a + (b - a) // 2]), bd.starts, bd.ends)[0])
        samples = f"{len(r)} sample{'s' if len(r) > 1 else ''}"
        text = f"{fmt_ns(b - a)} ({samples}): {label(sig, r)}"
        out.append(Evidence(text, a, b, None if bd.whole_trace or it < 0 else it, list(lanes)))
    return out


def _mean(x: np.ndarray, r: np.ndarray) -> float:
    v = x[r]
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")


def _host_words(sig: HostSignals, r: np.ndarray) -> str:
    busy = _mean(sig.busy, r)
    if busy >= CPU_SATURATED_PCT:
        return f"all {sig.n_cores} CPU cores {busy:.0f}% busy"
    return _single_thread_label(sig, r)


def _input_label(sig: HostSignals, r: np.ndarray) -> str:
    gpus = ", ".join(n.replace(" util %", "") for n in sig.gpu_names[:2])
    return f"{gpus} at {_mean(sig.gpu, r):.0f}% while {_host_words(sig, r)}"


def _contention_label(sig: HostSignals, r: np.ndarray) -> str:
    busy, proc = _mean(sig.busy, r), _mean(sig.proc, r)
    share = proc / (busy * sig.n_cores) if busy > 0 else 0.0
    gpu = (f"; GPU at {_mean(sig.gpu, r):.0f}%" if not np.isnan(sig.gpu[r]).all() else "")
    return (f"CPU {busy:.0f}% busy over {sig.n_cores} cores, {sig.proc_name} gets "
            f"{proc:.0f}% of one core ({share:.0%} of the busy CPU){gpu}")


def _single_thread_label(sig: HostSignals, r: np.ndarray) -> str:
    top = sig.cores[:, r].max(axis=0)
    others = (sig.cores[:, r].sum(axis=0) - top) / max(sig.n_cores - 1, 1)
    if not np.isnan(sig.proc[r]).all():
        return (f"{sig.proc_name} at {_mean(sig.proc, r):.0f}% of one core, "
                f"{_others(sig.n_cores)} {float(others.mean()):.0f}% busy on average")
    return (f"one core at {float(top.mean()):.0f}% while {_others(sig.n_cores)} "
            f"{float(others.mean()):.0f}% busy on average")


def _others(n_cores: int) -> str:
    return "the other core is" if n_cores == 2 else f"the other {n_cores - 1} cores are"
