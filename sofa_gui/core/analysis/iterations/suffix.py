"""Suffix array and LCP over integer symbols (never over characters).

libdivsufsort (via pydivsufsort) sorts bytes; integer arrays are sorted as
big-endian fixed-width words, so ids are remapped to dense values first to keep
the width at 1 or 2 bytes. Construction is O(n log n) at worst; LCP (Kasai) is O(n).
"""

from __future__ import annotations

import numpy as np
import pydivsufsort


def dense_ids(seq: np.ndarray) -> np.ndarray:
    """Symbols (non-negative ints) remapped to 0..k-1 in the narrowest unsigned dtype."""
    seq = np.asarray(seq)
    if len(seq) == 0:
        return np.zeros(0, np.uint8)
    if int(seq.max()) < 256:
        return seq.astype(np.uint8)
    present = np.bincount(seq) > 0
    remap = np.cumsum(present) - 1
    k = int(present.sum())
    dtype = np.uint8 if k <= 256 else np.uint16 if k <= 65536 else np.uint32
    return remap[seq].astype(dtype)


def suffix_array(dense: np.ndarray) -> np.ndarray:
    """Start positions of the suffixes of ``dense`` (from :func:`dense_ids`) in order."""
    if len(dense) == 0:
        return np.zeros(0, np.int64)
    return np.asarray(pydivsufsort.divsufsort(dense)).astype(np.int64, copy=False)


def lcp_array(dense: np.ndarray, sa: np.ndarray) -> np.ndarray:
    """``lcp[i]`` = common prefix length of suffixes ``sa[i]`` and ``sa[i+1]`` (last: 0)."""
    if len(dense) == 0:
        return np.zeros(0, np.int64)
    sa32 = sa.astype(np.int32) if len(sa) < 2**31 else sa
    return np.asarray(pydivsufsort.kasai(dense, sa32)).astype(np.int64, copy=False)


def context_classes(seq: np.ndarray, min_len: int) -> np.ndarray:
    """Class id per position: equal ids <=> the next ``min_len`` symbols are equal.

    The classes are the suffix-array intervals whose LCP is >= ``min_len``;
    positions whose context occurs only once get -1.
    """
    n = len(seq)
    if n == 0:
        return np.zeros(0, np.int64)
    dense = dense_ids(seq)
    sa = suffix_array(dense)
    lcp = lcp_array(dense, sa)
    new_group = np.ones(n, bool)
    new_group[1:] = lcp[:-1] < min_len
    group = np.cumsum(new_group) - 1
    size = np.bincount(group)
    cls = np.empty(n, np.int64)
    cls[sa] = np.where(size[group] > 1, group, -1)
    return cls
