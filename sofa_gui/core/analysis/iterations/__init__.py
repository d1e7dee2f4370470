"""Iteration detection: annotations when the trace has them, else the repeated pattern.

``detect_iterations(trace, mode)`` is a pure function (progress/cancel hook aside):

* ``annotations`` -- ProfilerStep#N / NVTX step ranges only;
* ``pattern`` -- the repeated-work detector only (annotations ignored entirely):
  the busiest stream is turned into integer symbols, a suffix array finds the
  period that explains most of it, anchors place every occurrence, and timing
  places the cut (see :mod:`.pattern` and :mod:`.cut`);
* ``auto`` (default) -- annotations when present, with the pattern detector's
  agreement attached; otherwise the pattern.
"""

from __future__ import annotations

import numpy as np

from ...progress import NullProgress, Progress
from ...trace import Trace
from ..results import Iterations
from .annotations import agreement, annotation_iterations
from .cut import cut_iterations
from .pattern import MIN_CONTEXT_COVERAGE, MIN_EVENTS, choose_period, find_anchors
from .report import iterations_text
from .stream import pick_stream
from .symbols import reduce_symbols, stream_keys

__all__ = ["MODES", "detect_iterations", "iterations_text", "pattern_iterations"]

MODES = ("auto", "annotations", "pattern")


def detect_iterations(trace: Trace, mode: str = "auto",
                      progress: Progress | None = None) -> Iterations:
    """Iterations of ``trace`` by ``mode`` (auto|annotations|pattern)."""
    if mode not in MODES:
        raise ValueError(f"iteration mode must be one of {', '.join(MODES)}, not {mode!r}")
    progress = progress or NullProgress()
    if mode == "pattern":
        return pattern_iterations(trace, progress)
    progress.report(0.0, "reading step annotations")
    annotated = annotation_iterations(trace)
    if mode == "annotations" or (mode == "auto" and annotated.method == "none"):
        if mode == "auto":
            return pattern_iterations(trace, progress)
        progress.report(1.0, "iterations from annotations")
        return annotated
    detected = pattern_iterations(trace, progress)
    annotated.agreement = agreement(annotated, detected)
    return annotated


def pattern_iterations(trace: Trace, progress: Progress | None = None) -> Iterations:
    """Iterations from the repeated pattern of the busiest stream (annotations ignored)."""
    progress = progress or NullProgress()
    progress.report(0.05, "choosing the event stream")
    stream = pick_stream(trace)
    if stream is None:
        return Iterations.none("none", "the trace has no events to look for repeats in")
    s = trace.slices
    keys, labels = stream_keys(trace.names, s.name[stream.index], s.kind[stream.index],
                               s.copy_kind[stream.index])
    symbols = reduce_symbols(keys, labels)
    n = len(symbols.seq)
    if n < MIN_EVENTS:
        return Iterations.none(stream.description, f"the stream is too short to repeat "
                               f"({n} symbols after merging repeats of one name)")
    progress.report(0.15, "suffix array over the symbol stream")
    period = choose_period(symbols.seq, progress)
    if period is None or not period.accepted:
        best = (f"; the best period, {period.length} symbols, explains only "
                f"{period.coverage:.0%} of it" if period is not None else "")
        return Iterations.none(stream.description, "no repeated pattern explains at least "
                               f"{MIN_CONTEXT_COVERAGE:.0%} of the stream{best}")
    progress.report(0.6, "placing occurrences")
    anchors = find_anchors(symbols.seq, period.length)
    if anchors is None:
        return Iterations.none(stream.description, f"a period of {period.length} symbols "
                               "recurs, but no event marks it at a stable place")
    progress.check_cancelled()
    progress.report(0.8, "cutting iterations")
    cut = cut_iterations(trace, stream, symbols, anchors)
    if cut is None:
        return Iterations.none(stream.description, f"a period of {period.length} symbols "
                               "recurs, but fewer than two whole occurrences were found")
    progress.report(1.0, "iterations found")
    return _result(stream, period, anchors, cut)


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


def _cv(x: np.ndarray) -> float:
    return float(x.std() / x.mean()) if len(x) > 1 and x.mean() > 0 else 0.0


def _robust_cv(x: np.ndarray) -> float:
    """Spread relative to the median (MAD-based), so one warm-up step does not dominate."""
    if len(x) < 2:
        return 0.0
    med = float(np.median(x))
    return 1.4826 * float(np.median(np.abs(x - med))) / med if med > 0 else 0.0
