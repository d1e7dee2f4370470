"""Which op of one run is which op of the other: pairing by normalised name.

Two runs name the same work differently: a kernel's template arguments, a counter in a
name, the DataLoader's iterator class (``_SingleProcessDataLoaderIter`` with
``num_workers=0``, ``_MultiProcessingDataLoaderIter`` with workers). Times are summed
under :func:`pair_key` (the normalised name the statistics group by, with the
DataLoader iterator's class folded), so a renamed op is one row with both names, and
work found on one side only is marked ``new`` or ``removed``.
"""

from __future__ import annotations

import re

from ..names import demangle
from .iterations.symbols import normalize_name

#: PyTorch's DataLoader iterators: one role, a class per worker mode.
_LOADER_ITER = re.compile(r"_\w*DataLoaderIter\b")
#: New / removed rows listed beyond the largest changes (biggest first).
EXTRA_NEW_REMOVED = 5


def pair_key(name: str) -> str:
    return _LOADER_ITER.sub("DataLoaderIter", normalize_name(demangle(name)))


def _group(times: dict[tuple[str, str], float]) -> dict[tuple[str, str], tuple[float, list]]:
    """(kind, pair key) -> (summed time, the raw names, biggest first)."""
    out: dict[tuple[str, str], tuple[float, list]] = {}
    for (kind, name), t in sorted(times.items(), key=lambda kv: -kv[1]):
        total, names = out.get((kind, pair_key(name)), (0.0, []))
        out[(kind, pair_key(name))] = (total + t, [*names, name])
    return out


def paired_changes(before: dict, after: dict, top: int, min_delta: float = 1.0) -> list[dict]:
    """Rows of the largest per-iteration changes (``top`` of them, then up to
    :data:`EXTRA_NEW_REMOVED` new and removed ones each): kind, name (``before → after``
    when the names differ), before / after / delta in the input's unit, status."""
    a, b = _group(before), _group(after)
    rows = []
    for key in set(a) | set(b):
        ta, names_a = a.get(key, (0.0, []))
        tb, names_b = b.get(key, (0.0, []))
        if abs(tb - ta) < min_delta:
            continue
        na, nb = (names_a[0] if names_a else ""), (names_b[0] if names_b else "")
        name = na if na == nb or not nb else nb if not na else f"{na} → {nb}"
        status = "new" if not names_a else "removed" if not names_b else "changed"
        rows.append({"kind": key[0], "name": name, "before": ta, "after": tb,
                     "delta": tb - ta, "status": status})
    rows.sort(key=lambda r: (-abs(r["delta"]), r["kind"], r["name"]))
    shown = rows[:top]
    for status in ("new", "removed"):
        rest = [r for r in rows[top:] if r["status"] == status]
        shown += rest[:EXTRA_NEW_REMOVED]
    return shown
