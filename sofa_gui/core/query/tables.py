"""The trace's columns as Arrow tables for the SQL engine, sharing the trace's memory.

Numeric columns are Arrow arrays over the trace's numpy arrays (for a cached trace:
over the memory-mapped cache files), names and kinds are dictionary arrays whose
indices are the trace's own ``name`` / ``kind`` columns, so nothing per event is
copied or decoded here. The engine reads these "raw" tables (times in ns); the
documented tables are views over them (see :mod:`.db`). Derived per-slice columns
(parent, iteration, rank) are the only per-event arrays computed.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import arrowbuf
from ..analysis.self_time import parents
from ..trace import CopyKind, Kind, LaneKind, Trace

KIND_LABELS = [k.label for k in Kind]
LANE_KIND_LABELS = [k.label for k in LaneKind]
COPY_LABELS = [k.name.lower() for k in CopyKind]  # "none" is shown as NULL


def _dictionary(codes: np.ndarray, labels: list[str]) -> pa.DictionaryArray:
    """Labels by code, the codes array shared (Arrow wants signed integer indices)."""
    return pa.DictionaryArray.from_arrays(arrowbuf.from_numpy(codes), arrowbuf.strings(labels))


def _masked(values: np.ndarray, null: np.ndarray) -> pa.Array:
    """``values`` with ``null`` rows as SQL NULL (one bitmap built, the values shared)."""
    arr = arrowbuf.from_numpy(values)
    if not null.any():
        return arr
    valid = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(arr.type, len(arr), [valid, arr.buffers()[1]])


def slice_iterations(trace: Trace, iterations) -> np.ndarray:
    """Per slice, the index of the iteration it starts in, -1 outside every iteration."""
    start = trace.slices.start
    if iterations is None or not len(iterations):
        return np.full(len(start), -1, np.int32)
    k = np.searchsorted(iterations.starts, start, side="right") - 1
    inside = (k >= 0) & (start < iterations.ends[np.maximum(k, 0)])
    return np.where(inside, k, -1).astype(np.int32)


def raw_slices(trace: Trace, iterations=None) -> pa.Table:
    """``slices`` with ns times and the derived columns (see :data:`.schema.TABLES`)."""
    s = trace.slices
    names = trace.names
    parent = parents(trace)
    it = slice_iterations(trace, iterations)
    rank = np.asarray(trace.lanes.rank, np.int32)[s.lane] if len(s) else np.zeros(0, np.int32)
    copy = s.copy_kind.astype(np.int8, copy=False)
    cols = {
        "id": np.arange(len(s), dtype=np.int64), "lane": s.lane,
        "name": _dictionary(s.name.astype(np.int32, copy=False), names),
        "kind": _dictionary(s.kind.astype(np.int8, copy=False), KIND_LABELS),
        "start": s.start, "dur": s.dur, "depth": s.depth,
        "parent": _masked(parent, parent < 0), "iteration": _masked(it, it < 0),
        "rank": rank, "device": s.device, "stream": s.stream,
        "bytes": _masked(s.bytes, s.bytes < 0),
        "copy_kind": pa.DictionaryArray.from_arrays(
            _masked(copy, copy == int(CopyKind.NONE)), arrowbuf.strings(COPY_LABELS)),
        "correlation": _masked(s.correlation, s.correlation < 0),
        "args_row": s.args,
    }
    return arrowbuf.table(cols)


def lanes_table(trace: Trace) -> pa.Table:
    ln = trace.lanes
    return arrowbuf.table({
        "id": np.arange(len(ln), dtype=np.int32), "name": arrowbuf.strings(ln.name),
        "kind": _dictionary(np.asarray(ln.kind, np.int8), LANE_KIND_LABELS),
        "rank": np.asarray(ln.rank, np.int32), "device": ln.device, "stream": ln.stream,
        "process": ln.pid, "thread": ln.tid, "group_name": arrowbuf.strings(ln.group)})


def raw_iterations(iterations) -> pa.Table:
    n = 0 if iterations is None else len(iterations)
    if not n:
        z = np.zeros(0, np.int64)
        return arrowbuf.table({"index": np.zeros(0, np.int32), "label": arrowbuf.strings([]),
                               "start": z, "end": z, "warmup": np.zeros(0, np.int8)})
    labels = list(iterations.labels or [])
    labels = [str(x) if x else None for x in labels[:n]] + [None] * (n - len(labels))
    warm = iterations.warmup if iterations.warmup is not None else np.zeros(n, bool)
    return pa.Table.from_arrays(
        [arrowbuf.from_numpy(np.arange(n, dtype=np.int32)), pa.array(labels, pa.string()),
         arrowbuf.from_numpy(np.asarray(iterations.starts, np.int64)),
         arrowbuf.from_numpy(np.asarray(iterations.ends, np.int64)),
         pa.array(np.asarray(warm, bool).tolist(), pa.bool_())],
        names=["index", "label", "start", "end", "warmup"])


def flows_table(trace: Trace) -> pa.Table:
    f = trace.flows
    return arrowbuf.table({"from_slice": f.src, "to_slice": f.dst,
                           "kind": _dictionary((f.kind != 0).astype(np.int8),
                                               ["launch", "other"])})


def raw_counters(trace: Trace) -> pa.Table:
    c = trace.counters
    series = c.series.astype(np.int32, copy=False)
    lanes = np.asarray(c.table.lane, np.int32)
    return arrowbuf.table({
        "lane": lanes[series] if len(series) else np.zeros(0, np.int32),
        "name": _dictionary(series, list(c.table.name)),
        "unit": _dictionary(series, list(c.table.unit)),
        "ts": c.time, "value": c.value})


def evidence_rank(trace: Trace, finding) -> int:
    """The one rank a finding's first evidence with lanes is on (-1: several / unknown)."""
    for ev in finding.evidence:
        ranks = {int(trace.lanes.rank[ln]) for ln in ev.lanes if 0 <= ln < len(trace.lanes)}
        ranks.discard(-1)
        if len(ranks) == 1:
            return ranks.pop()
    return -1


def findings_table(trace: Trace, findings) -> pa.Table:
    findings = list(findings or [])
    return pa.table({
        "rank": pa.array([evidence_rank(trace, f) for f in findings], pa.int32()),
        "id": pa.array([f.id for f in findings], pa.string()),
        "title": pa.array([f.title for f in findings], pa.string()),
        "share": pa.array([float(f.share) for f in findings], pa.float64()),
        "covers": pa.array([None if f.covers is None else float(f.covers) for f in findings],
                           pa.float64()),
        "speedup": pa.array([None if f.estimated_speedup is None else
                             float(f.estimated_speedup) for f in findings], pa.float64()),
        "speedup_is_lower_bound": pa.array([bool(f.estimate_floor) for f in findings],
                                           pa.bool_()),
        "confidence": pa.array([float(f.confidence) for f in findings], pa.float64())})
