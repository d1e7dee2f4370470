"""Units in text: durations (ns / µs / ms / s) for every view of a trace.

One place, so the timeline axis, tooltips, panels, CLI and report say the same
thing for the same number.
"""

from __future__ import annotations

_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def unit_for(ns: float) -> tuple[float, str]:
    """Largest unit in which ``ns`` is at least 1 (ns below that)."""
    a = abs(ns)
    for scale, name in _UNITS:
        if a >= scale:
            return scale, name
    return 1.0, "ns"


def decimals_for(step: float) -> int:
    """Fewest decimals (<= 9) that show multiples of ``step`` exactly."""
    for d in range(10):
        scaled = step * 10**d
        if round(scaled) >= 1 and abs(scaled - round(scaled)) < 1e-6 * scaled:
            return d
    return 9


def format_time(ns: float, resolution: float | None = None) -> str:
    """``ns`` as ``1.25 ms``; ``resolution`` (ns) sets the decimals (else 4 significant)."""
    scale, name = unit_for(ns)
    if resolution is None:
        text = f"{ns / scale:.4g}"
    else:
        text = f"{ns / scale:.{decimals_for(max(resolution, 1.0) / scale)}f}"
    return f"{text} {name}"
