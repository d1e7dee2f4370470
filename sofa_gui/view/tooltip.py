"""Hover text for a slice: plain text (the widget escapes it before Qt sees it)."""

from __future__ import annotations

import html

import numpy as np

from ..core.trace import CopyKind, Kind
from ..core.units import fmt_bytes, fmt_ns, format_time, lane_title

#: Arguments shown first when present (the rest follow up to MAX_ARGS).
KEY_ARGS = ("stream", "grid", "block", "registers per thread", "shared memory",
            "Input Dims", "Input type", "bytes", "memory bandwidth (GB/s)",
            "Collective name", "In msg nelems", "Group size", "correlation")
MAX_ARGS = 8
MAX_VALUE = 80
MAX_NAME = 400


def literal_html(text) -> str:
    """``text`` as rich text that Qt shows literally: Qt renders any tooltip that looks like
    HTML (``<lambda>``, ``<b>``...) as HTML, so trace text goes in escaped, inside markup that
    keeps its line breaks. Every tooltip showing trace or user text goes through here."""
    body = html.escape(str(text), quote=True)
    return f"<qt><span style='white-space:pre-wrap'>{body}</span></qt>"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def slice_tooltip(model, index: int) -> str:
    """Name, lane, start (offset from trace start), duration, kind and key args."""
    trace = model.trace
    sl = trace.slices
    lane = int(sl.lane[index])
    group = trace.lanes.group[lane]
    lane_text = lane_title(trace.lanes.name[lane], group)
    kind = Kind(int(sl.kind[index]))
    lines = [
        _clip(trace.name_of(index), MAX_NAME),
        f"lane: {lane_text}",
        f"start: +{format_time(float(sl.start[index] - model.t0), 1.0)}",
        f"duration: {format_time(float(sl.dur[index]))}",
        f"kind: {kind.label}",
    ]
    if kind == Kind.MEMCPY:
        ck = CopyKind(int(sl.copy_kind[index]))
        size = int(sl.bytes[index])
        lines.append(f"copy: {ck.name}" + (f", {fmt_bytes(size)}" if size >= 0 else ""))
    lines += _arg_lines(trace.args.get(int(sl.args[index])))
    return "\n".join(lines)


def _arg_lines(args: dict) -> list[str]:
    if not args:
        return []
    keys = [k for k in KEY_ARGS if k in args]
    keys += [k for k in args if k not in keys]
    out = [f"{_clip(str(k), 40)}: {_clip(str(args[k]), MAX_VALUE)}" for k in keys[:MAX_ARGS]]
    if len(keys) > MAX_ARGS:
        out.append(f"(+{len(keys) - MAX_ARGS} more args)")
    return out


def counter_tooltip(model, lane: int, x: float) -> str:
    """Values of a counter lane's series at ``x`` (ns from trace start); '' if none yet."""
    trace = model.trace
    table = trace.counters.table
    lines = []
    for sid in np.flatnonzero(table.lane == lane).tolist():
        pyr = model.index.counters[sid]
        i = int(np.searchsorted(pyr.t, x, side="right")) - 1
        if i < 0:
            continue
        lines.append(f"{table.name[sid]}: {_value(float(pyr.v[i]), table.unit[sid])}")
    if not lines:
        return ""
    head = trace.lanes.name[lane]
    return "\n".join([head, *lines, f"at: +{format_time(x, 1.0)}"])


def _value(v: float, unit: str) -> str:
    if unit.lower() in ("b", "bytes"):
        return fmt_bytes(int(v)) if v >= 0 else f"{v:.0f} B"
    return f"{v:.6g} {unit}".strip()


def iteration_tooltip(model, i: int) -> str:
    """Number, label, start and duration of iteration ``i``."""
    label = model.iter_labels[i] if i < len(model.iter_labels) else ""
    a, b = model.iter_starts[i], model.iter_ends[i]
    head = f"iteration {i}" + (f" ({label})" if label else "")
    marks = model.iter_marks
    notes = ("warm-up: left out of the steady-state statistics\n" if marks.is_warmup(i) else "")
    if marks.extra_of(i):
        notes += f"periodic extra: {marks.extra_of(i)}\n"
    dev = marks.device_of(i)
    dur = fmt_ns(b - a) + (f" ({dev})" if dev else "")
    return (f"{head}\nstart: +{format_time(a, 1.0)}\nduration: {dur}\n{notes}"
            "click selects, double-click zooms")
