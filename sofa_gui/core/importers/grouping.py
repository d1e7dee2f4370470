"""Dense group ids for rows keyed by several integer columns (lanes per thread, stream, link).

Hash factorization (pandas) instead of ``np.unique(axis=0)``: a million rows
group in tens of milliseconds, and groups come out in sorted key order so that
lanes created from them appear sorted.
"""

from __future__ import annotations

import numpy as np


def group_rows(*cols) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys as an (g, k) int64 array in sorted order, group id per row)."""
    import pandas as pd  # here: only the SOFA/Nsight importers need it (import costs ~0.4 s)

    n = len(cols[0])
    key = np.zeros(n, np.int64)
    for col in cols:
        codes, uniq = pd.factorize(np.asarray(col, np.int64), sort=True)
        key = key * len(uniq) + codes
    if len(cols) > 1:
        key, _ = pd.factorize(key, sort=True)
    key = np.asarray(key, np.int64)
    first = np.full(int(key.max()) + 1 if n else 0, n, np.int64)
    np.minimum.at(first, key, np.arange(n, dtype=np.int64))
    reps = np.stack([np.asarray(c, np.int64)[first] for c in cols], axis=1)
    return reps, key


def group_rows_numpy(*cols) -> tuple[np.ndarray, np.ndarray]:
    """:func:`group_rows` by sorting (no pandas import), for a few hundred thousand rows.

    Each column is made dense first, so the combined key is one small int64
    (``np.unique(axis=0)`` on the stacked columns is about 50x slower).
    """
    n = len(cols[0])
    key = np.zeros(n, np.int64)
    for col in cols:
        uniq, codes = np.unique(np.asarray(col, np.int64), return_inverse=True)
        if n and int(key.max()) >= (1 << 62) // max(len(uniq), 1):  # keep the product in int64
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
        key = key * len(uniq) + codes.reshape(-1)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    reps = np.stack([np.asarray(c, np.int64)[first] for c in cols], axis=1) if n else \
        np.zeros((0, len(cols)), np.int64)
    return reps, inv.reshape(-1).astype(np.int64)


def lane_ids(builder, cols: list, make) -> np.ndarray:
    """Lane id per row; ``make(*key)`` returns the :meth:`TraceBuilder.lane` kwargs of a key."""
    if len(cols[0]) == 0:
        return np.zeros(0, np.int32)
    reps, key = group_rows(*cols)
    ids = np.array([builder.lane(**make(*row)) for row in reps.tolist()], np.int32)
    return ids[key]
