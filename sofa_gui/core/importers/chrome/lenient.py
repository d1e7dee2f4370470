"""The lenient path of the Chrome decoder: one bad event costs one skip, not the file.

A piece msgspec refuses as a whole (wrong types, ``NaN``, bad UTF-8, nesting deeper than
any decoder goes) is decoded event by event here; values are coerced to what
:class:`~.event_types.Event` holds, and strings with lone surrogates become U+FFFD. Also
the helpers that tell a wrong cut from a real syntax error (:func:`try_decode`).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

import msgspec

from .event_types import DECODE_EVENT, DECODE_RAWS, DECODERS, Event

WS = b" \t\r\n"
NON_WS = re.compile(rb"[^ \t\r\n]")
_BYTE = re.compile(r"\(byte (\d+)\)")


def error_byte(exc: Exception) -> int | None:
    m = _BYTE.search(str(exc))
    return int(m.group(1)) if m else None


def is_trailing(exc: Exception) -> bool:
    return "trailing characters" in str(exc)


def last_non_blank(buf, lo: int) -> int:
    """Index of the last non-blank byte of ``buf[lo:]``, -1 if none.

    Looks backwards from the end in doubling windows, so the usual buffer (ending
    in an event, not in blanks) costs one short slice, not a scan of the buffer."""
    end, step = len(buf), 256
    while end > lo:
        a = max(lo, end - step)
        kept = len(buf[a:end].rstrip(WS))
        if kept:
            return a + kept - 1
        end, step = a, step * 2
    return -1


def try_decode(text: bytes, first: int = 3) -> tuple[str, Any]:
    """("events", (decoder index, list)) | ("raws", list) | ("end", doc length)
    | ("artifact"|"bad", exc).

    "end": the array closed before the end of ``text``; "artifact": the text
    stops inside an event (a wrong cut, or the end of the file). The typed
    decoders are tried from ``DECODERS[first]`` on.
    """
    for k in range(first, len(DECODERS)):
        try:
            return "events", (k, DECODERS[k][0].decode(text))
        except msgspec.ValidationError:
            continue
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            return _classify(exc, text)
        except RecursionError:
            return "deep", None
    try:
        return "raws", DECODE_RAWS.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        return _classify(exc, text)
    except RecursionError:
        return "deep", None


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
        m = NON_WS.search(text, i)
        if m is None or text[m.start():m.start() + 1] != b"{":
            return kept, dropped, m.start() if m is not None else len(text)
        j = m.start()
        end = _value_end(text, j)
        if end < 0:
            return kept, dropped, j
        try:
            DECODE_EVENT.decode(text[j:end])
            kept.append(text[j:end])
        except RecursionError:
            dropped += 1
        except (msgspec.DecodeError, UnicodeDecodeError):
            kept.append(text[j:end])  # the lenient path deals with it
        c = NON_WS.search(text, end)
        if c is None or text[c.start():c.start() + 1] != b",":
            return kept, dropped, c.start() if c is not None else len(text)
        i = c.end()


def _classify(exc: Exception, text: bytes) -> tuple[str, Any]:
    b = error_byte(exc)
    if isinstance(exc, msgspec.DecodeError):
        if is_trailing(exc) and b is not None:
            return "end", len(text[:b - 1].rstrip())
        if "truncated" in str(exc) or (b is not None and b >= len(text) - 1):
            return "artifact", exc
    return "bad", exc


def loads_lenient(text: bytes) -> Any:
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


def coerce(obj, skipped: Counter) -> Event | None:
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


def clean_deep(v):
    """:func:`_clean` on every string (keys too) of a decoded JSON value."""
    if isinstance(v, str):
        return _clean(v)
    if isinstance(v, list):
        return [clean_deep(x) for x in v]
    if isinstance(v, dict):
        return {_clean(k): clean_deep(x) for k, x in v.items()}
    return v


def _clean(s: str) -> str:
    """Lone surrogates (from ``\\ud800`` escapes or undecodable bytes) -> U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
