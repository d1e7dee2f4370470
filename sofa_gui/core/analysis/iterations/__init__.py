"""Iteration detection: annotations when the trace has them, else the repeated pattern.

``detect_iterations(trace, mode)`` is a pure function (progress/cancel hook aside):

* ``annotations`` -- ProfilerStep#N / NVTX step ranges only;
* ``pattern`` -- the repeated-work detector only (annotations ignored entirely):
  the busiest stream is turned into integer symbols, a suffix array finds the
  period that explains most of it, anchors place every occurrence, and timing
  places the cut (see :mod:`.pattern` and :mod:`.cut`). When event order does
  not repeat, rare events alone, then the rhythm of activity (:mod:`.activity`),
  are weaker fallbacks, reported as such in ``pattern["evidence"]``; with no
  evidence at all the result is ``method == "none"`` with the reason;
* ``auto`` (default) -- annotations when present, with the pattern detector's
  agreement attached; otherwise the pattern.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ...progress import NullProgress, Progress
from ...trace import Trace
from ..aside import aside
from ..results import Iterations
from .activity import find_rhythm
from .annotations import agreement, annotation_iterations
from .cut import cut_iterations
from .landmarks import Landmarks
from .marks import mark_iterations
from .pattern import MIN_CONTEXT_COVERAGE, MIN_EVENTS, choose_period, find_anchors
from .runs import run_cycle, run_symbols
from .steps import (
    LOOP_BODY,
    evenly_spaced,
    holds_one_each,
    holds_same_each,
    landmark_iterations,
    same_calls_per_step,
)
from .stream import pick_stream
from .symbols import reduce_symbols, stream_keys
from .text import iterations_text

__all__ = ["MODES", "detect_iterations", "iterations_text", "pattern_iterations"]

MODES = ("auto", "annotations", "pattern")


def detect_iterations(trace: Trace, mode: str = "auto",
                      progress: Progress | None = None) -> Iterations:
    """Iterations of ``trace`` by ``mode`` (auto|annotations|pattern)."""
    if mode not in MODES:
        raise ValueError(f"iteration mode must be one of {', '.join(MODES)}, not {mode!r}")
    progress = progress or NullProgress()
    if mode == "pattern":
        return _marked(trace, pattern_iterations(trace, progress))
    progress.update(0.0, "reading step annotations")
    annotated = annotation_iterations(trace)
    if mode == "annotations" or (mode == "auto" and annotated.method == "none"):
        if mode == "auto":
            return _marked(trace, pattern_iterations(trace, progress))
        progress.update(1.0, "iterations from annotations")
        return _marked(trace, annotated)
    if not aside(pattern_iterations, (trace,), partial(_agree, annotated)):
        _agree(annotated, pattern_iterations(trace, progress))
    return _marked(trace, annotated)


def _agree(annotated: Iterations, detected: Iterations) -> None:
    """The pattern check of annotated iterations (starts and ends only: marks do not
    change them, so it may come after :func:`_marked`, see :mod:`..aside`)."""
    annotated.agreement = agreement(annotated, detected)


def _marked(trace: Trace, iters: Iterations) -> Iterations:
    """``iters`` with warm-up, micro-batches, device windows and periodic extras."""
    return mark_iterations(trace, iters) if len(iters) else iters


def pattern_iterations(trace: Trace, progress: Progress | None = None) -> Iterations:
    """Iterations without annotations: the repeated pattern, checked against the loop's
    landmarks (one optimizer update per step); cut at the landmarks when they disagree.
    The loop body's Python calls, where recorded, are the steps themselves."""
    progress = progress or NullProgress()
    detected = structure_iterations(trace, progress)
    lm = Landmarks.of(trace)
    by_landmarks = landmark_iterations(trace, lm)
    if by_landmarks is None:
        return detected
    what = by_landmarks.pattern["landmark"]
    if detected.method != "none" and what != LOOP_BODY and _fits(detected, by_landmarks, lm):
        detected.confidence = max(detected.confidence, by_landmarks.confidence)
        detected.pattern["landmarks"] = what
        return detected
    per_item = None if detected.method == "none" or what == LOOP_BODY else \
        same_calls_per_step(trace, lm, detected.starts, detected.ends)
    if per_item is not None:
        grouped = landmark_iterations(trace, lm, per_item)
        if grouped is not None:
            grouped.confidence = max(grouped.confidence, detected.confidence)
            return grouped
    if detected.method == "none":
        why = "no repeated pattern"
    elif what == LOOP_BODY:
        why = f"the repeated pattern has {len(detected)} occurrences"
    else:
        why = f"the repeated pattern ({len(detected)} occurrences) does not hold one {what} each"
    by_landmarks.reason = f"{by_landmarks.reason}; {why}"
    return by_landmarks


def _fits(detected: Iterations, by_landmarks: Iterations, lm: Landmarks) -> bool:
    """Whether the pattern's occurrences each hold one landmark (an optimizer update, an
    input fetch, a step dispatch), or, for step dispatches, the same number of them at
    uneven intervals: a step run op by op dispatches its heaviest primitive several times
    (evenly spaced ones would be steps, glued together by the pattern)."""
    a, b = detected.starts, detected.ends
    marks = lm.optimizer[0] if len(lm.optimizer[0]) else np.sort(lm.fetch)
    if len(detected) == len(by_landmarks) and holds_one_each(a, b, marks) == 1.0:
        return True
    if by_landmarks.pattern["landmark"] != "step dispatch":
        return False
    inside = marks[(marks >= a[0]) & (marks < b[-1])]
    return holds_same_each(a, b, marks) > 1 and not evenly_spaced(inside)


def structure_iterations(trace: Trace, progress: Progress | None = None) -> Iterations:
    """Iterations from the repeated pattern of the busiest stream alone."""
    progress = progress or NullProgress()
    progress.update(0.05, "choosing the event stream")
    stream = pick_stream(trace)
    if stream is None:
        return Iterations.none("none", "the trace has no events to look for repeats in")
    s = trace.slices
    keys, labels = stream_keys(trace.names, s.name[stream.index], s.kind[stream.index],
                               s.copy_kind[stream.index])
    found = _search(trace, stream, reduce_symbols(keys, labels), progress)
    if not isinstance(found, tuple):
        return found
    period, anchors, cut, symbols = found
    per, heads = run_cycle(symbols, len(stream), cut.first_event, cut.symbols)
    steps = _search(trace, stream, run_symbols(keys, labels), progress, heads) \
        if per > 1 else None
    grouped = isinstance(steps, tuple) and abs(len(steps[2].starts) * per
                                               - len(cut.starts)) <= per
    if grouped:
        period, anchors, cut, _ = steps
        cut.notes.append(f"each step is {per} calls with the same events: the lengths of "
                         f"their runs repeat every {per} calls (what the step releases "
                         "after its last call)")
    progress.update(1.0, "iterations found")
    it = _result(stream, period, anchors, cut)
    if grouped:
        it.pattern["calls_per_step"] = per
    return it


def _search(trace: Trace, stream, symbols, progress: Progress, heads=None):
    """(period, anchors, cut, symbols) of the repeated pattern of ``symbols``, or the
    iterations that say why there is none (``heads``: stream positions where steps are
    known to start)."""
    n = len(symbols.seq)
    if n < MIN_EVENTS:
        return Iterations.none(stream.description, f"the stream is too short to repeat "
                               f"({n} symbols after merging repeats of one name)")
    progress.update(0.15, "suffix array over the symbol stream")
    period = choose_period(symbols.seq, progress)
    if period is None or not period.accepted:
        best = (f"; the best period, {period.length} symbols, explains only "
                f"{period.coverage:.0%} of it" if period is not None else "")
        why = f"no repeated pattern explains at least {MIN_CONTEXT_COVERAGE:.0%} of the stream"
        return _by_rhythm(stream, why + best)
    progress.update(0.6, "placing occurrences")
    anchors = find_anchors(symbols.seq, period.length)
    if anchors is None:
        return Iterations.none(stream.description, f"a period of {period.length} symbols "
                               "recurs, but no event marks it at a stable place")
    progress.check_cancelled()
    progress.update(0.8, "cutting iterations")
    cut = cut_iterations(trace, stream, symbols, anchors, heads)
    if cut is None:
        return Iterations.none(stream.description, f"a period of {period.length} symbols "
                               "recurs, but fewer than two whole occurrences were found")
    return period, anchors, cut, symbols


def _result(stream, period, anchors, cut) -> Iterations:
    """Package a cut; confidence = coverage x regularity (of event counts, then of time)."""
    dur = (cut.ends - cut.starts).astype(float)
    coverage = cut.events / max(len(stream), 1)
    shape_cv = _cv(cut.symbols.astype(float))
    time_cv = _robust_cv(dur)
    confidence = (coverage * float(np.exp(-((shape_cv / 0.1) ** 2)))
                  * float(np.exp(-(time_cv**2))))
    if period.evidence == "rare":
        confidence *= period.coverage * 0.9
    if len(dur) < 3:
        confidence *= 0.85
    pattern = {
        "symbols": int(period.length),
        "occurrences": len(cut.starts),
        "evidence": period.evidence,
        "coverage": round(coverage, 4),
        "length_cv": round(shape_cv, 4),
        "duration_cv": round(_cv(dur), 4),
        "anchors": len(anchors),
        "cut": cut.phase_reason,
    }
    notes = list(cut.notes)
    if period.evidence == "rare":
        notes.append("event order differs between iterations; matched on rare events only")
    return Iterations("pattern", stream.description, cut.starts, cut.ends,
                      round(min(max(confidence, 0.0), 1.0), 4), pattern, None, "; ".join(notes))


def _by_rhythm(stream, why: str) -> Iterations:
    """Fallback when event order does not repeat: the rhythm of activity, if strong."""
    order = np.argsort(stream.start, kind="stable")
    start, end = stream.start[order], stream.end[order]
    rhythm = find_rhythm(start, end)
    if rhythm is None:
        return Iterations.none(stream.description, why + "; device activity has no "
                               "steady rhythm either")
    cuts, stops = rhythm.cuts, rhythm.ends
    starts = start[cuts].astype(np.int64)
    ends = np.array([int(end[a:b].max()) for a, b in zip(cuts, stops)], np.int64)
    follows = stops[:-1] == cuts[1:]
    ends[:-1][follows] = starts[1:][follows]
    events = int((stops - cuts).sum())
    coverage = events / max(len(stream), 1)
    confidence = 0.7 * rhythm.correlation * coverage
    pattern = {
        "symbols": None,
        "occurrences": len(cuts),
        "evidence": "activity",
        "coverage": round(coverage, 4),
        "period_us": round(rhythm.period_ns / 1000.0, 3),
        "correlation": round(rhythm.correlation, 4),
        "duration_cv": round(_cv((ends - starts).astype(float)), 4),
        "cut": "in the quietest part of the activity cycle",
    }
    reason = (f"{why}; cut by the rhythm of device activity instead (autocorrelation "
              f"{rhythm.correlation:.2f} at {rhythm.period_ns / 1e6:.4g} ms)")
    if rhythm.left_out:
        reason += (f"; {rhythm.left_out} stretch{'es' if rhythm.left_out > 1 else ''} "
                   "not one period long left out")
    return Iterations("pattern", stream.description, starts, ends,
                      round(min(confidence, 1.0), 4), pattern, None, reason)


def _cv(x: np.ndarray) -> float:
    return float(x.std() / x.mean()) if len(x) > 1 and x.mean() > 0 else 0.0


def _robust_cv(x: np.ndarray) -> float:
    """Spread relative to the median (MAD-based), so one warm-up step does not dominate."""
    if len(x) < 2:
        return 0.0
    med = float(np.median(x))
    return 1.4826 * float(np.median(np.abs(x - med))) / med if med > 0 else 0.0
