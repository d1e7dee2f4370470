"""A minimal protobuf wire-format reader: enough to walk XSpace without a protobuf package.

Fields come out as ``(number, wire_type, value)``; a length-delimited value is a
``(start, end)`` span into the buffer, so nested messages are read by walking that
span again (the caller's schema bounds the depth: no recursion here). Every length
and varint is checked against the buffer, so corrupt input raises :class:`WireError`
with the offset, never reads past the end or loops.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
_MAX_VARINT_BYTES = 10
_U64 = 1 << 64


class WireError(ValueError):
    """The bytes are not well-formed protobuf at the given offset."""


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the offset after it."""
    result = shift = 0
    for i in range(pos, min(end, pos + _MAX_VARINT_BYTES)):
        byte = buf[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >= _U64:
                raise WireError(f"varint over 64 bits at byte {pos}")
            return result, i + 1
        shift += 7
    raise WireError(f"truncated or over-long varint at byte {pos}")


def as_int64(value: int) -> int:
    """Two's-complement view of a 64-bit varint (proto ``int64``)."""
    return value - _U64 if value >= 1 << 63 else value


def fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, object]]:
    """``(field number, wire type, value)`` of each field in ``buf[start:end]``.

    Values: varint -> int, fixed64/fixed32 -> raw ``bytes`` (8 or 4), length-delimited
    -> ``(start, end)`` span. Groups (wire types 3/4) are obsolete and rejected.
    """
    pos = start
    while pos < end:
        tag, pos = read_varint(buf, pos, end)
        number, wtype = tag >> 3, tag & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {pos}")
        if wtype == VARINT:
            value, pos = read_varint(buf, pos, end)
        elif wtype == LEN:
            size, pos = read_varint(buf, pos, end)
            if size > end - pos:
                raise WireError(f"field {number} length {size} runs past its message "
                                f"(byte {pos}, {end - pos} left)")
            value, pos = (pos, pos + size), pos + size
        elif wtype == FIXED64 or wtype == FIXED32:
            size = 8 if wtype == FIXED64 else 4
            if size > end - pos:
                raise WireError(f"truncated fixed{size * 8} field {number} at byte {pos}")
            value, pos = bytes(buf[pos:pos + size]), pos + size
        else:
            raise WireError(f"unsupported wire type {wtype} (field {number}) at byte {pos}")
        yield number, wtype, value


def fixed64_double(raw: bytes) -> float:
    return struct.unpack("<d", raw)[0]


def text(buf: bytes, span: tuple[int, int]) -> str:
    """A ``string`` field; invalid UTF-8 is replaced rather than fatal (names stay readable)."""
    return bytes(buf[span[0]:span[1]]).decode("utf-8", "replace")


def expect(wtype: int, want: int, what: str) -> None:
    """A known field with the wrong wire type means the bytes are not this schema."""
    if wtype != want:
        raise WireError(f"{what} has wire type {wtype}, expected {want}")


# Field types for :func:`message`: each checks the wire type and converts the value.
INT64 = (VARINT, lambda buf, v: as_int64(v))
UINT64 = (VARINT, lambda buf, v: v)
TEXT = (LEN, text)
SPAN = (LEN, lambda buf, v: v)  # a nested message or bytes, left as its span
DOUBLE = (FIXED64, lambda buf, v: fixed64_double(v))


def message(buf: bytes, span: tuple[int, int], schema: dict, repeated: frozenset = frozenset(),
            name: str = "message") -> dict:
    """Decode one message by ``schema`` (field number -> (attr, field type)).

    Returns ``{attr: value}`` for the fields present (last one wins) and
    ``{attr: [values]}`` for ``repeated`` attrs (always present); unknown fields
    are skipped, a known field with the wrong wire type raises :class:`WireError`.
    """
    out: dict = {attr: [] for attr in repeated}
    for num, wt, val in fields(buf, *span):
        entry = schema.get(num)
        if entry is None:
            continue
        attr, (want, convert) = entry
        expect(wt, want, f"{name}.{attr}")
        if attr in repeated:
            out[attr].append(convert(buf, val))
        else:
            out[attr] = convert(buf, val)
    return out
