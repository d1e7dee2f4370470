"""The heat map's colour scale: diverging around the median, so a small spread looks
small.

A cell's position on the scale is its deviation from the median of all cells, divided
by the scale's half-width: the largest deviation, but never less than
:data:`MIN_SPREAD` of the median. Ranks within 4 % of each other then stay pale
instead of spanning cold to hot, as a min-to-max scale would paint them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The scale reaches full colour no closer than this fraction of the median.
MIN_SPREAD = 0.10


@dataclass(frozen=True)
class DivergingScale:
    centre: float  # the median of the finite values
    half: float  # deviation that reaches full colour (> 0)

    def position(self, values) -> np.ndarray:
        """-1 (fastest end) .. 0 (median) .. +1 (slowest end); NaN stays NaN."""
        v = np.asarray(values, np.float64)
        return np.clip((v - self.centre) / self.half, -1.0, 1.0)

    def relative_half(self) -> float | None:
        """The half-width as a fraction of the centre (None for a zero centre)."""
        return self.half / abs(self.centre) if self.centre else None


def diverging_scale(values, min_spread: float = MIN_SPREAD) -> DivergingScale:
    """The scale for ``values`` (NaN ignored); a scale around 0 when none is finite."""
    v = np.asarray(values, np.float64)
    finite = v[np.isfinite(v)]
    if not len(finite):
        return DivergingScale(0.0, 1.0)
    centre = float(np.median(finite))
    widest = float(np.max(np.abs(finite - centre)))
    half = max(widest, min_spread * abs(centre))
    return DivergingScale(centre, half if half > 0 else 1.0)
