"""One Chrome/Kineto JSON file -> slice columns, lanes, counters and flow endpoints.

Each decoded piece (see :mod:`.decode`) is turned into numpy columns in a
few vectorised passes; only the rare phases (B/E, C, M) and malformed values
are handled per event in Python. Slices keep *local* lane ids here; lanes are
named and created in the builder by :mod:`.lanes` once the whole file
(including metadata events, which Kineto writes last) has been read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ...progress import Progress
from ...trace import DEVICE_KINDS, Kind, LoadStats
from ..args_spill import ArgsSpill
from ..source_args import SourceFile
from .decode import EventStream, Piece, exact_ts_strings
from .ids import (
    ANN_TID,
    GLOBAL_PID,
    SYNTHETIC_BELOW,
    CategoryTable,
    IdCodes,
    NameTable,
    pack,
)

X, B, E, I1, I2, C, M = (ord(c) for c in "XBEiICM")
FLOW_S, FLOW_T, FLOW_F = (ord(c) for c in "stf")
_KNOWN = np.zeros(256, bool)
_KNOWN[[X, B, E, I1, I2, C, M, FLOW_S, FLOW_T, FLOW_F]] = True

TS_LIMIT = 9.2e15  # µs; beyond this ns do not fit in int64
COUNTER_LIMIT = 2.0 ** 63  # counter values beyond int64's range are corrupt, not data
EXACT_ABOVE = 4.0e12  # µs; above this float64 may miss the ns digit of a fractional ts
LAUNCH_CATS = {"ac2g", "async_cpu_to_gpu", "async"}
_DEV_OR_RUNTIME = np.zeros(256, bool)  # by Kind value: events whose args are read
_DEV_OR_RUNTIME[[int(k) for k in (*DEVICE_KINDS, Kind.SYNC, Kind.RUNTIME)]] = True
_COPIES = np.zeros(256, bool)
_COPIES[[int(Kind.MEMCPY), int(Kind.MEMSET)]] = True
_ANN_CATS = {"gpu_user_annotation"}
_MEMORY_NAME = "[memory]"


class _RuntimeArgs(msgspec.Struct, gc=False):
    """Strict args: plain ints or absent (-1), so columns convert in one C pass."""

    correlation: int = -1
    correlation_id: int = msgspec.field(default=-1, name="correlation id")


class _DeviceArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    correlation_id: int = msgspec.field(default=-1, name="correlation id")
    device: int = -1
    stream: int = -1
    nbytes: int = msgspec.field(default=-1, name="bytes")
    nbytes2: int = msgspec.field(default=-1, name="Bytes")


class _LooseRuntimeArgs(msgspec.Struct, gc=False):
    correlation: Any = None
    correlation_id: Any = msgspec.field(default=None, name="correlation id")


class _LooseDeviceArgs(msgspec.Struct, gc=False):
    correlation: Any = None
    correlation_id: Any = msgspec.field(default=None, name="correlation id")
    device: Any = None
    stream: Any = None
    nbytes: Any = msgspec.field(default=None, name="bytes")
    nbytes2: Any = msgspec.field(default=None, name="Bytes")


class _MemArgs(msgspec.Struct, gc=False):
    dev_type: Any = msgspec.field(default=None, name="Device Type")
    dev_id: Any = msgspec.field(default=None, name="Device Id")
    delta: Any = msgspec.field(default=None, name="Bytes")
    total: Any = msgspec.field(default=None, name="Total Allocated")


def _decoders(strict, loose) -> tuple:
    return (msgspec.json.Decoder(list[strict]), msgspec.json.Decoder(strict),
            msgspec.json.Decoder(list[loose]), msgspec.json.Decoder(loose))


_RUNTIME_ARGS = _decoders(_RuntimeArgs, _LooseRuntimeArgs)
_DEVICE_ARGS = _decoders(_DeviceArgs, _LooseDeviceArgs)
_MEM_ARGS = _decoders(_MemArgs, _MemArgs)
_A_CORR, _A_CORR2 = attrgetter("correlation"), attrgetter("correlation_id")
_A_DEVICE, _A_STREAM = attrgetter("device"), attrgetter("stream")
_A_BYTES, _A_BYTES2 = attrgetter("nbytes"), attrgetter("nbytes2")
_A_TOTAL, _A_DELTA = attrgetter("total"), attrgetter("delta")


class KeyIndex:
    """Packed (pid, tid) lane keys -> local lane ids; a file has few, so a sorted
    array and ``searchsorted`` beat hashing every event.

    Keys added since the last lookup are merged in once, at the next lookup: a
    file with 100k threads must not rebuild the arrays per new thread.
    """

    def __init__(self):
        self._keys = np.zeros(0, np.int64)
        self._vals = np.zeros(0, np.int32)
        self._new_keys: list[int] = []
        self._new_vals: list[int] = []

    def add(self, key: int, value: int) -> None:
        self._new_keys.append(key)
        self._new_vals.append(value)

    def _merge(self) -> None:
        keys = np.concatenate([self._keys, np.array(self._new_keys, np.int64)])
        vals = np.concatenate([self._vals, np.array(self._new_vals, np.int32)])
        self._new_keys, self._new_vals = [], []
        # a key added again wins (as a dict assignment would): keep its last value
        order = np.argsort(keys, kind="stable")
        keys, vals = keys[order], vals[order]
        last = np.append(keys[1:] != keys[:-1], True)
        self._keys, self._vals = keys[last], vals[last]

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Lane id per key, -1 where the key has no lane."""
        if self._new_keys:
            self._merge()
        if not len(self._keys):
            return np.full(len(keys), -1, np.int32)
        pos = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return np.where(self._keys[pos] == keys, self._vals[pos], -1).astype(np.int32)


@dataclass
class LaneInfo:
    """A lane as the file describes it: (pid, tid) codes and what ran on it."""

    pid: int
    tid: int
    klass: str  # "thread" | "annotation" | "global"
    device: int = -1
    stream: int = -1
    device_slices: int = 0


@dataclass
class FileData:
    """Everything read from one file, before it is put into the builder."""

    path: Path
    header: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    chunks: list[dict] = field(default_factory=list)
    lanes: list[LaneInfo] = field(default_factory=list)
    lane_index: KeyIndex = field(default_factory=lambda: KeyIndex())
    process_names: dict[int, str] = field(default_factory=dict)
    process_labels: dict[int, str] = field(default_factory=dict)
    process_sort: dict[int, float] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    thread_sort: dict[tuple[int, int], float] = field(default_factory=dict)
    counters: dict[tuple[int, str], list] = field(default_factory=dict)
    memory: list[tuple] = field(default_factory=list)
    flows: list[dict] = field(default_factory=list)
    bound_flows: list[tuple] = field(default_factory=list)  # (chunk, row, id, in, out)
    begin_end: list[tuple] = field(default_factory=list)
    category_names: list[str] = field(default_factory=list)
    ids: IdCodes = field(default_factory=IdCodes)
    flow_ids: IdCodes = field(default_factory=IdCodes)
    #: the file chunks with ``args_span`` read their args from on demand (else None)
    args_source: SourceFile | None = None


def _phases(evs: list) -> np.ndarray:
    phs = [e.ph for e in evs]
    joined = "".join(phs)
    if len(joined) == len(phs) and joined.isascii():
        return np.frombuffer(joined.encode("ascii"), np.uint8)
    return np.fromiter((ord(p) if len(p) == 1 and ord(p) < 128 else 0 for p in phs),
                       np.uint8, len(phs))


def _int_or(values: list, default: int) -> np.ndarray:
    """Integer values as int64; None, text, fractions and huge values -> ``default``."""
    n = len(values)
    try:
        f = np.fromiter(values, np.float64, n)  # None -> nan
    except (ValueError, TypeError, OverflowError):
        return np.fromiter((v if v.__class__ is int and -(1 << 62) < v < (1 << 62) else default
                            for v in values), np.int64, n)
    ok = np.isfinite(f) & (np.abs(f) < 2.0 ** 62)
    ok[ok] &= f[ok] == np.rint(f[ok])
    out = np.full(n, default, np.int64)
    out[ok] = f[ok].astype(np.int64)
    if ok.any() and np.abs(f[ok]).max() >= 2.0 ** 53:  # beyond float precision: redo exactly
        big = np.flatnonzero(ok & (np.abs(f) >= 2.0 ** 53))
        out[big] = [values[i] if values[i].__class__ is int else default for i in big.tolist()]
    return out


def _has_fraction(ts: np.ndarray) -> bool:
    """Whether these µs stamps were written with decimals.

    Below 2**52 µs (the year 2112) a written fraction almost never rounds to a
    whole float; one per piece is enough to switch the piece to exact parsing.
    """
    return bool((ts != np.floor(ts)).any())


_PLAIN_NUMBERS = {float, int, type(None)}


def _float_or_nan(values: list) -> np.ndarray:
    """Numbers within int64's range as float64 (byte counts); anything else -> NaN."""
    try:
        if not set(map(type, values)) <= _PLAIN_NUMBERS:  # bools and numeric text are not
            raise TypeError
        out = np.fromiter(values, np.float64, len(values))
    except (ValueError, TypeError, OverflowError):
        out = np.array([_as_float(v) for v in values], np.float64)
    return np.where(np.abs(out) < COUNTER_LIMIT, out, np.nan)


def _as_float(v) -> float:
    try:
        return float(v) if _is_number(v) else np.nan
    except OverflowError:  # an int beyond float's range
        return np.nan


def ns_exact(v) -> int | None:
    """A ``ts`` as written in the file (int or decimal text, in µs) -> int ns."""
    if isinstance(v, int):
        return v * 1000
    if not isinstance(v, str):
        return None
    try:
        return int((Decimal(v) * 1000).to_integral_value())
    except (InvalidOperation, ValueError, OverflowError):
        return None


_NEAR = 2.0 ** 52  # µs; below this a float ts is within 250 ns of the written value


def _exact_ns(approx: np.ndarray, ts: np.ndarray, written: list) -> np.ndarray:
    """ns exactly as written (``written``: the text of each ts, see exact_ts_strings).

    The float is within 250 ns of the written value below 2**52 µs, so the last
    three decimals fix it: vectorised for the usual ``123.456`` form, one by
    one (exact decimal arithmetic) for anything else.
    """
    out = approx.copy()
    blob = np.frombuffer(("\n".join(map(str, written)) + "\n").encode("ascii", "replace"),
                         np.uint8)
    ends = np.flatnonzero(blob == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    tail = blob[np.maximum(ends - 4, 0)[:, None] + np.arange(4)]  # ".ddd" before each end
    digits = tail[:, 1:].astype(np.int64) - 48
    usual = ((ends - starts >= 5) & (tail[:, 0] == 46) & (blob[starts] != 45)
             & ((digits >= 0) & (digits <= 9)).all(axis=1) & (np.abs(ts) < _NEAR))
    frac = digits @ np.array([100, 10, 1])
    delta = (frac - approx) % 1000
    out[usual] = approx[usual] + np.where(delta >= 500, delta - 1000, delta)[usual]
    marks = (blob == 46) | (blob == 101) | (blob == 69)  # '.', 'e', 'E': not a plain int
    other = ~usual & (np.add.reduceat(marks, starts) > 0)
    for i in np.flatnonzero(other).tolist():
        v = ns_exact(written[i])
        if v is not None:
            out[i] = v
    return out


def _to_ns(us: np.ndarray) -> np.ndarray:
    """µs floats -> int64 ns with integer arithmetic for the whole part (no 2**53 loss)."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


class FileReader:
    """Reads one file into a :class:`FileData`; shares tables with other files."""

    def __init__(self, path: Path, names: NameTable, report: LoadStats, spill: ArgsSpill,
                 on_demand: bool = False):
        self.names = names
        self.on_demand = on_demand  # large plain files' args may stay in the file
        self.load_stats = report
        self.spill = spill
        self.cats = CategoryTable()
        self.data = FileData(Path(path))
        self._memory_id = names.id(_MEMORY_NAME)
        self._ann: np.ndarray = np.zeros(0, bool)  # by category code: a GPU annotation
        self._n_cats = 0
        self._span = None  # the current piece's Piece.span when its args stay in the file

    # -- driver -----------------------------------------------------------------
    def read(self, progress: Progress, lo: float = 0.0, hi: float = 1.0,
             stream: EventStream | None = None, finish: bool = True) -> FileData:
        """Read the file (or ``stream``: a part of it); ``finish=False`` leaves B/E
        events unmatched, for :mod:`.parallel` to match once every part is in."""
        stream = stream if stream is not None else EventStream(self.data.path)
        if self.on_demand and stream.file_origin is not None and self.data.args_source is None:
            self.data.args_source = SourceFile.open(self.data.path)
        for piece in stream:
            self._piece(piece)
            progress.update(lo + (hi - lo) * stream.fraction,
                            f"reading {self.data.path.name}")
            progress.check_cancelled()
        self.data.header = stream.header
        self.data.notes = stream.notes
        self.data.category_names = list(self.cats.names)
        if finish:
            self._finish_begin_end()
        return self.data

    def _skip(self, mask: np.ndarray, reason: str) -> None:
        n = int(np.count_nonzero(mask))
        if n:
            self.load_stats.skip(reason, n)

    def _skip_ts(self, mask: np.ndarray, ts: np.ndarray) -> None:
        """Events in ``mask`` had no usable ts: missing (NaN) or out of range."""
        if mask.any():
            nan = np.isnan(ts)
            self._skip(mask & nan, "missing ts")
            self._skip(mask & ~nan, "ts out of range")

    # -- one piece --------------------------------------------------------------
    def _piece(self, piece: Piece) -> None:
        evs = piece.events
        n = len(evs)
        self.load_stats.read += n + sum(piece.skipped.values())
        for reason, k in piece.skipped.items():
            self.load_stats.skip(reason, k)
        if not n:
            return
        at = _Where(evs, piece.text)
        self._span = piece.span if self.data.args_source is not None else None
        layout = piece.layout
        if layout is None:
            self._events(evs, None, at)
            return
        # tagged union: X events and flow events each go through their own path
        ph = np.fromiter(map(layout.phase.__getitem__, map(type, evs)), np.uint8, n)
        x = ph == X
        if x.all():  # a piece of X events only needs no grouping
            self._events(evs, ph, at)
            return
        flow = (ph == FLOW_S) | (ph == FLOW_T) | (ph == FLOW_F)
        for mask, handle in ((x, self._events), (flow, self._flow_events),
                             (~(x | flow), self._events)):
            if mask.any():
                handle(list(compress(evs, mask.tolist())), ph[mask], at.of(mask))

    def _events(self, evs: list, ph: np.ndarray | None, at: _Where) -> None:
        """Slices, instants, counters, metadata and flows from events of any phase."""
        # one list comprehension per field: attribute loads on the structs are
        # specialised bytecode, cheaper than map(attrgetter) and a C-level call
        if ph is None:
            ph = _phases(evs)
        ts = at.ts()
        ns, ts_ok = self._times(ts, at)
        name = self.names.ids([e.name for e in evs])
        cat = self._cat_codes([e.cat for e in evs])
        ids = self.data.ids
        pid = ids.codes([e.pid for e in evs])
        tid = ids.codes([e.tid for e in evs])
        cols = _Cols(evs, ph, ts, ns, ts_ok, name, cat, pid, tid, at)

        inst = (ph == I1) | (ph == I2)
        mem = inst & (name == self._memory_id)
        x = ph == X
        slice_ok = self._check_x(x, ts_ok, evs, cols) | (inst & ~mem & ts_ok)
        self._skip_ts(inst & ~ts_ok, ts)
        self._slices(cols, np.flatnonzero(slice_ok), inst)
        other = ~(x | inst)
        if other.any():
            self._other_phases(cols, other)
        if mem.any():
            self._memory(cols, np.flatnonzero(mem & ts_ok))

    def _flow_events(self, evs: list, ph: np.ndarray, at: _Where) -> None:
        """s/t/f events of a tagged piece (they have no name, dur or args)."""
        ts = at.ts()
        ns, ts_ok = self._times(ts, at)
        cat = self._cat_codes([e.cat for e in evs])
        ids = self.data.ids
        cols = _Cols(evs, ph, ts, ns, ts_ok, None, cat, ids.codes([e.pid for e in evs]),
                     ids.codes([e.tid for e in evs]), at)
        self._skip_ts(~ts_ok, ts)
        self._flows(cols, np.flatnonzero(ts_ok))

    def _cat_codes(self, cats: list[str]) -> np.ndarray:
        codes = self.cats.codes(cats)
        if len(self.cats.names) != self._n_cats:
            self._n_cats = len(self.cats.names)
            self._ann = np.zeros(self._n_cats, bool)
            self._ann[self.cats.codes_lowered(_ANN_CATS)] = True
        return codes

    def _times(self, ts: np.ndarray, at: _Where) -> tuple[np.ndarray, np.ndarray]:
        ok = np.isfinite(ts) & (np.abs(ts) < TS_LIMIT)
        ns = np.zeros(len(ts), np.int64)
        if ok.all():
            ns = _to_ns(ts)
        elif ok.any():
            ns[ok] = _to_ns(ts[ok])
        big = ok & (np.abs(ts) >= EXACT_ABOVE)
        if at.text is not None and big.any() and at.exact():
            written = at.exact_ts()
            rows = np.flatnonzero(big)
            ns[rows] = _exact_ns(ns[rows], ts[rows], [written[i] for i in rows.tolist()])
        return ns, ok

    def _check_x(self, x, ts_ok, evs, cols: _Cols) -> np.ndarray:
        """Valid X events; the others are counted as skipped with their reason."""
        if not x.any():
            return x
        dur = np.fromiter([e.dur for e in evs], np.float64, len(evs))
        self._skip_ts(x & ~ts_ok, cols.ts)
        xs = x & ts_ok
        missing = xs & np.isnan(dur)
        negative = xs & (dur < 0)
        huge = xs & ~np.isnan(dur) & ~(np.abs(dur) < TS_LIMIT)
        self._skip(missing, "X event without dur")
        self._skip(negative, "negative dur")
        self._skip(huge & ~negative, "dur out of range")
        ok = xs & ~missing & ~negative & ~huge
        cols.dur = np.zeros(len(evs), np.int64)
        if ok.any():
            cols.dur[ok] = _to_ns(dur[ok])
        wraps = ok & (cols.ns > np.iinfo(np.int64).max - cols.dur)  # end beyond int64
        self._skip(wraps, "dur out of range")
        return ok & ~wraps

    # -- slices -----------------------------------------------------------------
    def _kinds(self, cat: np.ndarray, name: np.ndarray) -> np.ndarray:
        kind = self.cats.kind[cat]
        step = self.names.step_mask(name)
        if step.any():
            kind[step] = int(Kind.ANNOTATION)
        kern = np.flatnonzero(kind == int(Kind.KERNEL))
        if len(kern):
            kind[kern[self.names.collective_mask(name[kern])]] = int(Kind.COMMUNICATION)
        return kind

    def _slices(self, c: _Cols, idx: np.ndarray, inst: np.ndarray) -> None:
        k = len(idx)
        if not k:
            return
        every = k == len(c.ph)
        name = c.name if every else c.name[idx]
        cat = c.cat if every else c.cat[idx]
        kind = self._kinds(cat, name)
        pid = c.pid[idx].copy()
        tid = c.tid[idx].copy()
        if self._ann.any():
            ann = self._ann[cat]
            tid[ann] = ANN_TID
        inst_rows = np.flatnonzero(inst[idx])
        if len(inst_rows):
            scope = np.array([c.evs[i].s == "g" for i in idx[inst_rows].tolist()], bool)
            pid[inst_rows[scope]] = GLOBAL_PID
            tid[inst_rows[scope]] = 0
        lane = self._lanes_for(pid, tid)
        chunk = {
            "start": c.ns if every else c.ns[idx],
            "dur": c.dur[idx] if c.dur is not None else np.zeros(k, np.int64),
            "lane": lane, "name": name, "kind": kind,
            "device": np.full(k, -1, np.int16),
            "stream": self._thread_numbers(tid),
            "bytes": np.full(k, -1, np.int64),
            "copy_kind": np.zeros(k, np.int8),
            "correlation": np.full(k, -1, np.int64),
        }
        evs = c.evs if every else list(map(c.evs.__getitem__, idx.tolist()))
        self._device_columns(chunk, evs, pid, tid)
        if self._span is not None:  # the args stay in the file: where they are
            present = self._has_args(evs)
            items = idx if c.at.mask is None else np.flatnonzero(c.at.mask)[idx]
            chunk["args_span"], chunk["args_items"] = self._span, items
            chunk["args_present"] = present
        else:
            chunk["args_first"] = self.spill.append([e.args for e in evs])
        chunk["n"] = k
        if [e.bind_id for e in c.evs].count(None) != len(c.evs):
            self._bound_flows(c, idx, len(self.data.chunks))
        self.data.chunks.append(chunk)

    def _thread_numbers(self, tid: np.ndarray) -> np.ndarray:
        out = tid.copy()
        syn = tid < SYNTHETIC_BELOW
        if syn.any():
            u, inv = np.unique(tid[syn], return_inverse=True)
            out[syn] = np.array([self.data.ids.number(int(v)) for v in u], np.int64)[inv]
        return out

    def _lanes_for(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        keys = pack(pid, tid)
        index = self.data.lane_index
        local = index.lookup(keys)
        missing = np.flatnonzero(local < 0)
        if len(missing):
            new, first = np.unique(keys[missing], return_index=True)
            for key, row in zip(new.tolist(), missing[first].tolist()):
                p, t = int(pid[row]), int(tid[row])
                klass = "annotation" if t == ANN_TID else "global" if p == GLOBAL_PID else "thread"
                index.add(key, len(self.data.lanes))
                self.data.lanes.append(LaneInfo(p, t, klass))
            local = index.lookup(keys)
        return local

    def _device_columns(self, chunk: dict, evs: list, pid: np.ndarray, tid: np.ndarray) -> None:
        """device/stream/correlation/bytes/copy kind from the args of runtime and GPU events
        (``evs``: the chunk's events, or anything with their raw args as ``args``)."""
        kind = chunk["kind"]
        rows = np.flatnonzero(_DEV_OR_RUNTIME[kind])
        if not len(rows):
            return
        runtime = kind[rows] == int(Kind.RUNTIME)
        rrows, drows = rows[runtime], rows[~runtime]
        if len(rrows):
            args, strict = _decode_batch([evs[i].args for i in rrows.tolist()], _RUNTIME_ARGS)
            chunk["correlation"][rrows] = _correlation(args, strict)
        if not len(drows):
            return
        args, strict = _decode_batch([evs[i].args for i in drows.tolist()], _DEVICE_ARGS)
        chunk["correlation"][drows] = _correlation(args, strict)
        device = _ints(args, _A_DEVICE, strict)
        fallback = np.where(pid[drows] >= 0, pid[drows], 0)
        device = np.where((device >= 0) & (device < 32768), device, fallback)
        chunk["device"][drows] = np.clip(device, -1, 32767)
        stream = _ints(args, _A_STREAM, strict)
        chunk["stream"][drows] = np.where(stream >= 0, stream, chunk["stream"][drows])
        copies = _COPIES[kind[drows]]
        if copies.any():
            nbytes = _ints(args, _A_BYTES, strict)
            nbytes2 = _ints(args, _A_BYTES2, strict)
            chunk["bytes"][drows] = np.where(copies, np.where(nbytes >= 0, nbytes, nbytes2), -1)
        memcpy = drows[kind[drows] == int(Kind.MEMCPY)]
        if len(memcpy):
            chunk["copy_kind"][memcpy] = self.names.copy_kinds(chunk["name"][memcpy])
        self._note_devices(chunk["lane"][drows], chunk["device"][drows], chunk["stream"][drows])

    @staticmethod
    def _has_args(evs: list) -> np.ndarray:
        """Which events have args (as the spill counts them: a raw value, even ``null``)."""
        return np.fromiter([len(e.args) for e in evs], np.int64, len(evs)) > 0

    def _note_devices(self, lane, device, stream) -> None:
        u, first, counts = np.unique(lane, return_index=True, return_counts=True)
        for li, f, cnt in zip(u.tolist(), first.tolist(), counts.tolist()):
            info = self.data.lanes[li]
            if info.device_slices == 0:
                info.device, info.stream = int(device[f]), int(stream[f])
            info.device_slices += cnt

    def _bound_flows(self, c: _Cols, idx: np.ndarray, chunk_no: int) -> None:
        """Flow v2: X events with ``bind_id`` and ``flow_in``/``flow_out``."""
        for row, i in enumerate(idx.tolist()):
            ev = c.evs[i]
            if ev.bind_id is not None and (ev.flow_in or ev.flow_out):
                self.data.bound_flows.append(
                    (chunk_no, row, self.data.flow_ids.code(ev.bind_id), ev.flow_in,
                     ev.flow_out))

    # -- other phases -----------------------------------------------------------
    def _other_phases(self, c: _Cols, other: np.ndarray) -> None:
        ph = c.ph
        unknown = other & ~_KNOWN[ph]
        if unknown.any():
            for code in np.unique(ph[unknown]).tolist():
                sample = c.evs[int(np.flatnonzero(unknown & (ph == code))[0])].ph
                reason = f"unsupported phase {sample!r}" if code else "bad phase value"
                self._skip(unknown & (ph == code), reason)
        timed = other & ~unknown & (ph != M)
        self._skip_ts(timed & ~c.ts_ok, c.ts)
        ok = timed & c.ts_ok
        flows = ok & ((ph == FLOW_S) | (ph == FLOW_T) | (ph == FLOW_F))
        if flows.any():
            self._flows(c, np.flatnonzero(flows))
        for i in np.flatnonzero(ph == M).tolist():
            self._metadata(c, i)
        for i in np.flatnonzero(ok & (ph == C)).tolist():
            key = (int(c.pid[i]), c.evs[i].name)
            self.data.counters.setdefault(key, []).append((int(c.ns[i]), c.evs[i].args))
        be = np.flatnonzero(ok & ((ph == B) | (ph == E)))
        if len(be):
            kind = self._kinds(c.cat[be], c.name[be])
            for j, i in enumerate(be.tolist()):
                ev = c.evs[i]
                self.data.begin_end.append(
                    (int(c.pid[i]), int(c.tid[i]), int(c.ns[i]), len(self.data.begin_end),
                     ev.ph, int(c.name[i]), int(kind[j]), bytes(ev.args)))

    def _flows(self, c: _Cols, idx: np.ndarray) -> None:
        evs = c.evs
        sub = evs if len(idx) == len(evs) else [evs[i] for i in idx.tolist()]
        raw_ids = [e.id for e in sub]
        codes = self.data.flow_ids.int_codes(raw_ids)
        if codes is None:
            if None in raw_ids:
                has_id = np.fromiter((v is not None for v in raw_ids), bool, len(raw_ids))
                self._skip(~has_id, "flow event without id")
                idx = idx[has_id]
                sub = [e for e, h in zip(sub, has_id.tolist()) if h]
                raw_ids = [v for v in raw_ids if v is not None]
                if not len(idx):
                    return
            codes = self.data.flow_ids.codes(raw_ids)
        self.data.flows.append({
            "key": pack(c.pid[idx], c.tid[idx]),
            "ts": c.ns[idx],
            "phase": c.ph[idx],
            "enclosing": np.fromiter([e.bp == "e" for e in sub], bool, len(sub)),
            "cat": c.cat[idx],
            "id": codes,
        })

    def _metadata(self, c: _Cols, i: int) -> None:
        ev = c.evs[i]
        args = _args_dict(ev.args)
        pid, tid = int(c.pid[i]), int(c.tid[i])
        d = self.data
        value_name = args.get("name")
        sort_index = args.get("sort_index")
        if ev.name == "process_name" and isinstance(value_name, str):
            d.process_names[pid] = value_name
        elif ev.name == "thread_name" and isinstance(value_name, str):
            d.thread_names[(pid, tid)] = value_name
        elif ev.name == "process_labels" and isinstance(args.get("labels"), str):
            d.process_labels[pid] = args["labels"]
        elif ev.name == "process_sort_index" and _is_number(sort_index):
            d.process_sort[pid] = float(sort_index)
        elif ev.name == "thread_sort_index" and _is_number(sort_index):
            d.thread_sort[(pid, tid)] = float(sort_index)
        else:
            self.load_stats.skip(f"unused metadata event {ev.name[:40]!r}")

    def _memory(self, c: _Cols, idx: np.ndarray) -> None:
        """Kineto ``[memory]`` instants -> allocator samples (a counter, not slices)."""
        if not len(idx):
            return
        args, _ = _decode_batch([c.evs[i].args for i in idx.tolist()], _MEM_ARGS)
        dev_type = _int_or([a.dev_type for a in args], -1)
        dev_id = _int_or([a.dev_id for a in args], -1)
        total = _float_or_nan(list(map(_A_TOTAL, args)))
        delta = _float_or_nan(list(map(_A_DELTA, args)))
        bad = np.isnan(total) & np.isnan(delta)
        self._skip(bad, "memory event without byte counts")
        keep = ~bad
        self.data.memory.append((c.pid[idx][keep], dev_type[keep], dev_id[keep],
                                 c.ns[idx][keep], total[keep], delta[keep]))

    # -- B/E --------------------------------------------------------------------
    def _finish_begin_end(self) -> None:
        """Match B/E per (pid, tid) stack into slices; unmatched ones are skipped."""
        be = self.data.begin_end
        if not be:
            return
        be.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
        stacks: dict[tuple[int, int], list] = {}
        out = []
        for pid, tid, ts, _seq, ph, name, kind, args in be:
            stack = stacks.setdefault((pid, tid), [])
            if ph == "B":
                stack.append((ts, name, kind, args))
            elif stack:
                b_ts, b_name, b_kind, b_args = stack.pop()
                out.append((pid, tid, b_ts, ts - b_ts, b_name, b_kind, _merge_args(b_args, args)))
            else:
                self.load_stats.skip("E event without matching B")
        left = sum(len(s) for s in stacks.values())
        if left:
            self.load_stats.skip("B event without matching E", left)
        self.data.begin_end = []
        if not out:
            return
        out.sort(key=lambda r: (r[2], -r[3]))
        pid = np.array([r[0] for r in out], np.int64)
        tid = np.array([r[1] for r in out], np.int64)
        k = len(out)
        raws = [r[6] for r in out]
        chunk = {
            "start": np.array([r[2] for r in out], np.int64),
            "dur": np.array([r[3] for r in out], np.int64),
            "lane": self._lanes_for(pid, tid),
            "name": np.array([r[4] for r in out], np.int32),
            "kind": np.array([r[5] for r in out], np.int8),
            "device": np.full(k, -1, np.int16), "stream": self._thread_numbers(tid),
            "bytes": np.full(k, -1, np.int64), "copy_kind": np.zeros(k, np.int8),
            "correlation": np.full(k, -1, np.int64),
        }
        self._device_columns(chunk, [_Args(r) for r in raws], pid, tid)
        chunk["args_first"] = self.spill.append(raws)
        chunk["n"] = k
        self.data.chunks.append(chunk)


class _Cols:
    """The columns of one group of events, shared by the phase handlers."""

    __slots__ = ("evs", "ph", "ts", "ns", "ts_ok", "name", "cat", "pid", "tid", "at", "dur")

    def __init__(self, evs, ph, ts, ns, ts_ok, name, cat, pid, tid, at):
        self.evs, self.ph, self.ts, self.ns, self.ts_ok = evs, ph, ts, ns, ts_ok
        self.name, self.cat, self.pid, self.tid = name, cat, pid, tid
        self.at = at  # where the group's events sit in their piece
        self.dur = None


class _Args:
    """A merged B/E pair's raw args where :meth:`FileReader._device_columns` reads them."""

    __slots__ = ("args",)

    def __init__(self, args: bytes):
        self.args = args


class _Where:
    """Where a group of events sits in its piece, for the rare exact-``ts`` pass.

    Whether a piece needs it is decided once for the whole piece (as if its
    groups were one), and the piece's text is then re-read once, by position.
    """

    __slots__ = ("evs", "text", "mask", "_piece")

    def __init__(self, evs: list, text: bytes | None, mask=None, piece=None):
        self.evs, self.text, self.mask = evs, text, mask  # mask: the group's rows, None: all
        self._piece = piece if piece is not None else {}

    def of(self, mask: np.ndarray) -> _Where:
        return _Where(self.evs, self.text, mask, self._piece)

    def ts(self) -> np.ndarray:
        """The group's ``ts`` as float64 (None -> NaN), from one pass over the piece."""
        ts = self._piece.get("ts")
        if ts is None:
            ts = self._piece["ts"] = np.fromiter([e.ts for e in self.evs], np.float64,
                                                 len(self.evs))
        return ts if self.mask is None else ts[self.mask]

    def exact(self) -> bool:
        """Whether the piece's large ``ts`` values were written with decimals."""
        if "exact" not in self._piece:
            ts = self.ts() if self.mask is None else self.of(None).ts()
            big = np.isfinite(ts) & (np.abs(ts) >= EXACT_ABOVE) & (np.abs(ts) < TS_LIMIT)
            self._piece["exact"] = bool(big.any()) and _has_fraction(ts[big])
        return self._piece["exact"]

    def exact_ts(self) -> list:
        """The group's ``ts`` values as written (see :func:`exact_ts_strings`)."""
        if "written" not in self._piece:
            self._piece["written"] = exact_ts_strings(self.text)
        written = self._piece["written"]
        return written if self.mask is None else list(compress(written, self.mask.tolist()))


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _args_dict(raw) -> dict:
    if not len(raw):
        return {}
    try:
        v = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return {}
    return v if isinstance(v, dict) else {}


def _merge_args(b_args: bytes, e_args: bytes) -> bytes:
    """B's args plus E's (the format merges them), as JSON bytes."""
    if not e_args or e_args.strip() in (b"{}", b""):
        return b_args
    merged = {**_args_dict(b_args), **_args_dict(e_args)}
    return msgspec.json.encode(merged)


def _decode_batch(raws: list, decoders: tuple) -> tuple[list, bool]:
    """Decode many args objects in one call; per object (then leniently) if that fails.

    Returns (structs, strict): strict structs hold only ints (absent: -1); the
    loose ones whatever the file has, for :func:`_int_or`.
    """
    many, one, loose_many, loose_one = decoders
    try:
        out = many.decode(b"[" + b",".join(raws) + b"]")
        if len(out) == len(raws):  # an empty args value would vanish from the list
            return out, True
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    text = b"[" + b",".join(r if len(r) else b"{}" for r in raws) + b"]"
    try:
        return loose_many.decode(text), False
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        out = []
        for r in raws:
            try:
                out.append(loose_one.decode(r) if len(r) else loose_one.decode(b"{}"))
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                out.append(loose_one.decode(b"{}"))
        return out, False


_INT_LIMIT = 1 << 62  # as :func:`_int_or`: larger magnitudes are not ids or counts


def _ints(args: list, get, strict: bool) -> np.ndarray:
    """An int field of decoded args as int64; absent, not an int or huge -> -1."""
    if strict:
        try:
            out = np.fromiter(map(get, args), np.int64, len(args))
        except OverflowError:  # beyond int64: per value
            return _int_or(list(map(get, args)), -1)
        return np.where((out > -_INT_LIMIT) & (out < _INT_LIMIT), out, -1)
    return _int_or(list(map(get, args)), -1)


def _correlation(args: list, strict: bool) -> np.ndarray:
    corr = _ints(args, _A_CORR, strict)
    if (corr < 0).any():
        corr2 = _ints(args, _A_CORR2, strict)
        corr = np.where(corr >= 0, corr, corr2)
    return corr
