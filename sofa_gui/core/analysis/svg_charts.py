"""Small self-contained SVG charts for reports (no plotting library needed).

All text that may come from a trace is XML-escaped here; numbers are
formatted by the caller's ``fmt`` function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

import numpy as np

from .palette import color_of, label_of

W, H = 920, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 40
MAX_BAR = 44  # px: a few iterations still look like bars, not a filled area


def _bar(i: int, bw: float) -> tuple[float, float]:
    """x and width of bar ``i`` in slots of ``bw`` px, centred, with a small gap."""
    width = max(min(bw - min(2.0, bw * 0.2), MAX_BAR), 0.5)
    return LEFT + bw * (i + 0.5) - width / 2, width


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    mag = 10 ** np.floor(np.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= v:
            return float(m * mag)
    return float(10 * mag)


def _frame(body: list[str], ymax: float, fmt: Callable[[float], str], n: int,
           title: str, height: int = H) -> str:
    plot_h = height - TOP - BOTTOM
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" '
           f'width="{W}" height="{height}" role="img" aria-label="{escape(title)}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect x="0" y="0" width="{W}" height="{height}" fill="#ffffff"/>']
    for k in range(5):
        v = ymax * k / 4
        y = TOP + plot_h - plot_h * k / 4
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" '
                   f'stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#555">'
                   f'{escape(fmt(v))}</text>')
    out += body
    out.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{W - RIGHT}" y2="{TOP + plot_h}" '
               f'stroke="#888"/>')
    step = max(1, int(np.ceil(n / 20)))
    bw = (W - LEFT - RIGHT) / max(n, 1)
    for i in range(0, n, step):
        x = LEFT + bw * (i + 0.5)
        out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 14}" text-anchor="middle" '
                   f'fill="#555">{i}</text>')
    out.append(f'<text x="{LEFT + (W - LEFT - RIGHT) / 2:.0f}" y="{height - 6}" '
               f'text-anchor="middle" fill="#333">iteration</text>')
    out.append("</svg>")
    return "\n".join(out)


def iteration_bars(durations: Sequence[float], colors: Sequence[str], tips: Sequence[str],
                   fmt: Callable[[float], str], median: float | None = None) -> str:
    """One bar per iteration (height = duration), coloured by its dominant category."""
    n = len(durations)
    ymax = _nice_max(max(durations) if n else 0)
    plot_h = H - TOP - BOTTOM
    bw = (W - LEFT - RIGHT) / max(n, 1)
    body = []
    for i, (d, c, tip) in enumerate(zip(durations, colors, tips)):
        h = plot_h * d / ymax
        x, width = _bar(i, bw)
        body.append(f'<rect x="{x:.2f}" y="{TOP + plot_h - h:.2f}" '
                    f'width="{width:.2f}" height="{h:.2f}" fill="{c}">'
                    f'<title>{escape(tip)}</title></rect>')
    if median is not None and n:
        y = TOP + plot_h - plot_h * median / ymax
        body.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" '
                    f'stroke="#222" stroke-dasharray="5,4"/>')
        label = f"median {fmt(median)}"
        lw = 6.5 * len(label) + 6  # approximate text width at 11 px, for a backdrop
        body.append(f'<rect x="{W - RIGHT - lw:.1f}" y="{y - 16:.1f}" width="{lw:.1f}" '
                    f'height="14" fill="#ffffff" fill-opacity="0.85"/>')
        body.append(f'<text x="{W - RIGHT - 4}" y="{y - 5:.1f}" text-anchor="end" '
                    f'fill="#222">{escape(label)}</text>')
    return _frame(body, ymax, fmt, n, "iteration times")


def stacked_bars(times: np.ndarray, categories: Sequence[str], fmt: Callable[[float], str],
                 title: str) -> str:
    """Per iteration, the categories stacked bottom-up (height = iteration time)."""
    n = len(times)
    totals = times.sum(axis=1) if n else np.zeros(0)
    ymax = _nice_max(float(totals.max()) if n else 0)
    plot_h = H - TOP - BOTTOM
    bw = (W - LEFT - RIGHT) / max(n, 1)
    body = []
    for i in range(n):
        y = TOP + plot_h
        x, width = _bar(i, bw)
        for c, v in zip(categories, times[i].tolist()):
            if v <= 0:
                continue
            h = plot_h * v / ymax
            y -= h
            body.append(f'<rect x="{x:.2f}" y="{y:.2f}" '
                        f'width="{width:.2f}" height="{h:.2f}" '
                        f'fill="{color_of(c)}"><title>iteration {i}: {escape(label_of(c))} '
                        f'{escape(fmt(v))}</title></rect>')
    return _frame(body, ymax, fmt, n, title)


def legend(categories: Sequence[str]) -> str:
    """An HTML legend (colour swatch + name) for the categories."""
    items = [f'<span class="sw" style="background:{color_of(c)}"></span>{escape(label_of(c))}'
             for c in categories]
    return '<div class="legend">' + " ".join(f"<span>{i}</span>" for i in items) + "</div>"
