"""Streaming decode of Chrome Trace Event JSON into chunks of typed events.

The file (plain or gzip) is read in blocks; the ``traceEvents`` array is cut at
event boundaries into ~2 MB pieces, each decoded by one msgspec call into a
list of :class:`~.event_types.Event` structs that hold only the fields the importer uses
(``args`` stays raw JSON). Small pieces keep memory flat and the caches warm,
and let the caller report progress and cancel between them.

A cut is only a guess (``}`` ``,`` ``{`` may occur inside a string); a wrong
guess cannot decode as complete JSON, so the piece is simply extended to the
next candidate. Pieces with values msgspec refuses (wrong types, ``NaN``, bad
UTF-8) go through a lenient per-event path (:mod:`.lenient`) so one bad event
costs one skip, not the whole file. Real syntax errors and truncation raise
:class:`TraceFormatError` with the byte offset.

Untrusted files may be built to cost far more than their size: blank space is
skipped as it streams by (never held), a value outside ``traceEvents`` may not
exceed :data:`MAX_HEADER_VALUE`, a long run of blanks between events ends the
piece before it (the blanks then stream by), one event may not exceed
:data:`MAX_PIECE`, and gzip data may not decompress past
:func:`~..opening.decompressed_limit` (the machine's memory, or
``SOFA_GUI_MAX_DECOMPRESSED_BYTES``). The event types are in :mod:`.event_types`.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from ...errors import TraceFormatError
from ..opening import gzip_reason, open_text
from ..source_args import piece_tag
from .event_types import DECODE_EVENT, DECODERS, PH_FIRST, Piece
from .lenient import (
    NON_WS,
    WS,
    clean_deep,
    coerce,
    drop_deep_events,
    error_byte,
    is_trailing,
    last_non_blank,
    loads_lenient,
    try_decode,
)

BLOCK = 4 << 20  # decompressed bytes read at a time
CHUNK = 2 << 20  # target size of one decoded piece
OBJECT_SEP = re.compile(rb"\}\s*,\s*\{")
#: Largest value held outside ``traceEvents`` (Kineto's header values are a few kB).
MAX_HEADER_VALUE = 32 << 20
#: Largest piece of the events array without an event boundary (one event + blanks).
MAX_PIECE = 256 << 20
#: A run of blanks this long after an event ends the piece there (and streams by).
BLANK_RUN = 1 << 20
_JSON_SCALAR = re.compile(rb'"|-?\d|true\b|false\b|null\b')


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
        self._decoder = -1  # index into DECODERS; chosen on the first piece
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
            raise self._fail(gzip_reason(exc)) from None
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
            m = NON_WS.search(self._buf, self._pos)
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
                b = error_byte(exc)
                if is_trailing(exc) and b is not None:
                    text = bytes(self._buf[p:p + b - 1]).rstrip()
                    return loads_lenient(text), p + len(text)
                if "truncated" in str(exc) and self._more_of_value(p):
                    continue
                # msgspec calls a lone surrogate escape (``"\ud83d"``) "truncated" too
                if isinstance(exc, msgspec.DecodeError):
                    value = self._value_json(p)
                    if value is not None:
                        return value
                raise self._fail(self._syntax_reason(exc, p)) from None
            end = len(self._buf)
            if self._buf[end - 1] in WS:  # the value ended before the blanks: done
                return value, last_non_blank(self._buf, p) + 1
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
        return clean_deep(value), p + len(s[:end].encode("utf-8", "surrogateescape"))

    def _syntax_reason(self, exc: Exception, p: int) -> str:
        if "truncated" in str(exc):
            return "truncated JSON (the file ends inside a value)"
        b = error_byte(exc)
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
                self._decoder = 0 if PH_FIRST.match(text) else 2
            outcome, value = try_decode(text, self._decoder)
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
        outcome, value = try_decode(doc, max(self._decoder, 0))
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
        last = last_non_blank(self._buf, scanned)
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
        outcome, value = try_decode(doc, max(self._decoder, 0))
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
        if len(self._buf) - start < 4 * max(self.chunk, CHUNK) and NON_WS.search(
                self._buf, max(start, len(self._buf) - _BLANK_TAIL)):
            return False  # a usual piece, not yet in a run of blanks: reading on is cheap
        text = b"".join((b"[", memoryview(self._buf)[start:], b"]"))
        return try_decode(text)[0] == "end"

    def _span(self, start: int, end: int) -> tuple[int, int] | None:
        """File byte range of buffer range [start, end), None when the stream has none."""
        if self.file_origin is None:
            return None
        return self.file_origin + self._offset(start), self.file_origin + self._offset(end)

    def _piece(self, outcome: str, value, text: bytes, span=None) -> Piece:
        if outcome == "events":
            self.decoders_used.add(self._decoder)
            return Piece(value, Counter(), text, DECODERS[self._decoder][1],
                         None if span is None else (*span, len(value), piece_tag(text)))
        skipped: Counter = Counter()
        events = []
        if outcome == "raws":
            for raw in value:
                try:
                    events.append(DECODE_EVENT.decode(raw))
                except (msgspec.DecodeError, UnicodeDecodeError):
                    ev = coerce(loads_lenient(bytes(raw)), skipped)
                    if ev is not None:
                        events.append(ev)
        else:  # "items": Python objects from the json fallback
            for item in value:
                ev = coerce(item, skipped)
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
            self._decoder = 0 if PH_FIRST.match(doc) else 2
        outcome, value = try_decode(doc, self._decoder)
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


#: :meth:`EventStream._array_ends_in` decodes the whole buffer, too costly for every
#: block read: it looks only once the buffer ends in this many blank bytes or a piece has
#: grown past four times the piece size (a huge event or the text after the array).
_BLANK_TAIL = 4096
