"""Variation rule: time lost to iterations slower than the steady-state median."""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..iterations.recurring import NOISE_SDS, stands_out
from ..loader_restarts import restarts
from ..results import Evidence, Finding
from .context import (
    Ctx,
    make_finding,
    top_rows,
)
from .registry import Rule, rule
from .work import extra_calls_share, grown_work

# -- variation -------------------------------------------------------------------------------
#: Fewer steady iterations than this cannot tell jitter from noise.
JITTER_MIN_STEPS = 5
#: Slow = this much over the median; jitter needs at least this many / this share of them.
JITTER_SLOW, JITTER_MIN_SLOW, JITTER_MIN_SLOW_SHARE = 1.1, 3, 0.2
#: Isolated outliers count only up to the median + this many robust deviations (MAD).
JITTER_OUTLIER_MADS = 3.0
#: Below this fraction of the slow iterations' extra host time in extra calls, the slow
#: steps are the same work run slower: likely the machine, not the program.
JITTER_OWN_WORK = 1 / 3
WITHIN_NOISE = "the slow steps do not stand apart from the run's own step-to-step noise"
SAME_CALLS = "the slow steps make the same calls as the others, slower: cause likely " \
             "outside the program"


@rule("iteration_jitter", "Unstable iteration times", 0.05, 0.20,
      "same grading as input-bound, on the time lost to slower-than-median iterations; "
      f">= {JITTER_MIN_STEPS} steady iterations, >= {JITTER_MIN_SLOW} slow ones or isolated "
      f"outliers clipped at {JITTER_OUTLIER_MADS:g} MADs",
      factors={"isolated_outliers": 0.3, "one_iteration": 0.6, "same_calls": 0.5,
               "within_noise": 0.6})
def iteration_jitter(ctx: Ctx, spec: Rule) -> Finding | None:
    bd = ctx.bd
    r = ctx.rows
    if bd.whole_trace or len(r) < JITTER_MIN_STEPS:
        return None
    dur_all = bd.durations.astype(np.float64)
    on_device = ctx.iters.device_step_times()  # a lagging device sets the pace: its clock,
    if on_device is not None and len(on_device) == len(dur_all):  # not host/device skew
        dur_all = on_device.astype(np.float64)
    dur = dur_all[r]
    med = float(np.median(dur))
    if med <= 0:  # zero-length iterations: nothing to measure variation against
        return None
    slow = dur > JITTER_SLOW * med
    isolated = int(slow.sum()) < max(JITTER_MIN_SLOW, JITTER_MIN_SLOW_SHARE * len(dur))
    counted = np.minimum(dur, _outlier_clip(dur, slow, med)) if isolated else dur
    excess = np.maximum(counted - med, 0.0)
    share = float(excess.sum() / counted.sum()) if counted.sum() else 0.0
    speedup = float(counted.sum() / np.minimum(counted, med).sum()) if med > 0 else 1.0
    evidence = _jitter_evidence(ctx, r, dur, dur_all, med)
    causes = grown_work(ctx, r[slow], r[~slow], "slow") if slow.any() else []
    cv = float(np.std(dur) / np.mean(dur)) if np.mean(dur) else 0.0
    summary = (f"Steady-state iteration times vary (coefficient of variation {pct(cv)}, median "
               f"{fmt_ns(med)}); iterations slower than the median lose {pct(share)} of the "
               f"time. The speed-up is what running every iteration at the median would give.")
    notes: tuple[str, ...] = ()
    assumption = 1.0
    restarted = _restarts_explain(ctx, r[slow], float(np.maximum(dur[slow] - med, 0).sum()))
    if isolated:
        lost = float(np.maximum(dur - med, 0).sum() / dur.sum())
        guess = "" if restarted else " (the OS, garbage collection, the profiler)"
        summary += (f" Only {int(slow.sum())} of {len(dur)} iterations are slow (up to "
                    f"{dur.max() / med:.1f}x the median, {pct(lost)} of the time): isolated "
                    f"outliers{guess} that too few steps "
                    f"show to say they recur, so each counts only up to "
                    f"{JITTER_OUTLIER_MADS:g} median absolute deviations over the median.")
        notes, assumption = ((f"{int(slow.sum())} isolated slow iteration(s)",),
                             spec.factor("isolated_outliers"))
    elif excess.max() > 0.5 * excess.sum():
        notes, assumption = (("one iteration makes most of it",),
                             spec.factor("one_iteration"))
    own = extra_calls_share(ctx, r[slow], r[~slow]) if slow.any() and (~slow).any() else 1.0
    if restarted:
        summary += restarted
        own = 1.0  # the program's own work (input), not the machine
    if own < JITTER_OWN_WORK:
        summary += (f" The slow iterations make the same calls as the others, each slower "
                    f"(only {pct(own)} of their extra host time is calls the others lack): "
                    f"that points outside the program (other processes, CPU clock, the "
                    f"profiler), which the trace cannot show.")
        notes, assumption = notes + (SAME_CALLS,), assumption * spec.factor("same_calls")
        if not stands_out(dur, np.flatnonzero(slow), np.flatnonzero(~slow)):
            summary += (f" Nor do the slow iterations stand apart from the others: not each "
                        f"is {NOISE_SDS:g} robust deviations of the other iterations over "
                        f"their median, so the variation is the run's own step-to-step noise "
                        f"more than a slow-down of some iterations.")
            notes = notes + (WITHIN_NOISE,)
            assumption *= spec.factor("within_noise")
    return make_finding(ctx, spec, share, summary, evidence, speedup=speedup, causes=causes,
                        assumption=assumption, notes=notes,
                        tentative=SAME_CALLS if own < JITTER_OWN_WORK else "")


def _restarts_explain(ctx: Ctx, slow_rows: np.ndarray, slow_excess: float) -> str:
    """A sentence when the loader's restarts (:mod:`..loader_restarts`) in the slow
    iterations take at least half of their time over the median ("" otherwise): those
    steps are slow because they start the loader again, input the input rule reports."""
    host = ctx.bd.host
    if host is None or not len(slow_rows) or slow_excess <= 0:
        return ""
    back = restarts(ctx.trace, host.lane, host.starts, host.ends)
    mine = np.isin(back.window, slow_rows)
    took = float(back.excess_ns()[mine].sum())
    if took < 0.5 * slow_excess:
        return ""
    part = pct(min(took / slow_excess, 1.0))
    return (f" {int(mine.sum())} of the slow iterations start the loader again ({part} of "
            f"their time over the median): input (input_pipeline_bound), not the machine; a "
            f"loader that keeps its workers evens them out.")


def _outlier_clip(dur: np.ndarray, slow: np.ndarray, med: float) -> float:
    """Median + a few robust deviations (MAD of the iterations that are not slow)."""
    rest = dur[~slow] if (~slow).any() else dur
    mad = 1.4826 * float(np.median(np.abs(rest - np.median(rest))))
    return med + JITTER_OUTLIER_MADS * mad


def _jitter_evidence(ctx: Ctx, r, dur, dur_all, med) -> list[Evidence]:
    """The slowest iterations, each with the breakdown category that grew most."""
    bd = ctx.bd
    excess = np.maximum(dur - med, 0.0)
    side_times, cats = bd.times(), bd.categories()
    m = int(r[np.argmin(np.abs(dur - med))])
    lanes = bd.device.lanes if bd.device is not None else ([bd.host.lane] if bd.host else [])
    ex_all = np.zeros(len(dur_all))
    ex_all[r] = np.where(dur > JITTER_SLOW * med, excess, 0.0)
    evidence = []
    for i in top_rows(ex_all):
        label = f"iteration {i}: {fmt_ns(dur_all[i])} (+{pct(ex_all[i] / med)} vs median)"
        if side_times.shape[1]:
            delta = side_times[i] - side_times[m]
            c = int(np.argmax(delta))
            if delta[c] > 0:
                label += f"; most of it in {cats[c]} (+{fmt_ns(delta[c])})"
        if bd.ranks is not None:
            label += (f"; slowest rank {int(bd.ranks.straggler[i])} "
                      f"(+{fmt_ns(bd.ranks.lag[i])} busy vs median rank)")
        evidence.append(Evidence(label, int(bd.starts[i]), int(bd.ends[i]), i, list(lanes)))
    return evidence



