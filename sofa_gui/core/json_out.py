"""Writing a result document as JSON, fast at any size and never with NaN.

``json.dump(doc, f, indent=1)`` runs Python's pure-Python encoder (the C one serves only
compact output): a 60 MB result took 11 s. Here the C encoder writes the compact text and
msgspec re-indents it, byte for byte what ``json.dump(..., indent=1)`` writes (ASCII,
``\\uXXXX`` escapes), in a fraction of the time. Values that are not finite numbers (NaN,
inf from a hostile trace or metadata) become ``null``: the output is always strict JSON.
"""

from __future__ import annotations

import json
import math
from typing import IO

_ENCODE = json.JSONEncoder(allow_nan=False).encode


def dumps(doc) -> bytes:
    """``doc`` as indented (1 space) ASCII JSON bytes, non-finite floats as ``null``."""
    try:
        text = _ENCODE(doc)
    except ValueError:  # a NaN or inf somewhere: write it as null
        doc = finite(doc)
        text = _ENCODE(doc)
    import msgspec

    try:
        return msgspec.json.format(text.encode("ascii"), indent=1)
    except msgspec.DecodeError:  # a lone surrogate escape msgspec does not parse
        return json.dumps(doc, indent=1).encode("ascii")


def write(doc, out: IO[str]) -> None:
    """:func:`dumps` ``doc`` to the text stream ``out`` (its binary buffer when it has
    one), then a newline."""
    data = dumps(doc) + b"\n"
    buf = getattr(out, "buffer", None)
    if buf is None:
        out.write(data.decode("ascii"))
        return
    out.flush()
    buf.write(data)
    buf.flush()


def finite(value):
    """A copy of ``value`` (dicts, lists, tuples) with NaN / inf floats as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
