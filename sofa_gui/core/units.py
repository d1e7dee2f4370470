"""Numbers as text, in one place: durations, bytes, rates, percentages, lane titles.

The timeline, tooltips, panels, CLI text, reports and the recorder all format through
here, so the same number reads the same everywhere. Bytes use decimal units (KB, MB,
GB) like the GB/s rates they are compared with.
"""

from __future__ import annotations

import numpy as np

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


def fmt_ns(ns: float) -> str:
    """A duration with 3 significant digits: ``1.23 s``, ``45.6 ms``, ``789 µs``, ``12 ns``."""
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns:.0f} ns"


def fmt_ns_exact(ns: float) -> str:
    """A duration to the µs (``176.302 ms``), for lists where small differences matter."""
    return format_time(float(ns), 1000.0)


def us(ns) -> float:
    """ns -> µs, rounded to 3 decimals (ns resolution) for JSON output.

    Integer ns are divided exactly (int / int is correctly rounded), so epoch
    stamps (~1.7e18 ns, beyond float64's 2**53) come out as the file's µs.
    """
    if isinstance(ns, (int, np.integer)):
        return round(int(ns) / 1000, 3)
    return round(float(ns) / 1000.0, 3)


def fmt_bytes(n: float) -> str:
    """``1.93 GB``, ``512 KB``, ``12 B``."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_rate(n_bytes: float, ns: float) -> str:
    """Bytes per time as ``12.3 GB/s`` (empty when the time is not positive)."""
    return f"{fmt_bytes(n_bytes * 1e9 / ns)}/s" if ns > 0 else ""


def fmt_pct(fraction: float) -> str:
    """``0.123`` -> ``12.3%``."""
    return f"{100.0 * float(fraction):.1f}%"


def lane_title(name: str, group: str = "") -> str:
    """How a lane is named in text: ``GPU 0 / stream 7`` (just the name without a group)."""
    return f"{group} / {name}" if group else name


_TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9}
ABSOLUTE_PREFIX = "abs:"
RANGE_SYNTAX = ("START:END from the trace start, each with a unit (120ms:250ms; bare numbers "
                "are µs), or abs:START:END on the trace's own clock (µs, as in --json)")


def parse_time(text: str) -> int:
    """``120ms`` / ``1.5 s`` / ``250us`` / ``100000`` (bare: µs) -> int ns, exact for
    epoch-sized µs stamps; ValueError if not a finite time within int64 ns."""
    from decimal import Decimal, InvalidOperation

    t = text.strip()
    num, unit = t, "us"
    for name in sorted(_TIME_UNITS, key=len, reverse=True):
        if t.lower().endswith(name):
            num, unit = t[: -len(name)].strip(), name
            break
    try:
        value = Decimal(num) * Decimal(int(_TIME_UNITS[unit]))
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a time") from None
    if not value.is_finite() or abs(value) >= Decimal(9.2e18):
        raise ValueError(f"{text!r} is not a finite time")
    return int(value.to_integral_value())


def parse_time_range(text: str, start_ns: int, end_ns: int) -> tuple[int, int]:
    """A range the user typed -> (start, end) int64 ns on the trace clock.

    Times count from the trace start (``start_ns``) the way every text output shows
    them, unless the text starts with ``abs:`` (the trace's own clock, as in ``--json``).
    ValueError with one readable line when the text is malformed, empty (END <= START)
    or lies wholly outside ``start_ns .. end_ns``.
    """
    body, origin = text.strip(), start_ns
    if body.lower().startswith(ABSOLUTE_PREFIX):
        body, origin = body[len(ABSOLUTE_PREFIX):], 0
    parts = body.split(":")
    try:
        if len(parts) != 2:
            raise ValueError(text)
        a, b = (origin + parse_time(p) for p in parts)
    except ValueError:
        raise ValueError(f"--range wants {RANGE_SYNTAX}, not {text!r}") from None
    if a >= b:
        raise ValueError(f"--range wants START < END, not {text!r}")
    if b <= start_ns or a >= end_ns:
        raise ValueError(f"--range {text} lies outside the trace, which runs from +0 to "
                         f"+{fmt_ns_exact(end_ns - start_ns)} from its start")
    return int(a), int(b)
