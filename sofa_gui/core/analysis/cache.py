"""Analysis results stored beside the trace's cache entry, so a reopen skips the analysis.

An entry is keyed by the trace (it lives in the trace's cache folder, whose name
is the source's fingerprint, and goes when that folder is rewritten), by the
analysis version (:data:`ANALYSIS_VERSION` plus a hash of the analysis code, so
an edited analysis never serves stale results) and by the options (e.g. the
iteration mode).

The encoding is generic over the typed results: any dataclass of this package,
enum, numpy array or scalar, list, tuple, dict, set or plain value round-trips
exactly (dtype, shape, class), so fields added to the results later are cached
without changes here. Classes are only looked up in ``sofa_gui`` modules, and
anything else (a reference to the trace, say) makes the entry unwritable
rather than wrong. Files are msgpack, written to a temporary name and renamed.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import importlib
import logging
import os
import tempfile
from pathlib import Path

import msgspec
import numpy as np

log = logging.getLogger(__name__)

#: Bump when results change meaning without the analysis code changing.
ANALYSIS_VERSION = 1
_PACKAGE = "sofa_gui."
_CODE_ROOT = Path(__file__).resolve().parent
#: The trace model modules the results also depend on (what a slice, a kind, a unit or
#: a nesting level is): every module directly in ``sofa_gui/core``.
_MODEL_ROOT = _CODE_ROOT.parent
_code_hash: str | None = None


class Unsupported(TypeError):
    """A value the cache cannot store faithfully."""


def code_version() -> str:
    """:data:`ANALYSIS_VERSION` and a hash of every module of the analysis package and
    of the trace model it reads (``core/*.py``: trace, units, names, kinds, nesting...)."""
    global _code_hash
    if _code_hash is None:
        h = hashlib.sha256(f"v{ANALYSIS_VERSION}".encode())
        files = [*_CODE_ROOT.rglob("*.py"), *_MODEL_ROOT.glob("*.py")]
        for f in sorted(files):
            h.update(f.relative_to(_MODEL_ROOT).as_posix().encode() + b"\0" + f.read_bytes())
        _code_hash = h.hexdigest()[:16]
    return _code_hash


def entry_file(entry: Path, options: dict) -> Path:
    """Where the results for ``options`` live in the trace's cache folder ``entry``."""
    key = msgspec.json.encode({"code": code_version(), "options": options})
    return Path(entry) / f"analysis-{hashlib.sha256(key).hexdigest()[:24]}.msgpack"


def load(entry: Path | None, options: dict):
    """The cached results for ``options``, or None (absent, stale or unreadable)."""
    if entry is None:
        return None
    f = entry_file(entry, options)
    try:
        data = f.read_bytes()
    except OSError:
        return None
    try:
        return decode(msgspec.msgpack.decode(data))
    except Exception:  # a damaged entry is recomputed, never fatal
        log.warning("dropping unreadable analysis cache %s", f, exc_info=True)
        f.unlink(missing_ok=True)
        return None


def save(entry: Path | None, options: dict, results) -> bool:
    """Store ``results`` if the trace's cache folder exists; failures are logged, not raised."""
    if entry is None or not (Path(entry) / "manifest.json").is_file():
        return False
    target = entry_file(entry, options)
    try:
        data = msgspec.msgpack.encode(encode(results))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-analysis-", dir=entry)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return True
    except (OSError, Unsupported, ValueError, TypeError, OverflowError):
        log.warning("could not cache the analysis in %s", entry, exc_info=True)
        return False


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


def analyze_cached(trace, options=None, progress=None, on_result=None, recompute: bool = False):
    """:func:`pipeline.analyze` through the cache of ``trace.cache_entry``.

    A hit hands every part to ``on_result`` at once (in step order, as the
    analysis would); ``recompute`` ignores stored results (and stores the new ones).
    """
    from .pipeline import STEPS, Analysis, Options, analyze

    options = options or Options()
    key = dataclasses.asdict(options)
    entry = getattr(trace, "cache_entry", None)
    if not recompute:
        hit = load(entry, key)
        if hit is not None:
            if on_result is not None:  # filled part by part, as analyze() would
                shown = Analysis()
                for step in STEPS:
                    setattr(shown, step.part, getattr(hit, step.part))
                    on_result(shown, step.part)
            if progress is not None:
                progress.update(1.0, "Analysis loaded from cache")
            return hit
    result = analyze(trace, options, progress, on_result)
    save(entry, key, result)
    return result
