"""Steps made of several identical calls, told apart by the lengths of their runs.

The symbol stream merges each run of one name into one symbol, so that a loop of the
same kernel, however long, does not change an iteration's length. A step that makes the
same call several times (a Keras model called eagerly once per batch) then reads as one
occurrence per call. What the step does once may still show in those runs: the tensors a
step function holds are released when it returns, so the run of handle releases after
the step's last call is longer than after the others, and the first call releases none
from an earlier call of the step. When every occurrence has the same merged symbols, the
length of one run alone differs between them, and it repeats in a cycle of several
occurrences, exactly and over at least :data:`MIN_CYCLES` cycles, that cycle is the step:
the pattern is searched again with each run's length part of its symbol.
"""

from __future__ import annotations

import numpy as np

from .symbols import Symbols, reduce_symbols

MIN_CYCLES = 3  # whole cycles of run lengths the occurrences must show


def run_cycle(symbols: Symbols, n_events: int, first_event: np.ndarray,
              lengths: np.ndarray) -> tuple[int, np.ndarray]:
    """(m, where steps start): the shortest cycle of m >= 2 consecutive occurrences in
    which their run lengths repeat, when the occurrences (a partial first or last one
    aside) have the same merged symbols, and the stream positions of the occurrences
    that follow the cycle's heaviest one (most events: the step's last call, after
    which the step releases what it held); (1, none) otherwise."""
    none = (1, np.zeros(0, np.int64))
    a = np.searchsorted(symbols.first, first_event)
    b = a + lengths
    runs = np.diff(np.r_[symbols.first, n_events])
    same = [symbols.seq[x:y].tobytes() for x, y in zip(a, b)]
    keep = np.ones(len(same), bool)
    for edge in (0, len(same) - 1):  # a partial first or last occurrence
        if len(same) > 2 and same.count(same[edge]) == 1:
            keep[edge] = False
    if len({x for x, k in zip(same, keep) if k}) != 1:
        return none
    table = np.array([runs[x:y] for x, y in zip(a[keep], b[keep])])
    if table.ndim != 2 or int((table != table[0]).any(axis=0).sum()) != 1:
        return none  # not one run (the releases) that alone tells the calls apart
    shape = [runs[x:y].tobytes() for x, y in zip(a[keep], b[keep])]
    ids = np.unique(shape, return_inverse=True)[1].ravel()
    events = np.array([runs[x:y].sum() for x, y in zip(a[keep], b[keep])])
    for m in range(2, len(ids) // MIN_CYCLES + 1):
        if not (ids[m:] == ids[:-m]).all():
            continue
        cycle = events[:m]
        if (cycle == cycle.max()).sum() != 1:
            return none
        last = int(np.argmax(cycle))
        return m, first_event[keep][last + 1::m]
    return none


def run_symbols(keys: np.ndarray, labels: list[str]) -> Symbols:
    """Symbols in which a run of one name keeps its length (``"name x4"``)."""
    keys = np.asarray(keys, np.int64)
    if len(keys) == 0:
        return reduce_symbols(keys, labels)
    new = np.r_[True, keys[1:] != keys[:-1]]
    run = np.cumsum(new) - 1
    length = np.bincount(run)[run]
    pairs, inverse = np.unique(np.column_stack([keys, length]), axis=0, return_inverse=True)
    names = [f"{labels[int(k)]} x{int(n)}" for k, n in pairs]
    return reduce_symbols(inverse.ravel(), names)
