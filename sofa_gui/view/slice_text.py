"""A slice in words, for the clipboard (the slice context menu's Copy Details)."""

from __future__ import annotations

import numpy as np

from ..core.names import demangle
from ..core.trace import CopyKind, Kind, Trace
from ..core.units import fmt_bytes, fmt_ns


def slice_details(trace: Trace, i: int) -> str:
    """Name, kind, lane, start, duration, device and args of slice ``i``, one per line."""
    s = trace.slices
    kind = int(s.kind[i])
    lane = trace.lanes
    lane_k = int(s.lane[i])
    try:
        kind_text = Kind(kind).label
    except ValueError:
        kind_text = str(kind)
    lines = [
        f"Name: {demangle(trace.full_name(i))}",
        f"Kind: {kind_text}",
        f"Lane: {lane.group[lane_k]} / {lane.name[lane_k]}",
        f"Start: {(int(s.start[i]) - trace.start_ns) / 1e6:,.3f} ms from the trace start",
        f"Duration: {fmt_ns(int(s.dur[i]))}",
    ]
    if int(s.device[i]) >= 0:
        lines.append(f"Device: {int(s.device[i])}, stream {int(s.stream[i])}")
    if int(s.copy_kind[i]):
        lines.append(f"Copy: {CopyKind(int(s.copy_kind[i])).name}")
    if int(s.bytes[i]) > 0:
        lines.append(f"Bytes: {fmt_bytes(int(s.bytes[i]))}")
    if int(s.correlation[i]) >= 0:
        lines.append(f"Correlation: {int(s.correlation[i])}")
    for key, value in trace.args.get(int(s.args[i])).items():
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def same_name(trace: Trace, i: int) -> np.ndarray:
    """Slice indexes with the name of slice ``i`` (itself included), in start order."""
    names = trace.slices.name
    return np.flatnonzero(names == names[i]).astype(np.int64)


def flow_partners(trace: Trace, i: int) -> list[int]:
    """Slices linked to ``i`` by a flow arrow: where it came from, then where it goes."""
    f = trace.flows
    if not len(f):
        return []
    return [int(j) for j in f.src[f.dst == i]] + [int(j) for j in f.dst[f.src == i]]
