"""Analysis results stored beside the trace's cache entry, so a reopen skips the analysis.

An entry is keyed by the trace (it lives in the trace's cache folder, whose name
is the source's fingerprint, and goes when that folder is rewritten), by the
analysis version (:data:`ANALYSIS_VERSION` plus a hash of the analysis code, so
an edited analysis never serves stale results) and by the options (e.g. the
iteration mode).

The encoding (:mod:`.codec`) is data only: plain values, containers, numpy arrays
and the fixed table of result classes, named by class name; a value outside it (a
reference to the trace, say) makes the entry unwritable rather than wrong. A file
is :data:`MAGIC`, the SHA-256 of the msgpack body, then the body; it is written
private (0600) to a temporary name and renamed. On load the file must belong to
the user and be writable by nobody else, and its checksum must match: anything else
(a flipped bit, a truncated or planted file) drops the entry with one warning line
and the analysis runs again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import tempfile
from pathlib import Path

import msgspec

from ..cache_dir import private_file_problem
from ..errors import one_line

# The modules that define the result types register them with the codec on import: a
# cached analysis may name any of them, so all are imported before one is decoded.
from . import breakdown, device_side, host_side, pipeline, ranks, run_facts, tfdata  # noqa: F401
from . import results as _results  # noqa: F401
from . import verdict as _verdict  # noqa: F401
from .codec import Unsupported, dumps, loads, result_types

log = logging.getLogger(__name__)

#: Bump when results change meaning without the analysis code changing.
ANALYSIS_VERSION = 1
_CODE_ROOT = Path(__file__).resolve().parent
#: The trace model modules the results also depend on (what a slice, a kind, a unit or
#: a nesting level is): every module directly in ``sofa_gui/core``.
_MODEL_ROOT = _CODE_ROOT.parent
_code_hash: str | None = None


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
        problem = private_file_problem(f)
        data = f.read_bytes() if problem is None else b""
    except OSError:
        return None
    try:
        if problem is not None:
            raise Unsupported(problem)
        result = loads(_body(data))
        if type(result) is not result_types()["Analysis"]:
            raise Unsupported("not an analysis")
        return result
    except Unsupported as exc:  # recomputed, never fatal
        log.warning("dropping analysis cache %s: %s", f.name, one_line(str(exc), 200))
        with contextlib.suppress(OSError):
            f.unlink(missing_ok=True)
        return None


#: The first bytes of an analysis cache file (then a SHA-256 digest, then msgpack).
MAGIC = b"sofa-gui-analysis\x01"


def _body(data: bytes) -> bytes:
    """The msgpack body of a cache file, if its checksum matches."""
    head = len(MAGIC) + 32
    if data[: len(MAGIC)] != MAGIC or len(data) < head:
        raise Unsupported("not an analysis cache file")
    body = data[head:]
    if hashlib.sha256(body).digest() != data[len(MAGIC):head]:
        raise Unsupported("checksum mismatch")
    return body


def save(entry: Path | None, options: dict, results) -> bool:
    """Store ``results`` if the trace's cache folder exists; failures are logged, not raised."""
    if entry is None or not (Path(entry) / "manifest.json").is_file():
        return False
    target = entry_file(entry, options)
    try:
        body = dumps(results)
        data = MAGIC + hashlib.sha256(body).digest() + body
        fd, tmp = tempfile.mkstemp(prefix=".tmp-analysis-", dir=entry)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return True
    except (OSError, Unsupported, ValueError, TypeError, OverflowError) as exc:
        log.warning("could not cache the analysis in %s: %s", entry, one_line(str(exc), 200))
        log.debug("analysis cache write", exc_info=True)
        return False


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
