"""Numbers and times out of decoded Chrome events, a column at a time.

``ts``/``dur`` are µs floats in the file; they become int64 ns without losing the ns
digit of large stamps (:func:`exact_ns` re-reads the written text when a piece needs
it). Ids, counts and byte counts that are not plain numbers of a sane size become a
default (or NaN) instead of an error, so one odd value costs one value, not the file.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

import numpy as np

TS_LIMIT = 9.2e15  # µs; beyond this ns do not fit in int64
COUNTER_LIMIT = 2.0 ** 63  # counter values beyond int64's range are corrupt, not data
EXACT_ABOVE = 4.0e12  # µs; above this float64 may miss the ns digit of a fractional ts


def phases(evs: list) -> np.ndarray:
    phs = [e.ph for e in evs]
    joined = "".join(phs)
    if len(joined) == len(phs) and joined.isascii():
        return np.frombuffer(joined.encode("ascii"), np.uint8)
    return np.fromiter((ord(p) if len(p) == 1 and ord(p) < 128 else 0 for p in phs),
                       np.uint8, len(phs))


def int_or(values: list, default: int) -> np.ndarray:
    """Integer values as int64; None, text, fractions and huge values -> ``default``."""
    n = len(values)
    try:
        f = np.fromiter(values, np.float64, n)  # None -> nan
    except (ValueError, TypeError, OverflowError):
        return np.fromiter((v if v.__class__ is int and -(1 << 62) < v < (1 << 62) else default
                            for v in values), np.int64, n)
    ok = np.isfinite(f) & (np.abs(f) < 2.0 ** 62)
    ok[ok] &= f[ok] == np.rint(f[ok])
    out = np.full(n, default, np.int64)
    out[ok] = f[ok].astype(np.int64)
    if ok.any() and np.abs(f[ok]).max() >= 2.0 ** 53:  # beyond float precision: redo exactly
        big = np.flatnonzero(ok & (np.abs(f) >= 2.0 ** 53))
        out[big] = [values[i] if values[i].__class__ is int else default for i in big.tolist()]
    return out


def has_fraction(ts: np.ndarray) -> bool:
    """Whether these µs stamps were written with decimals.

    Below 2**52 µs (the year 2112) a written fraction almost never rounds to a
    whole float; one per piece is enough to switch the piece to exact parsing.
    """
    return bool((ts != np.floor(ts)).any())


_PLAIN_NUMBERS = {float, int, type(None)}


def float_or_nan(values: list) -> np.ndarray:
    """Numbers within int64's range as float64 (byte counts); anything else -> NaN."""
    try:
        if not set(map(type, values)) <= _PLAIN_NUMBERS:  # bools and numeric text are not
            raise TypeError
        out = np.fromiter(values, np.float64, len(values))
    except (ValueError, TypeError, OverflowError):
        out = np.array([_as_float(v) for v in values], np.float64)
    return np.where(np.abs(out) < COUNTER_LIMIT, out, np.nan)


def _as_float(v) -> float:
    try:
        return float(v) if is_number(v) else np.nan
    except OverflowError:  # an int beyond float's range
        return np.nan


def ns_exact(v) -> int | None:
    """A ``ts`` as written in the file (int or decimal text, in µs) -> int ns."""
    if isinstance(v, int):
        return v * 1000
    if not isinstance(v, str):
        return None
    try:
        return int((Decimal(v) * 1000).to_integral_value())
    except (InvalidOperation, ValueError, OverflowError):
        return None


_NEAR = 2.0 ** 52  # µs; below this a float ts is within 250 ns of the written value


def exact_ns(approx: np.ndarray, ts: np.ndarray, written: list) -> np.ndarray:
    """ns exactly as written (``written``: the text of each ts, see exact_ts_strings).

    The float is within 250 ns of the written value below 2**52 µs, so the last
    three decimals fix it: vectorised for the usual ``123.456`` form, one by
    one (exact decimal arithmetic) for anything else.
    """
    out = approx.copy()
    blob = np.frombuffer(("\n".join(map(str, written)) + "\n").encode("ascii", "replace"),
                         np.uint8)
    ends = np.flatnonzero(blob == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    tail = blob[np.maximum(ends - 4, 0)[:, None] + np.arange(4)]  # ".ddd" before each end
    digits = tail[:, 1:].astype(np.int64) - 48
    usual = ((ends - starts >= 5) & (tail[:, 0] == 46) & (blob[starts] != 45)
             & ((digits >= 0) & (digits <= 9)).all(axis=1) & (np.abs(ts) < _NEAR))
    frac = digits @ np.array([100, 10, 1])
    delta = (frac - approx) % 1000
    out[usual] = approx[usual] + np.where(delta >= 500, delta - 1000, delta)[usual]
    marks = (blob == 46) | (blob == 101) | (blob == 69)  # '.', 'e', 'E': not a plain int
    other = ~usual & (np.add.reduceat(marks, starts) > 0)
    for i in np.flatnonzero(other).tolist():
        v = ns_exact(written[i])
        if v is not None:
            out[i] = v
    return out


def to_ns(us: np.ndarray) -> np.ndarray:
    """µs floats -> int64 ns with integer arithmetic for the whole part (no 2**53 loss)."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
