"""The few args the importer reads (correlation, device, stream, bytes, memory).

Args of many events are decoded by one msgspec call into small structs: strict ones
(plain ints, absent -1) convert to columns in one C pass; when a file has other values
there, loose structs take whatever it has and :func:`~.values.int_or` keeps the sane
ones. Everything else in ``args`` stays raw JSON, read on demand.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from .values import int_or


class _RuntimeArgs(msgspec.Struct, gc=False):
    """Strict args: plain ints or absent (-1), so columns convert in one C pass."""

    correlation: int = -1
    correlation_id: int = msgspec.field(default=-1, name="correlation id")


class _DeviceArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    correlation_id: int = msgspec.field(default=-1, name="correlation id")
    device: int = -1
    stream: int = -1
    nbytes: int = msgspec.field(default=-1, name="bytes")
    nbytes2: int = msgspec.field(default=-1, name="Bytes")


class _LooseRuntimeArgs(msgspec.Struct, gc=False):
    correlation: Any = None
    correlation_id: Any = msgspec.field(default=None, name="correlation id")


class _LooseDeviceArgs(msgspec.Struct, gc=False):
    correlation: Any = None
    correlation_id: Any = msgspec.field(default=None, name="correlation id")
    device: Any = None
    stream: Any = None
    nbytes: Any = msgspec.field(default=None, name="bytes")
    nbytes2: Any = msgspec.field(default=None, name="Bytes")


class _MemArgs(msgspec.Struct, gc=False):
    dev_type: Any = msgspec.field(default=None, name="Device Type")
    dev_id: Any = msgspec.field(default=None, name="Device Id")
    delta: Any = msgspec.field(default=None, name="Bytes")
    total: Any = msgspec.field(default=None, name="Total Allocated")


def _decoders(strict, loose) -> tuple:
    return (msgspec.json.Decoder(list[strict]), msgspec.json.Decoder(strict),
            msgspec.json.Decoder(list[loose]), msgspec.json.Decoder(loose))


RUNTIME_ARGS = _decoders(_RuntimeArgs, _LooseRuntimeArgs)
DEVICE_ARGS = _decoders(_DeviceArgs, _LooseDeviceArgs)
MEM_ARGS = _decoders(_MemArgs, _MemArgs)
_A_CORR, _A_CORR2 = attrgetter("correlation"), attrgetter("correlation_id")
A_DEVICE, A_STREAM = attrgetter("device"), attrgetter("stream")
A_BYTES, A_BYTES2 = attrgetter("nbytes"), attrgetter("nbytes2")
A_TOTAL, A_DELTA = attrgetter("total"), attrgetter("delta")


def args_dict(raw) -> dict:
    if not len(raw):
        return {}
    try:
        v = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return {}
    return v if isinstance(v, dict) else {}


def merge_args(b_args: bytes, e_args: bytes) -> bytes:
    """B's args plus E's (the format merges them), as JSON bytes."""
    if not e_args or e_args.strip() in (b"{}", b""):
        return b_args
    merged = {**args_dict(b_args), **args_dict(e_args)}
    return msgspec.json.encode(merged)


def decode_batch(raws: list, decoders: tuple) -> tuple[list, bool]:
    """Decode many args objects in one call; per object (then leniently) if that fails.

    Returns (structs, strict): strict structs hold only ints (absent: -1); the
    loose ones whatever the file has, for :func:`int_or`.
    """
    many, one, loose_many, loose_one = decoders
    try:
        out = many.decode(b"[" + b",".join(raws) + b"]")
        if len(out) == len(raws):  # an empty args value would vanish from the list
            return out, True
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    text = b"[" + b",".join(r if len(r) else b"{}" for r in raws) + b"]"
    try:
        return loose_many.decode(text), False
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        out = []
        for r in raws:
            try:
                out.append(loose_one.decode(r) if len(r) else loose_one.decode(b"{}"))
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                out.append(loose_one.decode(b"{}"))
        return out, False


_INT_LIMIT = 1 << 62  # as :func:`int_or`: larger magnitudes are not ids or counts


def arg_ints(args: list, get, strict: bool) -> np.ndarray:
    """An int field of decoded args as int64; absent, not an int or huge -> -1."""
    if strict:
        try:
            out = np.fromiter(map(get, args), np.int64, len(args))
        except OverflowError:  # beyond int64: per value
            return int_or(list(map(get, args)), -1)
        return np.where((out > -_INT_LIMIT) & (out < _INT_LIMIT), out, -1)
    return int_or(list(map(get, args)), -1)


def correlations(args: list, strict: bool) -> np.ndarray:
    corr = arg_ints(args, _A_CORR, strict)
    if (corr < 0).any():
        corr2 = arg_ints(args, _A_CORR2, strict)
        corr = np.where(corr >= 0, corr, corr2)
    return corr
