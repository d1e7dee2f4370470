"""The app's background jobs: open a trace, then analyze it.

Each function runs on a worker thread (see :mod:`sofa_gui.qt.worker`) and hands
results to the GUI as soon as they exist (events, :mod:`.events`): a
:class:`~.events.TraceReady` (with the timeline's draw index, built here so the GUI
thread never does it), then one :class:`~.events.AnalysisReady` per part of the analysis, as
:func:`sofa_gui.core.analysis.pipeline.analyze` finishes it. No Qt here: the
``state`` is any object with ``report``/``check_cancelled``/``partial``.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from ..core.analysis.cache import analyze_cached
from ..core.analysis.pipeline import Options
from ..core.progress import subrange
from ..core.trace import Trace
from ..view.model import prepare
from .background_load import ChildLoad, child_available, decoded_bytes
from .events import AnalysisReady, CompareReady, TraceReady

log = logging.getLogger(__name__)

#: Sources at least this big (gzip counted decompressed; other compressed files x20)
#: are decoded in a child process; smaller ones decode in well under the 100 ms a GUI
#: may stall, and what an importer allocates per input byte is bounded (tests/robustness).
CHILD_MIN_DECODED_BYTES = 4 * 1024 * 1024


def wants_child(path: Path, load_mode: str) -> bool:
    """Whether to decode ``path`` in a child process (``load_mode``: auto|thread|process)."""
    if load_mode == "thread" or not child_available():
        return False
    if load_mode == "process":
        return True
    size = decoded_bytes(path, CHILD_MIN_DECODED_BYTES)
    if path.is_file() and path.suffix in (".zst", ".xz", ".bz2"):
        size *= 20
    return size >= CHILD_MIN_DECODED_BYTES


def load(state, path: str, load_mode: str = "auto"):
    """The trace at ``path``: from the cache, else decoded (in a child when big)."""
    trace, child = _load(state, path, load_mode, None)
    if child is not None:
        child.finish()
    return trace


def _load(state, path: str, load_mode: str, options: Options | None):
    """(trace at ``path``, the child process still analyzing it or None).

    From the cache, else decoded (in a child when big; with ``options``, the
    child goes on to analyze the trace, see :func:`open_job`).
    """
    from ..core import store
    from ..core.importers import load_trace

    p = Path(path).expanduser()
    state.update(0.0, f"Opening {p.name}")
    child = None
    # a big uncached source is decoded by a child into the cache; load_trace then maps it
    if wants_child(p, load_mode) and not store.is_cached(p):
        child = ChildLoad(p, state, options)
        try:
            got = child.wait_trace(subrange(state, 0.0, 0.5))
        except BaseException:
            child.stop()
            raise
        if got is not True:  # no cache entry: no background analysis either
            child.stop()
            child = None
            if got is not False:  # handed over: the cache is not writable
                got.meta.source = str(p)
                return got, None
            log.warning("cache not written for %s; decoding in-process", p)
    try:
        return load_trace(p, progress=subrange(state, 0.0, 0.5), use_cache=True), child
    except BaseException:
        if child is not None:
            child.stop()
        raise


def open_job(state, path: str, options: Options, load_mode: str = "auto") -> None:
    """Load ``path`` and analyze it, handing over each result as it is ready; a big rank
    folder runs the fleet analysis instead (:mod:`.fleet_jobs`).

    A big uncached trace is decoded by a child process that then analyzes it
    while this thread builds the timeline index: two cores at work, and the
    analysis never competes with the GUI thread for the GIL. Its results reach
    this process through the analysis cache.
    """
    from .fleet_jobs import fleet_files, fleet_job

    if fleet_files(Path(path).expanduser()):
        return fleet_job(state, path, options)
    trace, child = _load(state, path, load_mode, options)
    try:
        state.update(0.5, "Indexing the timeline")
        state.partial(TraceReady(trace, prepare(trace)))
        if child is not None:
            state.update(0.55, "Analyzing (background process)")
            child.wait_analysis(subrange(state, 0.55, 1.0))
    except BaseException:
        if child is not None:
            child.stop()
        raise
    if child is not None:
        child.finish()  # it exits by itself; waiting for that delayed the panels ~0.3 s
    _analyze(state, trace, options, subrange(state, 0.55, 1.0))


def analysis_job(state, trace: Trace, options: Options) -> None:
    """Analyze an open trace again (e.g. with another iteration mode)."""
    _analyze(state, trace, options, state)


def analyze_loaded(state, trace: Trace, options: Options) -> None:
    """Hand over a trace loaded by another job, then analyze it (see :mod:`.fleet_jobs`)."""
    state.update(0.5, "Indexing the timeline")
    state.partial(TraceReady(trace, prepare(trace)))
    _analyze(state, trace, options, subrange(state, 0.55, 1.0))


def _analyze(state, trace: Trace, options: Options, progress) -> None:
    """The analysis, step by step; results cached for this trace and these options are
    handed over all at once (core/analysis/cache.py), computed ones stored."""
    analyze_cached(trace, options, progress,
                   lambda a, part: state.partial(AnalysisReady(replace(a), part)))


def compare_job(state, path: str, options: Options, load_mode: str = "auto") -> None:
    """Load and analyze a second run for the Compare dock (no timeline index needed)."""
    from ..core.analysis.pipeline import analyze

    trace = load(state, path, load_mode)
    analysis = analyze(trace, options, subrange(state, 0.5, 1.0))
    state.partial(CompareReady(trace, analysis))


def open_ranks_job(state, paths: list[str], options: Options) -> None:
    """One rank file in full, or a few of them as one multi-rank trace."""
    if len(paths) == 1:
        trace = load(state, paths[0])
    else:
        from ..core.importers.chrome.rank_folder import assign_ranks
        from ..core.importers.chrome.trace import load_files

        files = [Path(p) for p in paths]
        trace = load_files(files[0].parent, files, subrange(state, 0.0, 0.5),
                           rank_of=assign_ranks)
        trace.meta.source = ", ".join(p.name for p in files)
    analyze_loaded(state, trace, options)
