"""What the panels read from a core ``TraceBreakdown``, in display terms.

Keeps every access to the breakdown object in one place: the sides (each device,
each rank's main thread), category labels and colours, the dominant category,
device utilisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.analysis.palette import color_of, label_of
from ..core.analysis.shares import dominant_read_as, verdict_counts
from ..core.units import fmt_ns, fmt_pct


@dataclass
class Side:
    """One breakdown matrix: a device or a rank's main thread."""

    title: str
    kind: str  # "device" | "host"
    categories: tuple[str, ...]
    times: np.ndarray  # (n_windows, n_categories) int64 ns
    bytes: np.ndarray | None  # same shape, device copies/memsets only
    durations: np.ndarray | None = None  # ns per window (rows sum to these)
    clock: str = "host"  # "device": windows cut on the device clock (the device lags)
    copies: object | None = None  # device_side.CopyStats: bytes and own time per direction
    rank: int = -1
    label: str = ""  # the device's or thread's own label (the verdict names the side it reads)

    def copy_figures(self, i: int, category: str) -> tuple[int, int, int] | None:
        """(count, bytes, copy time ns) of the copies behind a ``memcpy_*`` category in
        window ``i`` -- all of them, whatever part of their time is exposed."""
        if self.copies is None or not category.startswith("memcpy_"):
            return None
        from ..core.analysis.device_side import COPY_DIRECTIONS

        direction = category.removeprefix("memcpy_")
        if direction not in COPY_DIRECTIONS:
            return None
        c = COPY_DIRECTIONS.index(direction)
        cp = self.copies
        return int(cp.count[i, c]), int(cp.bytes[i, c]), int(cp.busy[i, c])

    def row(self, i: int) -> np.ndarray:
        return self.times[i]


def sides(bd) -> list[Side]:
    """Every device first (busiest first), then every rank's main thread."""
    out = []
    clock = "device" if getattr(bd, "device_clock", False) else "host"
    for d in getattr(bd, "devices", []):
        out.append(Side(f"Device: {d.label}", "device", tuple(d.categories), d.times, d.bytes,
                        d.ends - d.starts, clock, getattr(d, "copies", None),
                        int(getattr(d, "rank", -1)), d.label))
    for h in getattr(bd, "hosts", []):
        out.append(Side(f"Host: {h.label}", "host", tuple(h.categories), h.times, None,
                        h.ends - h.starts, rank=int(getattr(h, "rank", -1)), label=h.label))
    return out


def median_index(bd) -> int:
    return int(bd.median_iteration) if bd is not None and len(bd) else -1


def dominant_labels(bd, n: int, verdict=None, findings=None) -> tuple[list[str], list[str]]:
    """What takes most of iterations ``0..n-1`` (primary side), as the verdict reads it,
    and a tooltip each: the category the device or thread ran most, or the bound the
    verdict counts that category's time in (:func:`dominant_read_as`); the tooltip names the
    category, its time and the verdict's reading.  One numpy pass."""
    empty = ([""] * n, [""] * n)
    if bd is None or getattr(bd, "whole_trace", False):
        return empty
    t = bd.times()
    if t.ndim != 2 or t.shape[1] == 0:
        return empty
    cats = bd.categories()
    main = bd.device if bd.devices else bd.host
    kind = "device" if bd.devices else "host"
    moved = dominant_read_as(verdict, bd)
    reading = verdict_counts(verdict, findings, main.label, kind, cats, t.sum(axis=0)) \
        if moved else ""
    ran = "device" if kind == "device" else "thread"
    arg = np.argmax(t, axis=1).tolist()
    texts, tips = [], []
    for i, a in enumerate(arg[:n]):
        total = int(t[i].sum())
        if total <= 0:
            texts.append("")
            tips.append("")
            continue
        cat, ns = cats[int(a)], int(t[i, int(a)])
        texts.append(moved.get(cat, label_of(cat)))
        tips.append(f"{label_of(cat)}: {fmt_ns(ns)}, {fmt_pct(ns / total)} of what the "
                    f"{ran} ran in this iteration" + (f". {reading}" if cat in moved else ""))
    pad = n - len(texts)
    return texts + [""] * pad, tips + [""] * pad


def device_utilisation(bd) -> float | None:
    """Busy share of the primary device over the analyzed windows (None: no device)."""
    dev = getattr(bd, "device", None)
    if dev is None:
        return None
    wall = float(np.sum(dev.ends - dev.starts))  # its own windows (device clock when it lags)
    return float(np.sum(dev.busy)) / wall if wall > 0 else 0.0


def color(category: str) -> str:
    return color_of(category)
