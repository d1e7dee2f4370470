"""The app's background jobs: open a trace, then analyse it step by step.

Each function runs on a worker thread (see :mod:`sofa_gui.qt.worker`) and hands
partial results to the GUI as soon as they exist: ``"trace"`` (with the
timeline's draw index, built here so the GUI thread never does it), then
``"iterations"``, ``"breakdown"``, ``"findings"``. No Qt here beyond the state
object, so the functions are easy to test.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..background_load import child_available, load_via_child, source_bytes
from ..core.progress import subrange
from .timeline import prepare

log = logging.getLogger(__name__)

#: Sources at least this big (bytes on disk, x20 for gzip) are decoded in a child
#: process; smaller ones decode in well under the 100 ms a GUI may stall.
CHILD_MIN_DECODED_BYTES = 4 * 1024 * 1024


def wants_child(path: Path, load_mode: str) -> bool:
    """Whether to decode ``path`` in a child process (``load_mode``: auto|thread|process)."""
    if load_mode == "thread" or not child_available():
        return False
    if load_mode == "process":
        return True
    size = source_bytes(path)
    if path.is_file() and path.suffix in (".gz", ".zst", ".xz", ".bz2"):
        size *= 20
    return size >= CHILD_MIN_DECODED_BYTES


def load(state, path: str, load_mode: str = "auto"):
    """The trace at ``path``: from the cache, else decoded (in a child when big)."""
    from ..core import store
    from ..core.importers import load_trace

    p = Path(path).expanduser()
    state.report(0.0, f"Opening {p.name}")
    # a big uncached source is decoded by a child into the cache; load_trace then maps it
    if wants_child(p, load_mode) and not store.is_cached(p):
        if not load_via_child(p, state, subrange(state, 0.0, 0.5)):
            log.warning("cache not written for %s; decoding in-process", p)
    return load_trace(p, progress=subrange(state, 0.0, 0.5), use_cache=True)


def open_job(state, path: str, mode: str = "auto", load_mode: str = "auto") -> None:
    """Load ``path`` and analyse it, handing over each result as it is ready."""
    trace = load(state, path, load_mode)
    state.report(0.5, "Indexing the timeline")
    state.partial("trace", (trace, prepare(trace)))
    analyze(state, trace, mode, lo=0.55)


def analysis_job(state, trace, mode: str = "auto") -> None:
    """Re-run the analysis of an open trace (e.g. another iteration mode)."""
    analyze(state, trace, mode, lo=0.0)


def analyze(state, trace, mode: str, lo: float) -> None:
    """Iterations, then breakdown, then findings; each handed over when done."""
    from ..core.analysis.breakdown import compute_breakdown
    from ..core.analysis.findings import find_bottlenecks
    from ..core.analysis.iterations import detect_iterations

    span = 1.0 - lo
    state.report(lo, "Finding iterations")
    iters = detect_iterations(trace, mode=mode,
                              progress=subrange(state, lo, lo + 0.4 * span))
    state.partial("iterations", iters)
    state.report(lo + 0.4 * span, "Breaking down iterations")
    bd = compute_breakdown(trace, iters, progress=subrange(state, lo + 0.4 * span,
                                                           lo + 0.85 * span))
    state.partial("breakdown", bd)
    state.report(lo + 0.85 * span, "Looking for bottlenecks")
    findings = find_bottlenecks(trace, iters, bd)
    state.partial("findings", findings)
    state.report(1.0, "Analysis done")
