"""Put one file's data (:class:`FileData`) into the builder: lanes, slices, counters.

Lanes are created only now, when the file's metadata events (process/thread
names and sort indexes, usually written last by Kineto) are known:

* CPU lanes, one per (pid, tid), grouped per process: ``rank R · process NAME (pid)``;
* GPU lanes, one per (device, stream), grouped per device: ``rank R · GPU D``,
  with the device's GPU-side annotations on a lane of their own;
* counter lanes: allocator memory per device (Kineto ``[memory]`` events) and
  one per (pid, counter name) for ``C`` events.

Within a rank, lanes are ordered processes first (by ``process_sort_index``,
then pid; threads by ``thread_sort_index``, then tid), then GPUs by device.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np
import pyarrow as pa

from ...builder import TraceBuilder
from ...trace import LaneKind
from ..grouping import group_rows_numpy
from .file_data import FileData, LaneInfo
from .ids import SYNTHETIC_BELOW
from .reader import LAUNCH_CATS
from .values import COUNTER_LIMIT


@dataclass
class PendingFlows:
    """s/t/f endpoints of one file, with builder lane ids, bound after ``finish``."""

    lane: np.ndarray  # int32 builder lane, -1 if that (pid, tid) has no slices
    ts: np.ndarray  # int64 ns
    phase: np.ndarray  # uint8 's' 't' 'f'
    enclosing: np.ndarray  # bool: binds to the enclosing slice (else the next one)
    group: np.ndarray  # int64 flow identity within the trace (file, cat, id)
    launch: np.ndarray  # bool: a Kineto CPU->GPU launch flow
    raw_id: np.ndarray  # int64 flow id as written (-1: not an int); Kineto: correlation id


def _prefix(rank: int) -> str:
    return f"rank {rank} · " if rank >= 0 else ""


class _Namer:
    """Display names, groups and order tuples of one file's lanes."""

    def __init__(self, data: FileData, rank: int):
        self.d = data
        self.rank = rank
        self.ids = data.ids

    def is_text(self, code: int) -> bool:
        return code in self.ids.labels

    def process_group(self, pid: int) -> str:
        label = self.ids.label(pid)
        if self.is_text(pid):
            return f"{_prefix(self.rank)}{label}"
        pname = self.d.process_names.get(pid)
        if pname:
            return f"{_prefix(self.rank)}process {pname} ({label})"
        return f"{_prefix(self.rank)}process {label}"

    def gpu_group(self, device: int) -> str:
        return f"{_prefix(self.rank)}GPU {device}"

    def thread_name(self, pid: int, tid: int) -> str:
        name = self.d.thread_names.get((pid, tid), "").strip()
        if name:
            return name
        return self.ids.label(tid) if self.is_text(tid) else f"thread {tid}"

    def process_order(self, pid: int) -> tuple[float, int]:
        return (self.d.process_sort.get(pid, float(pid)), pid)

    def thread_sort(self, pid: int, tid: int) -> float:
        return self.d.thread_sort.get((pid, tid), float(tid))


def _lane_row(info: LaneInfo, namer: _Namer, gpu_of_pid: dict) -> dict:
    """builder.lane() arguments plus a flat ``order`` tuple for one lane."""
    rank = namer.rank
    if info.klass == "annotation":
        device = gpu_of_pid.get(info.pid, max(namer.ids.number(info.pid), 0))
        return dict(name="GPU annotations", kind=LaneKind.GPU, group=namer.gpu_group(device),
                    rank=rank, device=device, order=(1, device, 0, 0, 0.0, 0, ""))
    if info.klass == "global":
        return dict(name="global instant events", kind=LaneKind.CPU,
                    group=f"{_prefix(rank)}markers", rank=rank, order=(2, 0, 0, 0, 0.0, 0, ""))
    if info.device_slices:
        name = namer.d.thread_names.get((info.pid, info.tid), "").strip()
        return dict(name=name or f"stream {info.stream}", kind=LaneKind.GPU,
                    group=namer.gpu_group(info.device), rank=rank, device=info.device,
                    stream=info.stream,
                    order=(1, info.device, 0, 1, namer.thread_sort(info.pid, info.tid),
                           info.stream, ""))
    text_pid, text_tid = namer.is_text(info.pid), namer.is_text(info.tid)
    return dict(name=namer.thread_name(info.pid, info.tid), kind=LaneKind.CPU,
                group=namer.process_group(info.pid), rank=rank,
                pid=-1 if text_pid else info.pid, tid=-1 if text_tid else info.tid,
                order=(0, *namer.process_order(info.pid), 0,
                       namer.thread_sort(info.pid, info.tid), info.tid, ""))


def _sort_keys(orders: list[tuple], rank: int) -> list[int]:
    pos = sorted(range(len(orders)), key=orders.__getitem__)
    keys = [0] * len(orders)
    base = (max(rank, -1) + 1) << 44
    for p, i in enumerate(pos):
        keys[i] = base + p
    return keys


def commit(data: FileData, builder: TraceBuilder, args: pa.Array, rank: int,
           file_no: int, shift_ns: int = 0) -> PendingFlows:
    """Create the file's lanes, slices, counters and bound flows in ``builder``."""
    namer = _Namer(data, rank)
    gpu_of_pid: dict[int, int] = {}
    for info in data.lanes:
        if info.klass == "thread" and info.device_slices:
            gpu_of_pid.setdefault(info.pid, info.device)
    rows = [_lane_row(info, namer, gpu_of_pid) for info in data.lanes]
    counters = _memory_rows(data, namer) + _c_counter_rows(data, namer, builder)
    keys = _sort_keys([r.pop("order") for r in rows] + [r.pop("order") for r in counters], rank)
    lane_map = np.empty(len(rows), np.int32)
    for i, r in enumerate(rows):
        lane_map[i] = builder.lane(("chrome", file_no, i), sort_key=keys[i], **r)
    chunk_rows = _add_slices(data, builder, args, lane_map, shift_ns)
    _add_counters(builder, counters, keys[len(rows):], rank, file_no, shift_ns)
    _add_bound_flows(data, builder, chunk_rows)
    return _pending(data, lane_map, file_no, shift_ns)


def _add_slices(data: FileData, builder: TraceBuilder, args: pa.Array, lane_map, shift_ns):
    out = []
    for chunk in data.chunks:
        rows = builder.add_slices(
            chunk["start"] + shift_ns if shift_ns else chunk["start"], chunk["dur"],
            lane_map[chunk["lane"]], chunk["name"],
            args=_chunk_args(data, chunk, args),
            kind=chunk["kind"], device=chunk["device"], stream=chunk["stream"],
            bytes=chunk["bytes"], copy_kind=chunk["copy_kind"],
            correlation=chunk["correlation"])
        out.append(int(rows[0]) if len(rows) else 0)
    data.chunks = []
    return out


def _chunk_args(data: FileData, chunk: dict, args: pa.Array):
    """The chunk's args: rows read from the file on demand, or its slice of a spill."""
    span = chunk.get("args_span")
    if span is not None:
        return data.args_source.rows(span, chunk["args_items"], chunk["args_present"])
    return chunk.get("args", args).slice(chunk["args_first"], chunk["n"])


def _add_bound_flows(data: FileData, builder: TraceBuilder, chunk_rows: list[int]) -> None:
    """Flow v2 (``bind_id`` with ``flow_out`` -> ``flow_in``) between X events."""
    if not data.bound_flows:
        return
    outs: dict[int, int] = {}
    ins: dict[int, list[int]] = {}
    for chunk, row, fid, flow_in, flow_out in data.bound_flows:
        r = chunk_rows[chunk] + row
        if flow_out:
            outs.setdefault(fid, r)
        if flow_in:
            ins.setdefault(fid, []).append(r)
    src, dst = [], []
    for fid, start in outs.items():
        for r in ins.get(fid, []):
            if r != start:
                src.append(start)
                dst.append(r)
    if src:
        builder.add_flows(src, dst, kind=1)


def _pending(data: FileData, lane_map: np.ndarray, file_no: int, shift_ns: int) -> PendingFlows:
    if not data.flows:
        z = np.zeros(0, np.int64)
        return PendingFlows(z.astype(np.int32), z, z.astype(np.uint8), z.astype(bool), z,
                            z.astype(bool), z)
    cols = {k: np.concatenate([f[k] for f in data.flows]) for k in data.flows[0]}
    data.flows = []
    local = data.lane_index.lookup(cols["key"])
    lane = np.where(local >= 0, lane_map[np.maximum(local, 0)], -1).astype(np.int32)
    launch_cat = np.array([c.lower() in LAUNCH_CATS for c in data.category_names], bool)
    fid = cols["id"]
    return PendingFlows(lane, cols["ts"] + shift_ns, cols["phase"], cols["enclosing"],
                        _flow_groups(file_no, cols["cat"], fid), launch_cat[cols["cat"]],
                        np.where(fid > SYNTHETIC_BELOW, fid, -1))


def _flow_groups(file_no: int, cat: np.ndarray, fid: np.ndarray) -> np.ndarray:
    """Dense int64 ids of (file, cat, id)."""
    order = np.lexsort((fid, cat))
    c, f = cat[order], fid[order]
    new = np.ones(len(order), bool)
    new[1:] = (c[1:] != c[:-1]) | (f[1:] != f[:-1])
    dense = np.empty(len(order), np.int64)
    dense[order] = np.cumsum(new) - 1
    return dense + (np.int64(file_no) << 40)


# -- counters -------------------------------------------------------------------
#: The largest device number the device column (int16) holds.
DEVICE_MAX = 32767


def _memory_rows(data: FileData, namer: _Namer) -> list[dict]:
    """One counter lane per (process, device) from Kineto ``[memory]`` events."""
    if not data.memory:
        return []
    pid, dev_type, dev_id, ts, total, delta = (np.concatenate(x) for x in zip(*data.memory))
    data.memory = []
    uniq, inv = group_rows_numpy(pid, dev_type, dev_id)
    rows = []
    for g, (p, dt, di) in enumerate(uniq.tolist()):
        m = inv == g
        order = np.argsort(ts[m], kind="stable")
        t, tot, dl = ts[m][order], total[m][order], delta[m][order]
        derived = not np.isfinite(tot).all()
        values = np.cumsum(np.nan_to_num(dl)) if derived else tot
        gpu = dt != 0 and di >= 0
        where = f"GPU {di}" if gpu else "CPU"
        label = f"{where} memory allocated"
        order_t = (1, di, 0, 2, 0.0, 0, "") if gpu else \
            (0, *namer.process_order(p), 1, 0.0, 0, "memory")
        notes = [f"{label}: the trace has only allocation deltas, so the series is their "
                 "running sum from the first event"] if derived else []
        if gpu and di > DEVICE_MAX:  # kept in the lane's name, not as a device number
            notes.append(f"{label}: Device Id {di} is out of range (0-{DEVICE_MAX}); "
                         "kept as text in the lane name")
        rows.append(dict(
            key=("mem", p, dt, di), name=label, device=min(di, DEVICE_MAX) if gpu else -1,
            group=namer.gpu_group(di) if gpu else namer.process_group(p),
            pid=p if not namer.is_text(p) else -1, order=order_t,
            series=[(label, "bytes", t, values.astype(np.float64))],
            note="; ".join(notes) or None))
    return rows


def _c_counter_rows(data: FileData, namer: _Namer, builder: TraceBuilder) -> list[dict]:
    """One counter lane per (pid, name) of ``C`` events, one series per args key."""
    rows = []
    for (pid, name), samples in data.counters.items():
        series: dict[str, tuple[list, list]] = {}
        for ts, raw in samples:
            args = _decode(raw)
            vals = {k: v for k, v in args.items() if _num(v)} if isinstance(args, dict) else {}
            if not vals:
                builder.load_stats.skip("counter event without numeric values")
            for k, v in vals.items():
                s = series.setdefault(k, ([], []))
                s[0].append(ts)
                s[1].append(float(v))
        if not series:
            continue
        out = [(name if len(series) == 1 else f"{name} · {k}", "", np.array(t, np.int64),
                np.array(v, np.float64)) for k, (t, v) in series.items()]
        rows.append(dict(key=("counter", pid, name), name=name or "counter",
                         group=namer.process_group(pid), device=-1,
                         pid=pid if not namer.is_text(pid) else -1,
                         order=(0, *namer.process_order(pid), 1, 1.0, 0, name),
                         series=out, note=None))
    data.counters = {}
    return rows


def _add_counters(builder: TraceBuilder, rows: list[dict], keys: list[int], rank: int,
                  file_no: int, shift_ns: int) -> None:
    for r, sort_key in zip(rows, keys):
        lane = builder.lane(("chrome", file_no) + r["key"], r["name"], LaneKind.COUNTER,
                            r["group"], rank=rank, pid=r["pid"], device=r["device"],
                            sort_key=sort_key)
        for label, unit, t, v in r["series"]:
            builder.add_counter(label, unit, lane, t + shift_ns, v)
        if r["note"] and r["note"] not in builder.load_stats.notes:
            builder.load_stats.notes.append(r["note"])


def _decode(raw):
    if not len(raw):
        return {}
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return {}


def _num(v) -> bool:
    """A plausible counter value: a number within int64's range (so sums stay finite)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < COUNTER_LIMIT
