"""Equal-context classes over integer symbols (never over characters).

:func:`context_groups` groups positions whose next ``min_len`` symbols are
equal. It hashes each context (64-bit, by doubling: log2(min_len) vector
passes) and sorts (hash bits, position) in one int64 key; runs where different
full hashes share the shortened key are re-ordered by the full hash. Two
different contexts share a full 64-bit hash with probability about u^2 / 2^65
(u distinct contexts: ~3e-8 at u = 1e6), the only way a class can be wrong.

:func:`exact_context_classes` is the exact suffix-array grouping (libdivsufsort
via pydivsufsort sorts bytes; integer ids are remapped to dense values and
sorted as big-endian 1- or 2-byte words; LCP by Kasai). It was the production
path until it cost ~0.5 s CPU at 1e6 symbols with a 2-byte alphabet (the library
sorts 2n bytes) against ~0.15 s hashed; the tests hold the two equal.
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

    Positions whose context occurs only once (or that have fewer than
    ``min_len`` symbols left) get -1.
    """
    return context_groups(seq, min_len)[0]


def context_groups(seq: np.ndarray, min_len: int,
                   every: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(class of positions 0, every, 2*every..., sorted ``class * (n + 1) + position``
    of all classed positions).

    Class ids are numbered in key order, so the second array needs no extra sort.
    Classes of sampled positions only (``every`` > 1) skip a random scatter over
    all n positions (~1 s at 1e7).
    """
    seq = np.asarray(seq)
    n = len(seq)
    if n == 0 or min_len < 1 or n < min_len:
        return np.full(-(-n // every), -1, np.int64), np.zeros(0, np.int64)
    full = context_hashes(seq, min_len)
    m = len(full)
    pos_bits = max(1, int(m - 1).bit_length())
    short = (full >> np.uint64(pos_bits + 1)).astype(np.int64)  # 63 - pos_bits bits, >= 0
    key = np.sort((short << pos_bits) | np.arange(m, dtype=np.int64))
    pos = key & ((1 << pos_bits) - 1)
    same = np.r_[False, (key[1:] >> pos_bits) == (key[:-1] >> pos_bits)]
    if _short_key_clash(full, pos_bits + 1):  # different contexts share a short key:
        fp = full[pos]  # order those runs by the full hash (a random gather: only then)
        clash = same[1:] & (fp[1:] != fp[:-1])
        run = np.cumsum(~same) - 1
        rows = np.flatnonzero(np.isin(run, run[1:][clash]))
        order = rows[np.lexsort((pos[rows], fp[rows], run[rows]))]
        pos[rows], fp[rows] = pos[order], fp[order]
        same[1:] &= fp[1:] == fp[:-1]
    group = np.cumsum(~same) - 1
    size = np.bincount(group)
    keep = size[group] > 1
    g = (np.cumsum(size > 1) - 1)[group[keep]]  # repeated groups renumbered 0..k-1
    p = pos[keep]
    cls = np.full(-(-n // every), -1, np.int64)
    at = p % every == 0 if every > 1 else slice(None)
    cls[p[at] // every] = g[at]
    return cls, g * (n + 1) + p


def _short_key_clash(full: np.ndarray, dropped: int) -> bool:
    """Whether two different hashes agree once their low ``dropped`` bits are gone
    (a sequential pass over the sorted hashes, no gather by position)."""
    h = np.sort(full)
    return bool(np.any((h[1:] != h[:-1]) & ((h[1:] >> np.uint64(dropped))
                                             == (h[:-1] >> np.uint64(dropped)))))


_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a bijective, non-linear scramble of 64-bit words."""
    x = x ^ (x >> np.uint64(30))  # a fresh array: the in-place steps below stay private
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    return x


def context_hashes(seq: np.ndarray, length: int) -> np.ndarray:
    """64-bit hash of the ``length`` symbols from each position (``n - length + 1`` of
    them): hashes of power-of-two windows by doubling, then two overlapping windows
    that cover exactly ``length`` symbols. Equal contexts always hash equal."""
    h = _mix(np.asarray(seq).astype(np.uint64) + _GOLDEN)
    width = 1
    while 2 * width <= length:
        x = h[:-width] * _GOLDEN
        x += h[width:]
        x += np.uint64(width)
        h = _mix(x)
        width *= 2
    if width < length:  # windows at i and i + length - width overlap and cover the context
        off = length - width
        x = h[:-off] * _GOLDEN
        x += h[off:]
        x += np.uint64(length)
        h = _mix(x)
    return h


def exact_context_classes(seq: np.ndarray, min_len: int) -> np.ndarray:
    """:func:`context_classes` from the suffix array: the intervals whose LCP is
    >= ``min_len``. Exact and slower; the reference the hashed grouping is tested
    against."""
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
