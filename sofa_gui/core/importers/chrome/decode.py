"""Streaming decode of Chrome Trace Event JSON into chunks of typed events.

The file (plain or gzip) is read in blocks; the ``traceEvents`` array is cut at
event boundaries into ~2 MB pieces, each decoded by one msgspec call into a
list of :class:`Event` structs that hold only the fields the importer uses
(``args`` stays raw JSON). Small pieces keep memory flat and the caches warm,
and let the caller report progress and cancel between them.

A cut is only a guess (``}`` ``,`` ``{`` may occur inside a string); a wrong
guess cannot decode as complete JSON, so the piece is simply extended to the
next candidate. Pieces with values msgspec refuses (wrong types, ``NaN``, bad
UTF-8) go through a lenient per-event path so one bad event costs one skip,
not the whole file. Real syntax errors and truncation raise
:class:`TraceFormatError` with the byte offset.

Untrusted files may be built to cost far more than their size: blank space is
skipped as it streams by (never held), a value outside ``traceEvents`` may not
exceed :data:`MAX_HEADER_VALUE`, a long run of blanks between events ends the
piece before it (the blanks then stream by), one event may not exceed
:data:`MAX_PIECE`, and gzip data may not decompress past
:func:`decompressed_limit` (the machine's memory, or ``SOFA_GUI_MAX_DECOMPRESSED_BYTES``).
"""

from __future__ import annotations

import gzip
import json
import math
import operator
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from functools import reduce
from pathlib import Path
from typing import Any, Literal, get_args

import msgspec

from ...errors import TraceFormatError
from ..source_args import piece_tag

BLOCK = 4 << 20  # decompressed bytes read at a time
CHUNK = 2 << 20  # target size of one decoded piece
OBJECT_SEP = re.compile(rb"\}\s*,\s*\{")
_WS = b" \t\r\n"
_NON_WS = re.compile(rb"[^ \t\r\n]")
#: Largest value held outside ``traceEvents`` (Kineto's header values are a few kB).
MAX_HEADER_VALUE = 32 << 20
#: Largest piece of the events array without an event boundary (one event + blanks).
MAX_PIECE = 256 << 20
#: A run of blanks this long after an event ends the piece there (and streams by).
BLANK_RUN = 1 << 20
_BYTE = re.compile(r"\(byte (\d+)\)")
_JSON_SCALAR = re.compile(rb'"|-?\d|true\b|false\b|null\b')


class Event(msgspec.Struct, gc=False):
    """The fields of one trace event the importer reads; the rest are skipped."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    bp: str = ""
    s: str = ""
    args: msgspec.Raw = msgspec.Raw(b"")
    bind_id: int | str | None = None
    flow_in: bool = False
    flow_out: bool = False


# Known phases and Kineto categories decode to the one interned str object each,
# which makes the per-event hashing and joining downstream cheaper; a piece with
# any other value is decoded again with plain ``str`` fields (:class:`Event`).
_PHASES = Literal["X", "B", "E", "i", "I", "C", "M", "s", "t", "f", "b", "n", "e", "P", "N",
                  "O", "D", "V", "v", "R", "c", "(", ")", "S", "T", "p", "F"]
_CATEGORIES = Literal[
    "", "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset",
    "kernel", "cuda_runtime", "cuda_driver", "cuda_sync", "python_function", "overhead",
    "ac2g", "fwdbwd", "async_cpu_to_gpu", "Trace", "cpu_instant_event", "external_correlation",
    "cuda_profiler_range", "mtia_runtime", "mtia_ccp_events", "xpu_runtime", "xpu_driver",
    "hpu_op", "collective_comm", "privateuse1_runtime", "privateuse1_driver", "glow_runtime",
    "Operator", "Runtime", "Kernel", "Memcpy", "Memset", "async", "Python", "python"]


class KnownEvent(msgspec.Struct, gc=False):
    """:class:`Event` with known phases and categories as literals."""

    ph: _PHASES = "X"
    name: str = ""
    cat: _CATEGORIES = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    bp: str = ""
    s: str = ""
    args: msgspec.Raw = msgspec.Raw(b"")
    bind_id: int | str | None = None
    flow_in: bool = False
    flow_out: bool = False


class Layout:
    """A tagged union of event structs, one class per phase (msgspec picks it by ``ph``).

    X events and flow events (s/t/f) get classes with only the fields they use,
    so they decode faster and the reader handles each group with no per-event
    branching; other phases get every :class:`Event` field. Each class has a
    class attribute ``ph``. Used when events start with their ``ph`` key
    (Kineto writes it first), where msgspec finds the class without looking ahead.
    """

    def __init__(self, cat_type):
        base = msgspec.defstruct("TaggedEvent", [], gc=False, tag_field="ph")
        common = [("cat", cat_type, ""), ("pid", int | str, 0), ("tid", int | str, 0),
                  ("ts", float | None, None)]
        x_fields = [("name", str, ""), *common, ("dur", float | None, None),
                    ("args", msgspec.Raw, msgspec.Raw(b"")), ("bind_id", int | str | None, None),
                    ("flow_in", bool, False), ("flow_out", bool, False)]
        flow_fields = [*common, ("id", int | str | None, None), ("bp", str, "")]
        all_fields = [(f.name, cat_type if f.name == "cat" else f.type, f.default)
                      for f in _EVENT_FIELDS if f.name != "ph"]

        def make(ph: str, fields: list) -> type:
            return msgspec.defstruct(f"Event{ord(ph)}", fields, bases=(base,), tag=ph,
                                     gc=False, namespace={"ph": ph})

        self.x = make("X", x_fields)
        self.flows = {make(ph, flow_fields): ord(ph) for ph in "stf"}
        others = [make(ph, all_fields) for ph in _PHASE_LIST if ph not in "Xstf"]
        classes = (self.x, *self.flows, *others)
        self.phase = {c: ord(c.ph) for c in classes}  # class -> ASCII code of its phase
        self.decoder = msgspec.json.Decoder(list[reduce(operator.or_, classes)])


_PHASE_LIST = get_args(_PHASES)
_EVENT_FIELDS = msgspec.structs.fields(Event)
_DECODE_KNOWN = msgspec.json.Decoder(list[KnownEvent])
_DECODE_EVENTS = msgspec.json.Decoder(list[Event])
TAGGED_KNOWN = Layout(_CATEGORIES)
TAGGED = Layout(str)
# most specific first; a stream starts at the first that fits its first piece and only
# moves down the list when a piece fails to decode with the current one
_DECODERS = ((TAGGED_KNOWN.decoder, TAGGED_KNOWN), (TAGGED.decoder, TAGGED),
             (_DECODE_KNOWN, None), (_DECODE_EVENTS, None))
_PH_FIRST = re.compile(rb'\[\s*\{\s*"ph"\s*:')
_DECODE_EVENT = msgspec.json.Decoder(Event)
_DECODE_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_DECODE_TS = None  # built lazily: see exact_ts_strings


class _TsOnly(msgspec.Struct, gc=False):
    ts: Any = None


def exact_ts_strings(piece: bytes) -> list:
    """The ``ts`` of each event in a decoded piece as written (str for floats).

    Used when float64 cannot hold ``ts * 1000`` exactly (sub-µs epoch stamps).
    """
    global _DECODE_TS
    if _DECODE_TS is None:
        _DECODE_TS = msgspec.json.Decoder(list[_TsOnly], float_hook=str)
    return [e.ts for e in _DECODE_TS.decode(piece)]


class Piece:
    """One decoded slice of the events array."""

    __slots__ = ("events", "skipped", "text", "layout", "span")

    def __init__(self, events: list, skipped: Counter, text: bytes | None,
                 layout: Layout | None = None, span: tuple | None = None):
        self.events = events  # Event or KnownEvent structs, or a Layout's classes
        self.skipped = skipped  # array items that are not usable events
        self.text = text  # the JSON array text (fast path only), for exact_ts_strings
        self.layout = layout  # the tagged union the events were decoded with, if any
        #: (lo, hi, items, tag): ``text`` is ``[`` + the file's bytes [lo, hi) + ``]``,
        #: decodes to ``items`` events and has fingerprint ``tag`` (source_args.piece_tag),
        #: so an event's args can be read again from the file later; None when that does
        #: not hold (gzip, lenient pieces)
        self.span = span


def _error_byte(exc: Exception) -> int | None:
    m = _BYTE.search(str(exc))
    return int(m.group(1)) if m else None


def _is_trailing(exc: Exception) -> bool:
    return "trailing characters" in str(exc)


def _gzip_reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "truncated gzip file (compressed data ends before its end marker)"
    if isinstance(exc, gzip.BadGzipFile):
        return f"corrupt gzip data ({exc})"
    if isinstance(exc, zlib.error):
        return f"corrupt gzip data (zlib: {exc})"
    return f"cannot read: {exc}"


def decompressed_limit() -> int:
    """Most bytes gzip data may decompress to: the machine's memory, or the env setting."""
    env = os.environ.get("SOFA_GUI_MAX_DECOMPRESSED_BYTES", "")
    try:
        if env:
            return max(1, int(float(env)))
    except ValueError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 64 << 30


class _Capped:
    """A gzip stream that refuses to decompress past :func:`decompressed_limit`."""

    def __init__(self, stream, path: Path):
        self._stream, self._path = stream, path
        self._limit = decompressed_limit()
        self._total = 0

    def read(self, n: int = -1) -> bytes:
        want = self._limit + 1 - self._total
        data = self._stream.read(want if n is None or n < 0 else min(n, want))
        self._total += len(data)
        if self._total > self._limit:
            whose = "the SOFA_GUI_MAX_DECOMPRESSED_BYTES limit" \
                if os.environ.get("SOFA_GUI_MAX_DECOMPRESSED_BYTES") else \
                "this machine's memory; set SOFA_GUI_MAX_DECOMPRESSED_BYTES to allow more"
            raise TraceFormatError(self._path, (
                f"gzip data decompresses to more than {self._limit / 2**20:,.0f} MiB "
                f"({whose}; a decompression bomb?)"))
        return data


def open_text(path: Path):
    """(decompressed stream, raw file) for a plain or gzip-compressed file."""
    raw = open(path, "rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return _Capped(gzip.GzipFile(fileobj=raw, mode="rb"), Path(path)), raw
    raw.seek(0)
    return raw, raw


def sniff_head(path: Path, limit: int = 1 << 16) -> bytes:
    """Up to ``limit`` decompressed bytes from the start of ``path`` (b'' if unreadable)."""
    try:
        stream, raw = open_text(path)
    except OSError:
        return b""
    try:
        return stream.read(limit)
    except (OSError, EOFError, zlib.error):
        return b""
    finally:
        raw.close()


class EventStream:
    """Iterates :class:`Piece` objects of one file; ``header`` holds the other top-level keys.

    ``header`` is complete only after iteration finished (Kineto writes some
    keys, e.g. ``displayTimeUnit``, after the events).
    """

    def __init__(self, path: Path, source=None):
        """``source``: (stream, raw, size) to read instead of the file (a byte range of
        it, see :mod:`.parallel`); ``path`` then only names the file in messages."""
        self.path = Path(path)
        self.header: dict = {}
        self.form = ""  # "object" | "array"
        self.notes: list[str] = []
        if source is None:
            self.size = self.path.stat().st_size
            self._stream, self._raw = open_text(self.path)
        else:
            self._stream, self._raw, self.size = source
        #: file offset of the stream's decompressed offset 0 (None: the offsets are not the
        #: file's, e.g. gzip); pieces then know their byte range in the file (Piece.span)
        self.file_origin: int | None = 0 if self._stream is self._raw else None
        #: typed decoders the pieces were decoded with (indexes into the decoder list)
        self.decoders_used: set[int] = set()
        self.chunk = CHUNK  # target piece size, read at creation (tests make it small)
        self._buf = bytearray()  # one buffer for the whole read: no page faults per block
        self._pos = 0
        self._base = 0  # decompressed offset of _buf[0]
        self._eof = False
        self._decoder = -1  # index into _DECODERS; chosen on the first piece
        self._blank_scan = (0, 0)  # (scanned up to, blank run from): decompressed offsets
        self._sep_due = False  # a piece was cut at '}': ',' or ']' comes next
        self._tail_tried = -1  # where a cut before blanks was last tried

    # -- reading ----------------------------------------------------------------
    def close(self) -> None:
        self._raw.close()

    @property
    def fraction(self) -> float:
        """How much of the file (compressed bytes) has been consumed."""
        try:
            return min(self._raw.tell() / max(self.size, 1), 1.0)
        except (OSError, ValueError):
            return 0.0

    def _fail(self, reason: str) -> TraceFormatError:
        return TraceFormatError(self.path, reason)

    def _more(self) -> bool:
        """Read one more block into the buffer; False at end of file."""
        if self._eof:
            return False
        try:
            # grow with the unconsumed text, so one huge value costs O(n), not O(n**2)
            data = self._stream.read(max(BLOCK, len(self._buf) - self._pos))
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise self._fail(_gzip_reason(exc)) from None
        if not data:
            self._eof = True
            return False
        if self._pos:
            self._base += self._pos
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data
        return True

    def _skip_ws(self) -> int:
        """Position of the next non-blank byte (reading as needed), -1 at end of file."""
        while True:
            m = _NON_WS.search(self._buf, self._pos)
            if m is not None:
                self._pos = m.start()
                return self._pos
            self._pos = len(self._buf)  # all blank: _more() drops it before reading on
            if not self._more():
                return -1

    def _offset(self, p: int) -> int:
        return self._base + p

    # -- top level --------------------------------------------------------------
    def __iter__(self) -> Iterator[Piece]:
        try:
            yield from self._document()
        finally:
            self.close()

    def _document(self) -> Iterator[Piece]:
        self._open_document()
        yield from self._events()

    def events_offset(self) -> int:
        """Offset in the (decompressed) text of the first event's first byte, -1 when
        the array is empty; reads only the header. For a fresh stream, then closed."""
        try:
            self._open_document()
            p = self._skip_ws()
            return -1 if p < 0 or self._buf[p:p + 1] == b"]" else self._offset(p)
        finally:
            self.close()

    def _open_document(self) -> None:
        """Top level up to the events array's '[' (the object form's keys before it)."""
        p = self._skip_ws()
        if p >= 0 and self._buf.startswith(b"\xef\xbb\xbf", p):
            self._pos += 3
            p = self._skip_ws()
        if p < 0:
            raise self._fail("file holds no JSON (only blank space)")
        c = self._buf[p:p + 1]
        if c == b"[":
            self.form = "array"
            self._pos = p + 1
        elif c == b"{":
            self.form = "object"
            self._pos = p + 1
            self._object_header()
        elif _JSON_SCALAR.match(self._buf, p):
            raise self._fail("JSON of the wrong shape: expected an object with \"traceEvents\" "
                             "or an array of events")
        else:
            raise self._fail(f"not JSON: the text starts with {bytes(self._buf[p:p + 12])!r}")

    def _value_at(self) -> tuple[Any, int]:
        """Decode the JSON value starting at ``_pos``; returns (value, end position)."""
        while True:
            p = self._pos
            try:
                value = msgspec.json.decode(memoryview(self._buf)[p:])
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                b = _error_byte(exc)
                if _is_trailing(exc) and b is not None:
                    text = bytes(self._buf[p:p + b - 1]).rstrip()
                    return _loads_lenient(text), p + len(text)
                if "truncated" in str(exc) and self._more_of_value(p):
                    continue
                # msgspec calls a lone surrogate escape (``"\ud83d"``) "truncated" too
                if isinstance(exc, msgspec.DecodeError):
                    value = self._value_json(p)
                    if value is not None:
                        return value
                raise self._fail(self._syntax_reason(exc, p)) from None
            end = len(self._buf)
            if self._buf[end - 1] in _WS:  # the value ended before the blanks: done
                return value, _last_non_blank(self._buf, p) + 1
            if self._more_of_value(p):  # the value may go on in the next block (a number)
                continue
            return value, end

    def _more_of_value(self, p: int) -> bool:
        """:meth:`_more` for the value at ``_pos`` (= ``p``), refusing one over the bound."""
        more = self._more()
        if len(self._buf) - self._pos > MAX_HEADER_VALUE:
            raise self._fail(f"a value outside traceEvents is larger than "
                             f"{MAX_HEADER_VALUE >> 20} MiB (not a trace header), at byte "
                             f"{self._offset(self._pos)}")
        return more

    def _value_json(self, p: int) -> tuple[Any, int] | None:
        """Python's json for a header value msgspec refused (NaN, Infinity, a lone
        surrogate escape, which becomes U+FFFD)."""
        s = bytes(self._buf[p:]).decode("utf-8", "surrogateescape")
        try:
            value, end = json.JSONDecoder().raw_decode(s)
        except ValueError:
            return None
        return _clean_deep(value), p + len(s[:end].encode("utf-8", "surrogateescape"))

    def _syntax_reason(self, exc: Exception, p: int) -> str:
        if "truncated" in str(exc):
            return "truncated JSON (the file ends inside a value)"
        b = _error_byte(exc)
        where = f" at byte {self._offset(p + b)}" if b is not None else ""
        return f"invalid JSON{where}: {str(exc).split(' (byte')[0]}"

    def _object_header(self) -> None:
        """Top-level keys up to ``"traceEvents": [`` (the events come next)."""
        self._members(before=True)

    def _members(self, before: bool) -> None:
        """Key/value pairs of the top-level object, before or after the events array.

        Before: returns at the array's '['. After: reads to the closing '}' (a
        second ``traceEvents`` value is read and dropped), then only blanks may follow.
        """
        truncated = "truncated JSON (the file ends inside the top-level object)"
        no_events = 'JSON of the wrong shape: the object has no "traceEvents" array'
        while True:
            p = self._skip_ws()
            if p < 0:
                raise self._fail(truncated)
            if self._buf[p:p + 1] == b"}":
                if before:
                    raise self._fail(no_events)
                return self._end_of_document(p + 1)
            key, p = self._value_at()
            if not isinstance(key, str):
                raise self._fail(f"invalid JSON at byte {self._offset(p)}: expected a key")
            self._pos = p
            p = self._skip_ws()
            if p < 0 or self._buf[p:p + 1] != b":":
                raise self._fail(f"invalid JSON at byte {self._offset(max(p, 0))}: expected ':'")
            self._pos = p + 1
            p = self._skip_ws()
            if p < 0:
                raise self._fail(truncated)
            if key == "traceEvents" and before:
                if self._buf[p:p + 1] != b"[":
                    raise self._fail('JSON of the wrong shape: "traceEvents" is not an array')
                self._pos = p + 1
                return
            value, self._pos = self._value_at()
            if key != "traceEvents":
                self.header[key] = value
            p = self._skip_ws()
            c = self._buf[p:p + 1] if p >= 0 else b""
            if c == b",":
                self._pos = p + 1
            elif c == b"}":
                if before:
                    raise self._fail(no_events)
                return self._end_of_document(p + 1)
            elif not c:
                raise self._fail(truncated)
            else:
                raise self._fail(f"invalid JSON at byte {self._offset(p)}: expected ',' or '}}'")

    def _end_of_document(self, p: int) -> None:
        self._pos = p
        if self._skip_ws() >= 0:
            raise self._fail("invalid JSON: text after the end of the top-level object")

    # -- the events array -------------------------------------------------------
    def _events(self) -> Iterator[Piece]:
        p = self._skip_ws()
        if p >= 0 and self._buf[p:p + 1] == b"]":
            self._pos = p + 1
            self._after_array()
            return
        while True:
            if self._skip_ws() < 0:
                self._array_unterminated()
                return
            if self._sep_due:
                if self._after_cut():
                    return
                continue
            piece, done = self._next_piece()
            if piece.events or piece.skipped:
                yield piece
            if done:
                return

    def _next_piece(self) -> tuple[Piece, bool]:
        """Decode the next piece from ``_pos``; (piece, whether the array is finished)."""
        start = self._pos
        search = start + self.chunk
        while True:
            m = OBJECT_SEP.search(self._buf, min(search, len(self._buf)))
            if m is None and len(self._buf) - start > MAX_PIECE:
                raise self._fail(f"an event (with the blank space after it) is larger than "
                                 f"{MAX_PIECE >> 20} MiB, at byte {self._offset(start)}")
            open_on = m is None and not self._array_ends_in(start)  # decoded once
            if open_on:
                cut = self._cut_at_blanks(start)
                if cut is not None:
                    return cut, False
            if open_on and self._more():
                search -= start - self._pos  # the buffer may have been compacted
                start = self._pos
                continue
            end = m.start() + 1 if m else len(self._buf)
            text = b"".join((b"[", memoryview(self._buf)[start:end], b"]"))
            if self._decoder < 0:
                self._decoder = 0 if _PH_FIRST.match(text) else 2
            outcome, value = _try_decode(text, self._decoder)
            if outcome == "deep":  # args nested ~1000 deep: drop those events, keep the rest
                return self._deep_piece(text, m, start)
            if outcome == "events":
                self._decoder, value = value  # other phases/categories: stay with the broader
            if outcome == "artifact" and len(text) > 2 * self.chunk:
                outcome, value = self._json_fallback(text, start)
            if outcome == "artifact":
                if m is not None:
                    search = m.end()
                    continue
                return self._tail(start), True
            if outcome == "bad":
                outcome, value = self._json_fallback(text, start)
                if outcome == "artifact":
                    if m is not None:
                        search = m.end()
                        continue
                    return self._tail(start), True
            if outcome == "end":
                return self._array_end_in(text[:value], start), True
            piece = self._piece(outcome, value, text, self._span(start, end))
            return self._after_piece(piece, m)

    def _deep_piece(self, text: bytes, m, start: int) -> tuple[Piece, bool]:
        """A piece holding events nested too deep for the decoders: each such event is
        skipped and counted, the others load (one bad record must not lose the file)."""
        kept, dropped, rest_at = drop_deep_events(text)
        doc = b"[" + b",".join(kept) + b"]"
        outcome, value = _try_decode(doc, max(self._decoder, 0))
        if outcome == "events":
            self._decoder, value = value
        if outcome not in ("events", "raws"):
            outcome, value = self._json_fallback(doc, start)
        if outcome not in ("events", "raws", "items"):
            raise self._fail(f"invalid JSON in the events array near byte {self._offset(start)}")
        piece = self._piece(outcome, value, doc)
        piece.skipped["args nested too deep"] += dropped
        if text[rest_at:] != b"]":  # the array closed in this piece
            if text[rest_at:rest_at + 1] != b"]":
                raise self._fail(f"invalid JSON in the events array near byte "
                                 f"{self._offset(start + rest_at - 1)}")
            self._pos = start + rest_at
            self._after_array()
            return piece, True
        return self._after_piece(piece, m)

    def _after_piece(self, piece: Piece, m) -> tuple[Piece, bool]:
        """Move past a piece that ended at separator ``m`` (None: at the end of the file)."""
        if m is None:
            self._pos = len(self._buf)
            self._array_unterminated()
            return piece, True
        self._pos = m.end() - 1
        return piece, False

    def _blank_tail(self, start: int) -> int:
        """Where the run of blanks that ends the buffer begins (>= ``start``); only
        the bytes read since the last call are scanned."""
        scanned, run = (max(v - self._base, start) for v in self._blank_scan)
        last = _last_non_blank(self._buf, scanned)
        run = last + 1 if last >= 0 else run
        self._blank_scan = (self._base + len(self._buf), self._base + run)
        return run

    def _cut_at_blanks(self, start: int) -> Piece | None:
        """The piece up to a long run of blanks after an event, or None.

        The blanks are then skipped as they stream by instead of being held
        (and copied) with the piece. Cut only where the text before the blanks
        decodes as whole events: blanks inside a string are kept.
        """
        run = self._blank_tail(start)
        q = run - 1
        if len(self._buf) - run < BLANK_RUN or q <= start or self._buf[q] not in b",}":
            return None
        if self._tail_tried == self._base + q:
            return None
        self._tail_tried = self._base + q
        end = q if self._buf[q] == ord(",") else q + 1
        doc = b"".join((b"[", memoryview(self._buf)[start:end], b"]"))
        outcome, value = _try_decode(doc, max(self._decoder, 0))
        if outcome == "events":
            self._decoder, value = value
        elif outcome != "raws":
            try:
                outcome, value = self._json_fallback(doc, start)
            except TraceFormatError:
                return None
            if outcome != "items":
                return None
        self._pos = q + 1
        self._sep_due = self._buf[q] == ord("}")
        return self._piece(outcome, value, doc, self._span(start, end))

    def _after_cut(self) -> bool:
        """The ',' (or the array's ']') after a piece cut before blanks; True at ']'."""
        self._sep_due = False
        p = self._pos
        c = self._buf[p:p + 1]
        self._pos = p + 1
        if c == b",":
            return False
        if c == b"]":
            self._after_array()
            return True
        raise self._fail(f"invalid JSON at byte {self._offset(p)}: expected ',' or ']'")

    def _array_ends_in(self, start: int) -> bool:
        """Whether the events array closes in the buffer after ``start`` (so the rest of
        the file, e.g. a gigabyte of blank space, need not be read to find a boundary)."""
        if self._buf.find(b"]", start) < 0:
            return False
        if len(self._buf) - start < 4 * max(self.chunk, CHUNK) and _NON_WS.search(
                self._buf, max(start, len(self._buf) - _BLANK_TAIL)):
            return False  # a usual piece, not yet in a run of blanks: reading on is cheap
        text = b"".join((b"[", memoryview(self._buf)[start:], b"]"))
        return _try_decode(text)[0] == "end"

    def _span(self, start: int, end: int) -> tuple[int, int] | None:
        """File byte range of buffer range [start, end), None when the stream has none."""
        if self.file_origin is None:
            return None
        return self.file_origin + self._offset(start), self.file_origin + self._offset(end)

    def _piece(self, outcome: str, value, text: bytes, span=None) -> Piece:
        if outcome == "events":
            self.decoders_used.add(self._decoder)
            return Piece(value, Counter(), text, _DECODERS[self._decoder][1],
                         None if span is None else (*span, len(value), piece_tag(text)))
        skipped: Counter = Counter()
        events = []
        if outcome == "raws":
            for raw in value:
                try:
                    events.append(_DECODE_EVENT.decode(raw))
                except (msgspec.DecodeError, UnicodeDecodeError):
                    ev = _coerce(_loads_lenient(bytes(raw)), skipped)
                    if ev is not None:
                        events.append(ev)
        else:  # "items": Python objects from the json fallback
            for item in value:
                ev = _coerce(item, skipped)
                if ev is not None:
                    events.append(ev)
        return Piece(events, skipped, None)

    def _json_fallback(self, text: bytes, start: int) -> tuple[str, Any]:
        """Python's json on a piece msgspec refused: NaN, bad UTF-8, odd escapes."""
        s = text.decode("utf-8", "surrogateescape")
        try:
            items, end = json.JSONDecoder().raw_decode(s)
        except ValueError as exc:
            pos = getattr(exc, "pos", None)
            msg = getattr(exc, "msg", "")
            if pos is None or pos >= len(s) - 1 or msg.startswith("Unterminated string"):
                return "artifact", None
            where = self._offset(start + len(s[:pos].encode("utf-8", "surrogateescape")) - 1)
            raise self._fail(f"invalid JSON at byte {where}: "
                             f"{getattr(exc, 'msg', exc)}") from None
        if not isinstance(items, list):
            raise self._fail("invalid JSON: the events array holds a bad value")
        byte_end = len(s[:end].encode("utf-8", "surrogateescape"))
        if byte_end < len(text):
            return "end", byte_end
        return "items", items

    def _array_end_in(self, doc: bytes, start: int) -> Piece:
        """The events array closed inside this piece (``doc`` ends with its ']')."""
        if self._decoder < 0:
            self._decoder = 0 if _PH_FIRST.match(doc) else 2
        outcome, value = _try_decode(doc, self._decoder)
        if outcome == "events":
            self._decoder, value = value
        if outcome not in ("events", "raws"):
            outcome, value = self._json_fallback(doc, start)
        if outcome not in ("events", "raws", "items"):
            raise self._fail("invalid JSON near the end of the traceEvents array")
        # doc: '[' + the buffer from start + the array's ']' (blanks before it stripped)
        piece = self._piece(outcome, value, doc, self._span(start, start + len(doc) - 2))
        self._pos = start + len(doc) - 1  # just after the closing ']'
        self._after_array()
        return piece

    def _tail(self, start: int) -> Piece:
        """End of file inside the array: fine without ']' (array form), else truncation."""
        text = b"[" + self._buf[start:] + b"]"
        outcome, value = self._json_fallback(text, start)
        if outcome == "artifact" and self.form == "array":
            text = b"[" + self._buf[start:].rstrip().rstrip(b",").rstrip() + b"]"
            outcome, value = self._json_fallback(text, start)
        if outcome == "end":
            return self._array_end_in(text[:value], start)
        if outcome == "artifact":
            where = "an event" if self.form == "array" else "the traceEvents array"
            raise self._fail(f"truncated JSON (the file ends inside {where})")
        self._pos = len(self._buf)
        self._array_unterminated()
        return self._piece(outcome, value, text)

    def _array_unterminated(self) -> None:
        if self.form == "object":
            raise self._fail("truncated JSON (the file ends inside the traceEvents array)")
        self.notes.append("the events array has no closing ']' (allowed by the format)")

    def _after_array(self) -> None:
        """Top-level keys after the events (object form), or only blanks (array form).

        Streamed like the header: trailing blank space is skipped block by block
        and values are bounded, so nothing after the array is held whole.
        """
        p = self._skip_ws()
        if self.form == "array":
            if p >= 0:
                raise self._fail(f"invalid JSON at byte {self._offset(p)}: "
                                 "text after the events array")
            return
        if p < 0:
            raise self._fail("truncated JSON (the file ends after the traceEvents array)")
        c = self._buf[p:p + 1]
        if c == b"}":
            return self._end_of_document(p + 1)
        if c != b",":
            raise self._fail(f"invalid JSON at byte {self._offset(p)}: expected ','")
        self._pos = p + 1
        self._members(before=False)


def _last_non_blank(buf, lo: int) -> int:
    """Index of the last non-blank byte of ``buf[lo:]``, -1 if none.

    Looks backwards from the end in doubling windows, so the usual buffer (ending
    in an event, not in blanks) costs one short slice, not a scan of the buffer."""
    end, step = len(buf), 256
    while end > lo:
        a = max(lo, end - step)
        kept = len(buf[a:end].rstrip(_WS))
        if kept:
            return a + kept - 1
        end, step = a, step * 2
    return -1


def _try_decode(text: bytes, first: int = 3) -> tuple[str, Any]:
    """("events", (decoder index, list)) | ("raws", list) | ("end", doc length)
    | ("artifact"|"bad", exc).

    "end": the array closed before the end of ``text``; "artifact": the text
    stops inside an event (a wrong cut, or the end of the file). The typed
    decoders are tried from ``_DECODERS[first]`` on.
    """
    for k in range(first, len(_DECODERS)):
        try:
            return "events", (k, _DECODERS[k][0].decode(text))
        except msgspec.ValidationError:
            continue
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            return _classify(exc, text)
        except RecursionError:
            return "deep", None
    try:
        return "raws", _DECODE_RAWS.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        return _classify(exc, text)
    except RecursionError:
        return "deep", None


#: :meth:`EventStream._array_ends_in` decodes the whole buffer, too costly for every
#: block read: it looks only once the buffer ends in this many blank bytes or a piece has
#: grown past four times the piece size (a huge event or the text after the array).
_BLANK_TAIL = 4096


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _value_end(text: bytes, i: int) -> int:
    """End of the JSON object or array starting at ``text[i]`` (-1: not closed in ``text``).

    A string-aware bracket count, without recursion: it finds the extent of an
    event nested deeper than any decoder will go."""
    depth = 0
    for m in _TOKEN.finditer(text, i):
        c = m.group()
        if c in (b"{", b"["):
            depth += 1
        elif c in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return m.end()
    return -1


def drop_deep_events(text: bytes) -> tuple[list[bytes], int, int]:
    """The events of ``text`` ("[" + events ...) that decode, without those nested too deep.

    Returns (kept event texts, how many were dropped, index in ``text`` of what
    follows the last event: the array's ']' or what the piece ends with).
    """
    kept, dropped, i = [], 0, 1
    while True:
        m = _NON_WS.search(text, i)
        if m is None or text[m.start():m.start() + 1] != b"{":
            return kept, dropped, m.start() if m is not None else len(text)
        j = m.start()
        end = _value_end(text, j)
        if end < 0:
            return kept, dropped, j
        try:
            _DECODE_EVENT.decode(text[j:end])
            kept.append(text[j:end])
        except RecursionError:
            dropped += 1
        except (msgspec.DecodeError, UnicodeDecodeError):
            kept.append(text[j:end])  # the lenient path deals with it
        c = _NON_WS.search(text, end)
        if c is None or text[c.start():c.start() + 1] != b",":
            return kept, dropped, c.start() if c is not None else len(text)
        i = c.end()


def _classify(exc: Exception, text: bytes) -> tuple[str, Any]:
    b = _error_byte(exc)
    if isinstance(exc, msgspec.DecodeError):
        if _is_trailing(exc) and b is not None:
            return "end", len(text[:b - 1].rstrip())
        if "truncated" in str(exc) or (b is not None and b >= len(text) - 1):
            return "artifact", exc
    return "bad", exc


def _loads_lenient(text: bytes) -> Any:
    """msgspec first; Python's json (accepts NaN/Infinity, bad UTF-8 replaced) if refused."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return json.loads(text.decode("utf-8", "replace"))


def _number(v) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _ident(v):
    if isinstance(v, bool) or v is None:
        return 0 if v is None else int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return int(v)
    return _clean(str(v))


def _coerce(obj, skipped: Counter) -> Event | None:
    """An Event from a decoded JSON value, or None (counted in ``skipped``)."""
    if not isinstance(obj, dict):
        skipped["array item is not an event object"] += 1
        return None
    ts = obj.get("ts")
    tsf = _number(ts)
    if ts is not None and tsf is None:
        skipped["ts is not a number"] += 1
        return None
    dur = obj.get("dur")
    args = obj.get("args", None)
    ident = obj.get("id")
    bind = obj.get("bind_id")
    try:
        raw_args = msgspec.Raw(json.dumps(args).encode()) if "args" in obj else msgspec.Raw(b"")
    except (TypeError, ValueError):
        raw_args = msgspec.Raw(b"")
    return Event(
        ph=str(obj.get("ph", "")), name=_text(obj.get("name")), cat=_text(obj.get("cat")),
        pid=_ident(obj.get("pid")), tid=_ident(obj.get("tid")), ts=tsf, dur=_number(dur),
        id=None if ident is None else _ident(ident), bp=_text(obj.get("bp")),
        s=_text(obj.get("s")), args=raw_args, bind_id=None if bind is None else _ident(bind),
        flow_in=obj.get("flow_in") is True, flow_out=obj.get("flow_out") is True,
    )


def _text(v) -> str:
    if v is None:
        return ""
    return _clean(v) if isinstance(v, str) else json.dumps(v)


def _clean_deep(v):
    """:func:`_clean` on every string (keys too) of a decoded JSON value."""
    if isinstance(v, str):
        return _clean(v)
    if isinstance(v, list):
        return [_clean_deep(x) for x in v]
    if isinstance(v, dict):
        return {_clean(k): _clean_deep(x) for k, x in v.items()}
    return v


def _clean(s: str) -> str:
    """Lone surrogates (from ``\\ud800`` escapes or undecodable bytes) -> U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
