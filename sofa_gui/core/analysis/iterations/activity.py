"""Fallback: iterations from the rhythm of activity when event order does not repeat.

Some traces name their events in ways that never repeat in order (ids that are
not kernel identities, coarse timestamps that scramble order, several devices
merged), yet the device is busy in bursts once per step. The event-rate series
is autocorrelated (FFT, O(n log n)); a strong peak gives the period, the quietest
phase of the folded series gives the cut, and each cut is moved into the
longest idle gap nearby. This is weaker evidence than a repeated event pattern
and is reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_CORRELATION = 0.5  # autocorrelation peak needed to call the rhythm a period
MIN_PERIODS = 3  # at least this many periods in the stream
PRIMITIVE_SLACK = 0.05
MIN_LAG_BINS = 4
MIN_BURSTINESS = 0.3  # event-rate coefficient of variation needed to look for a rhythm
RESOLUTIONS = (256, 1024, 4096, 16384)  # bins tried; jitter blurs fine ones, coarse ones alias


@dataclass
class Rhythm:
    period_ns: float
    correlation: float  # autocorrelation at the period, 0..1
    cuts: np.ndarray  # int64 stream positions where iterations start
    ends: np.ndarray  # int64 stream positions one past each iteration's last event
    left_out: int = 0  # stretches too short or too long to be one period


def _bins(start: np.ndarray, end: np.ndarray, nbins: int) -> tuple[np.ndarray, float, int]:
    t0, t1 = int(start.min()), int(end.max())
    width = max((t1 - t0) / nbins, 1.0)
    # In float: start - t0 in int64 wraps around for stamps far apart (corrupt input).
    idx = np.clip(((start.astype(np.float64) - t0) / width).astype(np.int64), 0, nbins - 1)
    return np.bincount(idx, minlength=nbins).astype(float), width, t0


def _autocorrelation(x: np.ndarray) -> np.ndarray:
    x = x - x.mean()
    n = len(x)
    f = np.fft.rfft(x, 2 * n)
    ac = np.fft.irfft(f * np.conj(f))[:n]
    return ac / ac[0] if ac[0] > 0 else np.zeros(n)


def _period_lag(ac: np.ndarray) -> tuple[int, float] | None:
    """Lag of the primitive period: the shortest peak nearly as high as the highest."""
    n = len(ac)
    hi = n // MIN_PERIODS
    if hi <= MIN_LAG_BINS + 1:
        return None
    seg = ac[: hi + 1]
    peak = np.flatnonzero((seg[1:-1] >= seg[:-2]) & (seg[1:-1] > seg[2:])) + 1
    peak = peak[peak >= MIN_LAG_BINS]
    if len(peak) == 0:
        return None
    top = float(seg[peak].max())
    lag = int(peak[np.flatnonzero(seg[peak] >= top - PRIMITIVE_SLACK)[0]])
    return lag, float(seg[lag])


def find_rhythm(start: np.ndarray, end: np.ndarray) -> Rhythm | None:
    """Iterations of a stream (sorted by start) from its activity rhythm, if strong."""
    n = len(start)
    if n < 4 * MIN_PERIODS:
        return None
    found = []
    for nbins in RESOLUTIONS:
        if nbins > max(RESOLUTIONS[0], n):
            break
        counts, width, t0 = _bins(start, end, nbins)
        if counts.std() < MIN_BURSTINESS * counts.mean():
            continue  # a steady rate at this resolution: binning alone makes "rhythms"
        peak = _period_lag(_autocorrelation(counts))
        if peak is not None and peak[1] >= MIN_CORRELATION:
            found.append((peak[0] * width, peak[1], t0))
    if not found:
        return None
    # jitter lowers the peak at fine resolutions; coarse ones can alias: take the
    # shortest period among the (nearly) strongest
    best = max(f[1] for f in found)
    found = min((f for f in found if f[1] >= best - 0.15), key=lambda f: f[0])
    period, corr, t0 = found
    phase = _quiet_phase(start, t0, period)
    cuts = _walk(start, end, t0 + phase, period)
    cuts = np.unique(cuts[(cuts > 0) & (cuts < n)])
    if len(cuts) < 2:
        return None
    if not _quiet_at(cuts, start, end):
        return None
    ends = np.r_[cuts[1:], n]
    span = np.r_[start[cuts[1:]], end[cuts[-1]:].max()] - start[cuts]
    keep = (span >= 0.8 * period) & (span <= 1.5 * period)
    left_out = int((~keep[:-1]).sum())
    cuts, ends = cuts[keep], ends[keep]
    if len(cuts) < MIN_PERIODS - 1:
        return None
    spacing = np.diff(start[cuts])[ends[:-1] == cuts[1:]]
    if len(spacing):
        period = float(np.median(spacing))  # the walk's own measure beats the bin grid
    return Rhythm(period, corr, cuts.astype(np.int64), ends.astype(np.int64), left_out)


def _quiet_at(cuts: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    """True when the device is clearly idler right before the cuts than usual."""
    busy_until = np.r_[start[0], np.maximum.accumulate(end)[:-1]]
    idle = np.maximum(start - busy_until, 0)
    at_cut = float(np.median(idle[cuts]))
    return at_cut > 0 and at_cut >= 3 * float(np.median(idle))


def _quiet_phase(start: np.ndarray, t0: int, period: float) -> float:
    """Offset within the period where the folded event rate is lowest."""
    folds = 64
    ph = ((start - t0) % period) / period
    hist = np.bincount(np.minimum((ph * folds).astype(np.int64), folds - 1), minlength=folds)
    smooth = hist + np.roll(hist, 1) + np.roll(hist, -1)
    return (int(np.argmin(smooth)) + 0.5) / folds * period


def _walk(start: np.ndarray, end: np.ndarray, first: float, period: float) -> np.ndarray:
    """Cut positions: from ``first``, one period at a time, each moved into the longest
    idle gap within 15% of a period (so a slightly wrong period does not drift)."""
    reach = 0.15 * period
    busy_until = np.r_[start[0], np.maximum.accumulate(end)[:-1]]
    idle = np.maximum(start - busy_until, 0)
    t, stop = first - period, float(end.max())
    if t + period - reach > start[0]:
        t -= period * np.ceil((t + period - reach - start[0]) / period)
    out = []
    while t <= stop:
        lo = int(np.searchsorted(start, np.int64(t - reach)))  # int needles: no array copy
        hi = int(np.searchsorted(start, np.int64(t + reach)))
        if hi > lo:
            k = lo + int(np.argmax(idle[lo:hi]))
            out.append(k)
            t = float(start[k]) + period
        else:
            t += period
    return np.array(out, np.int64)
