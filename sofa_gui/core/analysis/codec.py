"""A generic msgpack-able encoding of the typed analysis results.

Any dataclass of this package, enum, numpy array or scalar, list, tuple, dict, set or
plain value round-trips exactly (dtype, shape, class). Classes are only looked up in
``sofa_gui`` modules; anything else raises :class:`Unsupported`. Used by the analysis
cache and to hand results back from a forked child (:mod:`.aside`).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib

import numpy as np

_PACKAGE = "sofa_gui."


class Unsupported(TypeError):
    """A value the cache cannot store faithfully."""


# -- generic codec: every container is a list whose first item says what it is ----------------
_PLAIN = (str, int, float, bool, bytes, type(None))


def _class_name(cls: type) -> str:
    if not cls.__module__.startswith(_PACKAGE):
        raise Unsupported(f"{cls.__module__}.{cls.__qualname__} is not a sofa_gui class")
    return f"{cls.__module__}:{cls.__qualname__}"


def encode(obj):
    """``obj`` as plain msgpack-able values (see the module docstring)."""
    if isinstance(obj, enum.Enum):
        return ["E", _class_name(type(obj)), encode(obj.value)]
    if isinstance(obj, _PLAIN) and type(obj) in _PLAIN:
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject or obj.dtype.fields is not None:
            raise Unsupported(f"numpy array of {obj.dtype}")
        return ["A", obj.dtype.str, list(obj.shape), np.ascontiguousarray(obj).tobytes()]
    if isinstance(obj, np.generic):
        return ["S", obj.dtype.str, obj.tobytes()]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        attrs = vars(obj) if hasattr(obj, "__dict__") else \
            {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return ["C", _class_name(type(obj)), list(attrs), [encode(v) for v in attrs.values()]]
    if type(obj) is list:
        return ["L", [encode(v) for v in obj]]
    if type(obj) is tuple:
        return ["T", [encode(v) for v in obj]]
    if type(obj) is dict:
        return ["D", [encode(k) for k in obj], [encode(v) for v in obj.values()]]
    if type(obj) in (set, frozenset):
        return ["Z" if type(obj) is set else "F", [encode(v) for v in obj]]
    raise Unsupported(f"cannot cache a {type(obj).__qualname__}")


def _class(name: str) -> type:
    module, qual = name.split(":")
    if not module.startswith(_PACKAGE):
        raise Unsupported(f"refusing to load class from {module}")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def decode(node):
    """The inverse of :func:`encode`."""
    if not isinstance(node, list):
        return node
    tag = node[0]
    if tag == "A":
        return np.frombuffer(node[3], np.dtype(node[1])).reshape(node[2]).copy()
    if tag == "S":
        return np.frombuffer(node[2], np.dtype(node[1]))[0]
    if tag == "C":
        cls = _class(node[1])
        obj = object.__new__(cls)
        for name, value in zip(node[2], node[3]):
            object.__setattr__(obj, name, decode(value))
        return obj
    if tag == "E":
        return _class(node[1])(decode(node[2]))
    if tag == "L":
        return [decode(v) for v in node[1]]
    if tag == "T":
        return tuple(decode(v) for v in node[1])
    if tag == "D":
        return {decode(k): decode(v) for k, v in zip(node[1], node[2])}
    if tag in ("Z", "F"):
        items = (decode(v) for v in node[1])
        return set(items) if tag == "Z" else frozenset(items)
    raise Unsupported(f"unknown tag {tag!r}")
