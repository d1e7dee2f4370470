"""Event args read again from the source file when asked for, not copied at open.

A Kineto trace's args are most of its bytes. Copying every event's raw args out
at open (a list of them, one join, a spill-file write) cost ~0.4 s CPU per 1M
events, for values that are mostly never looked at. A plain (uncompressed) JSON
file can be read again instead: the reader remembers, per decoded piece, the
piece's byte range in the file and a fingerprint of its text, and per slice its
item number in that piece (:class:`ArgsRows`). Showing one event's args then
decodes its ~2 MB piece (~3 ms, args only; the last few pieces are kept);
writing the trace cache decodes every piece once (``ArgSegments.to_arrow``).

Only when the trace will not be written to the cache (``open_trace`` without a
cache entry: ``--no-cache``, no usable cache dir; see :func:`args_on_demand`): the
cache needs every event's args, and copying them while decoding (the spill) costs
less than reading the file again for them (measured on the 984k-event tiled file:
~0.45 s CPU of spill at open vs ~1.6 s to read them back for the cache).

The file must not change meanwhile: its size, mtime and inode are checked on
each read, and a changed or removed file raises :class:`ArgsUnavailable` (an
``OSError`` saying so) rather than showing another file's args.
Compressed files keep the spill (:mod:`.args_spill`): reading a gzip file
again to show one event would decompress everything before it.
"""

from __future__ import annotations

import contextvars
import mmap
import os
import threading
import zlib
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path

import msgspec
import numpy as np

#: Plain files at least this large get their args read on demand
#: (``SOFA_GUI_LAZY_ARGS_MIN_BYTES`` overrides it; smaller files are spilled, cheaply).
LAZY_ARGS_MIN_BYTES = 16 << 20
_KEEP_PIECES = 4


class ArgsUnavailable(OSError):
    """The file the args are read from changed or went away since it was opened."""


class _ArgsOnly(msgspec.Struct, gc=False):
    args: msgspec.Raw = msgspec.Raw(b"")


_DECODE_ARGS = msgspec.json.Decoder(list[_ArgsOnly])


_ON_DEMAND = contextvars.ContextVar("sofa_gui_args_on_demand", default=False)


@contextmanager
def args_on_demand(on: bool = True):
    """Within: importers may leave large plain files' args in the file (not cached)."""
    token = _ON_DEMAND.set(on)
    try:
        yield
    finally:
        _ON_DEMAND.reset(token)


def on_demand() -> bool:
    """Whether the current load may read args on demand (see :func:`args_on_demand`)."""
    return _ON_DEMAND.get()


def piece_tag(doc: bytes) -> int:
    """A cheap fingerprint of a piece's text (``[`` + events + ``]``): its first and last
    64 bytes, checked when the piece is read again (a file rewritten in place with its
    size and mtime kept is caught by this, or by the item count)."""
    return zlib.crc32(doc[1:65] + doc[-65:-1])


def lazy_threshold() -> int:
    try:
        return int(float(os.environ["SOFA_GUI_LAZY_ARGS_MIN_BYTES"]))
    except (KeyError, ValueError):
        return LAZY_ARGS_MIN_BYTES


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


class SourceFile:
    """One plain JSON file the args of many slices are read from, as it was at open."""

    def __init__(self, path: Path, st: os.stat_result | None):
        self.path = Path(path)
        self._id = _identity(st) if st is not None else None
        self._pieces: OrderedDict = OrderedDict()  # span -> list of Raw args
        self._lock = threading.Lock()

    def __getstate__(self):  # sent back by a decode worker: no lock, no pieces
        return {"path": self.path, "_id": self._id}

    def __setstate__(self, state):
        self.__init__(state["path"], None)
        self._id = state["_id"]

    @classmethod
    def open(cls, path: Path) -> SourceFile | None:
        """The file, when it is large enough to be worth reading args from on demand."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(path, st) if st.st_size >= lazy_threshold() else None

    def raws(self, span: tuple) -> list:
        """The raw args (``msgspec.Raw``, empty: none) of every item of piece ``span``."""
        with self._lock:
            got = self._pieces.get(span)
            if got is not None:
                self._pieces.move_to_end(span)
                return got
        got = self._read(span)
        with self._lock:
            self._pieces[span] = got
            while len(self._pieces) > _KEEP_PIECES:
                self._pieces.popitem(last=False)
        return got

    def holds(self, span: tuple, texts: tuple[bytes, ...]) -> bool:
        """Whether piece ``span``'s text holds any of ``texts`` (True when the file
        cannot be scanned: reading the args then says why)."""
        lo, hi = span[0], span[1]
        try:
            with open(self.path, "rb") as f:
                if _identity(os.fstat(f.fileno())) != self._id or hi <= lo:
                    return True
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    return any(mm.find(t, lo, hi) >= 0 for t in texts)
        except (OSError, ValueError):
            return True

    def _text(self, lo: int, hi: int) -> bytes:
        try:
            with open(self.path, "rb") as f:
                if _identity(os.fstat(f.fileno())) != self._id:
                    raise self._gone("was modified")
                f.seek(lo)
                return f.read(hi - lo)
        except FileNotFoundError:
            raise self._gone("was removed") from None
        except ArgsUnavailable:
            raise
        except OSError as exc:
            raise self._gone(f"cannot be read ({exc.strerror or exc})") from None

    def _read(self, span: tuple) -> list:
        lo, hi, n, tag = span
        text = self._text(lo, hi)
        doc = b"[" + text + b"]"
        items = None
        if len(text) == hi - lo and piece_tag(doc) == tag:
            try:
                items = _DECODE_ARGS.decode(doc)
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                pass
        if items is None or len(items) != n:
            raise self._gone("does not hold the events it held at open")
        return [it.args for it in items]

    def _gone(self, what: str) -> ArgsUnavailable:
        return ArgsUnavailable(f"{self.path.name} {what} since it was opened; its event "
                               "args are read from it on demand: reopen the file")

    def rows(self, span: tuple, items: np.ndarray, present: np.ndarray) -> SliceArgs:
        return SliceArgs(ArgsRows(self, span, items), present)


class SliceArgs:
    """The args of a chunk of slices that stay in the file: where they are (``rows``, one
    per slice) and which slices have args (``present``: as the spill counts them)."""

    lazy_args = True  # the duck type TraceBuilder.add_slices looks for

    def __init__(self, rows: ArgsRows, present: np.ndarray):
        self.rows, self.present = rows, present

    def __len__(self) -> int:
        return len(self.present)


class ArgsRows:
    """The args of some items of one piece of a :class:`SourceFile`, as a sequence of
    ``bytes``: an args segment of a trace (``trace.ArgSegments``)."""

    in_file = True  # read from the file: ArgSegments.to_arrow reads them all

    def __init__(self, source: SourceFile, span: tuple, items: np.ndarray):
        self.source, self.span = source, span
        self.items = np.asarray(items, np.int64)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, j: int) -> bytes:
        return bytes(self.source.raws(self.span)[int(self.items[j])])

    def may_hold(self, texts: tuple[bytes, ...]) -> bool:
        """Whether these rows' args may hold any of ``texts`` (their piece's text does)."""
        return self.source.holds(self.span, texts)

    def values(self) -> list:
        """Every row's raw args (``msgspec.Raw``), in row order."""
        raws = self.source.raws(self.span)
        return list(map(raws.__getitem__, self.items.tolist()))
