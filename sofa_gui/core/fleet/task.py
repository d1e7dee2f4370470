"""The per-rank task: runs on a Dask worker, next to the data.

The worker reads the rank file from the (shared) path and keeps the columnar cache
in its own cache dir (``$SOFA_GUI_CACHE_DIR`` or ``~/.cache/sofa_gui`` on that
machine), so a second fleet run over the same files reopens them memory-mapped.
Only the :class:`~.summary.RankSummary` leaves the worker.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from ..errors import TraceFormatError
from .summary import RankSummary, summarize


def rank_task(path: str, rank: int, mode: str = "auto", use_cache: bool = True) -> RankSummary:
    """Import and analyze one rank file; bad input comes back as a summary with ``error``.

    Anything else (a bug, a lost worker) is raised, so Dask can retry it and the client
    reports it for this rank alone.
    """
    from .. import store
    from ..analysis.pipeline import Options, analyze
    from ..importers import load_trace

    t0, c0 = time.perf_counter(), time.process_time()
    where = f"{socket.gethostname()}:{os.getpid()}"
    p = Path(path)
    try:
        cached = use_cache and store.is_cached(p)
        trace = load_trace(p, use_cache=use_cache)
        summary = summarize(rank, path, trace, analyze(trace, Options(iterations=mode)))
    except TraceFormatError as exc:
        return RankSummary.failed(rank, path, exc.reason, worker=where,
                                  seconds=time.perf_counter() - t0)
    summary.worker = where
    summary.from_cache = bool(cached)
    summary.seconds = round(time.perf_counter() - t0, 4)
    summary.cpu_seconds = round(time.process_time() - c0, 4)
    return summary
