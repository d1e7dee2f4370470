"""The app's background jobs: open a trace, then analyze it.

Each function runs on a worker thread (see :mod:`sofa_gui.qt.worker`) and hands
results to the GUI as soon as they exist: a :class:`TraceReady` (with the
timeline's draw index, built here so the GUI thread never does it), then one
:class:`AnalysisReady` per part of the analysis, as
:func:`sofa_gui.core.analysis.pipeline.analyze` finishes it. No Qt here: the
``state`` is any object with ``report``/``check_cancelled``/``partial``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from ..background_load import child_available, load_via_child, source_bytes
from ..core.analysis.pipeline import Analysis, Options, analyze
from ..core.progress import subrange
from ..core.trace import Trace
from ..view.model import Prepared, prepare

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
        got = load_via_child(p, state, subrange(state, 0.0, 0.5))
        if got is not True and got is not False:  # handed over: the cache is not writable
            got.meta.source = str(p)
            return got
        if not got:
            log.warning("cache not written for %s; decoding in-process", p)
    return load_trace(p, progress=subrange(state, 0.0, 0.5), use_cache=True)


@dataclass(frozen=True)
class TraceReady:
    """A trace was loaded (or read from the cache) and indexed for the timeline."""

    trace: Trace
    prepared: Prepared


@dataclass(frozen=True)
class AnalysisReady:
    """``analysis.<part>`` is ready (a snapshot: parts still running are None)."""

    analysis: Analysis
    part: str


def open_job(state, path: str, options: Options, load_mode: str = "auto") -> None:
    """Load ``path`` and analyze it, handing over each result as it is ready; a big rank
    folder runs the fleet analysis instead (:mod:`.fleet_jobs`)."""
    from .fleet_jobs import fleet_files, fleet_job

    if fleet_files(Path(path).expanduser()):
        return fleet_job(state, path, options)
    trace = load(state, path, load_mode)
    state.report(0.5, "Indexing the timeline")
    state.partial(TraceReady(trace, prepare(trace)))
    _analyze(state, trace, options, subrange(state, 0.55, 1.0))


def analysis_job(state, trace: Trace, options: Options) -> None:
    """Analyze an open trace again (e.g. with another iteration mode)."""
    _analyze(state, trace, options, state)


def analyze_loaded(state, trace: Trace, options: Options) -> None:
    """Hand over a trace loaded by another job, then analyze it (see :mod:`.fleet_jobs`)."""
    state.report(0.5, "Indexing the timeline")
    state.partial(TraceReady(trace, prepare(trace)))
    _analyze(state, trace, options, subrange(state, 0.55, 1.0))


def _analyze(state, trace: Trace, options: Options, progress) -> None:
    analyze(trace, options, progress,
            lambda a, part: state.partial(AnalysisReady(replace(a), part)))
