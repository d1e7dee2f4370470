"""A data-only msgpack-able encoding of the typed analysis results.

Plain values (numbers, strings, bytes, None), lists, tuples, dicts, sets, numpy
arrays and scalars of plain dtypes round-trip exactly (dtype, shape, type); so do the
result classes of :func:`result_types`, a fixed table of dataclasses and enums named by
their class name. Nothing in an encoded value names a module, a function or an
attribute: decoding only looks names up in that table, sets the dataclass's own
fields and looks an enum member up by value, so a planted cache file can choose data
but never code. Anything else raises :class:`Unsupported` (on encode: the value is not
stored; on decode: the input is malformed). Used by the analysis cache and to hand
results back from a forked child (:mod:`.aside`).
"""

from __future__ import annotations

import dataclasses
import enum

import msgspec
import numpy as np

from ..trace import CopyKind, Kind, LaneKind


class Unsupported(TypeError):
    """A value the codec cannot store faithfully, or an encoding it cannot read."""


_TYPES: dict[str, type] = {}


def register(*classes: type) -> None:
    """Add result classes to the table an encoding may name. Each module that defines
    one registers it where it defines it (so this module imports none of them and the
    analysis modules may use the codec); nothing read from data can add a class."""
    for cls in classes:
        if _TYPES.setdefault(cls.__qualname__, cls) is not cls:
            raise ValueError(f"two result types named {cls.__qualname__}")


def result_types() -> dict[str, type]:
    """The classes an encoding may name, by class name (the fixed registry)."""
    return dict(_TYPES)


register(Kind, CopyKind, LaneKind)


#: numpy dtype kinds stored as raw bytes: bool, integers, floats, complex, times, text.
_DTYPE_KINDS = frozenset("biufcmMSU")
_PLAIN = (str, int, float, bool, bytes, type(None))


def _type_name(cls: type) -> str:
    name = cls.__qualname__
    if _TYPES.get(name) is not cls:
        raise Unsupported(f"{cls.__module__}.{name} is not a registered result type")
    return name


def encode(obj):
    """``obj`` as plain msgpack-able values (see the module docstring)."""
    if isinstance(obj, enum.Enum):
        return ["E", _type_name(type(obj)), encode(obj.value)]
    if isinstance(obj, _PLAIN) and type(obj) in _PLAIN:
        return obj
    if isinstance(obj, np.ndarray):
        _dtype(obj.dtype.str)
        return ["A", obj.dtype.str, list(obj.shape), np.ascontiguousarray(obj).tobytes()]
    if isinstance(obj, np.generic):
        _dtype(obj.dtype.str)
        return ["S", obj.dtype.str, obj.tobytes()]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = [f.name for f in dataclasses.fields(obj)]
        return ["C", _type_name(type(obj)), names, [encode(getattr(obj, n)) for n in names]]
    if type(obj) is list:
        return ["L", [encode(v) for v in obj]]
    if type(obj) is tuple:
        return ["T", [encode(v) for v in obj]]
    if type(obj) is dict:
        return ["D", [encode(k) for k in obj], [encode(v) for v in obj.values()]]
    if type(obj) in (set, frozenset):
        return ["Z" if type(obj) is set else "F", [encode(v) for v in obj]]
    raise Unsupported(f"cannot store a {type(obj).__qualname__}")


def dumps(obj) -> bytes:
    """``obj`` encoded (:func:`encode`) as msgpack bytes."""
    return msgspec.msgpack.encode(encode(obj))


def loads(data: bytes):
    """The value :func:`dumps` wrote; :class:`Unsupported` for any other bytes (not
    msgpack, nested too deep, or an encoding :func:`decode` refuses)."""
    try:
        node = msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise Unsupported(f"not readable msgpack ({type(exc).__name__})") from None
    return decode(node)


def decode(node):
    """The inverse of :func:`encode`; :class:`Unsupported` for anything it did not write."""
    try:
        return _decode(node)
    except Unsupported:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError) as exc:
        raise Unsupported(f"malformed encoding ({type(exc).__name__})") from None


def _dtype(text) -> np.dtype:
    if type(text) is not str or len(text) > 8:
        raise Unsupported("bad dtype")
    dt = np.dtype(text)
    if dt.kind not in _DTYPE_KINDS or dt.hasobject or dt.fields is not None or dt.subdtype:
        raise Unsupported(f"numpy dtype {text!r} is not plain data")
    return dt


def _items(node, n: int) -> list:
    if len(node) != n:
        raise Unsupported(f"tag {node[0]!r} takes {n - 1} items")
    return node


def _seq(value) -> list:
    if type(value) is not list:
        raise Unsupported("expected a list")
    return value


def _array(node) -> np.ndarray:
    _, dt, shape, raw = _items(node, 4)
    dt = _dtype(dt)
    if type(raw) is not bytes or not all(type(k) is int and k >= 0 for k in _seq(shape)):
        raise Unsupported("bad array")
    return np.frombuffer(raw, dt).reshape(shape).copy()


def _scalar(node):
    _, dt, raw = _items(node, 3)
    dt = _dtype(dt)
    if type(raw) is not bytes or len(raw) != dt.itemsize:
        raise Unsupported("bad scalar")
    return np.frombuffer(raw, dt)[0]


def _registered(name) -> type:
    cls = _TYPES.get(name) if type(name) is str else None
    if cls is None:
        raise Unsupported(f"{str(name)[:80]!r} is not a registered result type")
    return cls


def _dataclass(node):
    _, name, names, values = _items(node, 4)
    cls = _registered(name)
    fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else None
    if fields is None or _seq(names) != fields or len(_seq(values)) != len(fields):
        raise Unsupported(f"{name} does not have these fields")
    obj = object.__new__(cls)
    for field, value in zip(fields, values):
        object.__setattr__(obj, field, _decode(value))
    return obj


def _enum(node):
    _, name, value = _items(node, 3)
    cls = _registered(name)
    if not issubclass(cls, enum.Enum):
        raise Unsupported(f"{name} is not an enum")
    return cls(_decode(value))  # a member lookup by value, nothing else


def _decode(node):
    if type(node) is not list:
        if isinstance(node, _PLAIN):
            return node
        raise Unsupported(f"unexpected {type(node).__name__}")
    if not node or type(node[0]) is not str:
        raise Unsupported("a container without a tag")
    tag = node[0]
    if tag in _SIMPLE:
        return _SIMPLE[tag](node)
    if tag == "D":
        _, keys, values = _items(node, 3)
        if len(_seq(keys)) != len(_seq(values)):
            raise Unsupported("dict keys and values differ in number")
        return {_decode(k): _decode(v) for k, v in zip(keys, values)}
    if tag in _MAKERS:
        _, values = _items(node, 2)
        return _MAKERS[tag](_decode(v) for v in _seq(values))
    raise Unsupported(f"unknown tag {tag[:20]!r}")


_SIMPLE = {"A": _array, "S": _scalar, "C": _dataclass, "E": _enum}
_MAKERS = {"L": list, "T": tuple, "Z": set, "F": frozenset}
