"""Importer registry: sniff a path, pick the importer, return a :class:`Trace`.

Each format lives in its own subpackage (``chrome/``, ``nsys/``, ``sofa/``, ``xplane/``,
``recording/``); the module that opens it exposes an ``IMPORTER`` object with

* ``name`` -- short format name (``"kineto"``, ``"sofa"``, ...);
* ``suffixes`` -- file name endings it reads (the Open dialog's filter is made of them);
* ``can_open(path) -> Confidence`` -- a named tier (:mod:`.confidence`) from *content*
  (not only the suffix);
* ``load(path, progress) -> Trace`` -- raises :class:`TraceFormatError` on bad input.

:func:`load_trace` tries them in order of confidence and goes through the
cache (:mod:`sofa_gui.core.store`) unless told not to.
"""

from __future__ import annotations

import errno
import gzip
import importlib
import logging
import os
import zlib
from pathlib import Path
from typing import Protocol

from ..errors import TraceFormatError
from ..progress import Cancelled, NullProgress, Progress
from ..trace import Trace
from .confidence import Confidence

log = logging.getLogger(__name__)

# Exceptions an importer can hit on corrupt input; load_trace turns them into a
# TraceFormatError so no caller ever sees a traceback for bad data.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, EOFError,
              UnicodeError, OverflowError, RecursionError, zlib.error, gzip.BadGzipFile)

#: Modules providing importers, in tie-break order.
IMPORTER_MODULES = [
    "sofa_gui.core.importers.recording.folder",
    "sofa_gui.core.importers.sofa.logdir",
    "sofa_gui.core.importers.chrome.rank_folder",
    "sofa_gui.core.importers.nsys.sqlite",
    "sofa_gui.core.importers.chrome.trace",
    "sofa_gui.core.importers.xplane.xspace",
]


class Importer(Protocol):
    name: str
    suffixes: tuple[str, ...]

    def can_open(self, path: Path) -> Confidence: ...

    def load(self, path: Path, progress: Progress) -> Trace: ...


def importers() -> list[Importer]:
    """All importers whose module is present (each module is optional)."""
    out = []
    for mod in IMPORTER_MODULES:
        try:
            out.append(importlib.import_module(mod).IMPORTER)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    return out


def trace_file_filter() -> str:
    """The Open dialog's name filter, from every importer's ``suffixes``."""
    patterns = dict.fromkeys(f"*{s}" for imp in importers() for s in imp.suffixes)
    return f"Traces ({' '.join(patterns)});;All files (*)"


def pick_importer(path: Path) -> Importer:
    """The importer most confident it can read ``path``, or a TraceFormatError."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TraceFormatError(path, "symbolic link loop (too many levels of links)") \
                from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise TraceFormatError(path, "no such file or folder") from None
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if path.is_file() and path.stat().st_size == 0:
        raise TraceFormatError(path, "file is empty")
    best, best_score = None, Confidence.NO
    for imp in importers():
        try:
            score = imp.can_open(path)
        except OSError as exc:
            raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
        except _MALFORMED:  # a sniffer choking on the content: not this importer's format
            log.debug("importer %s could not sniff %s", imp.name, path, exc_info=True)
            continue
        if score > best_score:
            best, best_score = imp, score
    if best is None:
        what = "folder" if path.is_dir() else "file"
        raise TraceFormatError(path, f"not a trace {what} this program can read")
    return best


def load_trace(path, progress: Progress | None = None, use_cache: bool = True) -> Trace:
    """Open a trace file or folder, from the cache when it is fresh."""
    from .. import store

    path = Path(path).expanduser()
    trace, entry = open_trace(path, progress, use_cache)
    if entry is not None:
        trace.cache_entry = store.save_cached(path, trace, entry)
    return trace


def open_trace(path, progress: Progress | None = None,
               use_cache: bool = True) -> tuple[Trace, Path | None]:
    """(trace, the cache entry to write it to or None): :func:`load_trace` without the
    cache write, for a caller that writes it while doing something else."""
    from .. import store

    path = Path(path).expanduser()
    progress = progress or NullProgress()
    # fingerprint once, before reading: the entry then matches the bytes actually read
    entry = store.try_entry_dir(path) if use_cache else None
    if entry is not None:
        cached = store.load_cached(path, entry)
        if cached is not None:
            cached.meta.source = str(path)  # as asked for now, not as first opened
            cached.cache_entry = entry
            progress.update(1.0, "loaded from cache")
            return cached, None
    from .source_args import args_on_demand

    imp = pick_importer(path)
    try:
        with args_on_demand(entry is None):  # args copied only when they will be cached
            trace = imp.load(path, progress)
    except (TraceFormatError, Cancelled):
        raise
    except MemoryError:
        raise TraceFormatError(path, "out of memory while reading") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    except _MALFORMED as exc:
        log.debug("importer %s failed on %s", imp.name, path, exc_info=True)
        why = f"malformed {imp.name} data ({type(exc).__name__}: {exc})"
        raise TraceFormatError(path, why) from None
    trace.meta.source = str(path)
    trace.meta.format = trace.meta.format or imp.name
    return trace, entry
