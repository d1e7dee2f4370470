"""One Chrome/Kineto JSON file -> slice columns, lanes, counters and flow endpoints.

Each decoded piece (see :mod:`.decode`) is turned into numpy columns in a
few vectorised passes; only the rare phases (B/E, C, M) and malformed values
are handled per event in Python. Slices keep *local* lane ids here; lanes are
named and created in the builder by :mod:`.lanes` once the whole file
(including metadata events, which Kineto writes last) has been read. Value
conversions live in :mod:`.values`, the args the reader looks into in
:mod:`.event_args`, and what it fills in :mod:`.file_data`.
"""

from __future__ import annotations

from itertools import compress
from pathlib import Path

import numpy as np

from ...progress import Progress
from ...trace import DEVICE_KINDS, Kind, LoadStats
from ..args_spill import ArgsSpill
from ..source_args import SourceFile
from .decode import EventStream
from .event_args import (
    A_BYTES,
    A_BYTES2,
    A_DELTA,
    A_DEVICE,
    A_STREAM,
    A_TOTAL,
    DEVICE_ARGS,
    MEM_ARGS,
    RUNTIME_ARGS,
    arg_ints,
    args_dict,
    correlations,
    decode_batch,
    merge_args,
)
from .event_types import Piece, exact_ts_strings
from .file_data import FileData, LaneInfo
from .gunzip import piped
from .ids import (
    ANN_TID,
    GLOBAL_PID,
    SYNTHETIC_BELOW,
    CategoryTable,
    NameTable,
    pack,
)
from .values import (
    EXACT_ABOVE,
    TS_LIMIT,
    exact_ns,
    float_or_nan,
    has_fraction,
    int_or,
    is_number,
    phases,
    to_ns,
)

X, B, E, I1, I2, C, M = (ord(c) for c in "XBEiICM")
FLOW_S, FLOW_T, FLOW_F = (ord(c) for c in "stf")
_KNOWN = np.zeros(256, bool)
_KNOWN[[X, B, E, I1, I2, C, M, FLOW_S, FLOW_T, FLOW_F]] = True

LAUNCH_CATS = {"ac2g", "async_cpu_to_gpu", "async"}
_DEV_OR_RUNTIME = np.zeros(256, bool)  # by Kind value: events whose args are read
_DEV_OR_RUNTIME[[int(k) for k in (*DEVICE_KINDS, Kind.SYNC, Kind.RUNTIME)]] = True
_COPIES = np.zeros(256, bool)
_COPIES[[int(Kind.MEMCPY), int(Kind.MEMSET)]] = True
_ANN_CATS = {"gpu_user_annotation"}
_MEMORY_NAME = "[memory]"


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
        if stream is None:  # a large gzip file is inflated beside the decode
            stream = EventStream(self.data.path, source=piped(self.data.path))
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
            self.finish_begin_end()
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
            ph = phases(evs)
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
            ns = to_ns(ts)
        elif ok.any():
            ns[ok] = to_ns(ts[ok])
        big = ok & (np.abs(ts) >= EXACT_ABOVE)
        if at.text is not None and big.any() and at.exact():
            written = at.exact_ts()
            rows = np.flatnonzero(big)
            ns[rows] = exact_ns(ns[rows], ts[rows], [written[i] for i in rows.tolist()])
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
            cols.dur[ok] = to_ns(dur[ok])
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
            args, strict = decode_batch([evs[i].args for i in rrows.tolist()], RUNTIME_ARGS)
            chunk["correlation"][rrows] = correlations(args, strict)
        if not len(drows):
            return
        args, strict = decode_batch([evs[i].args for i in drows.tolist()], DEVICE_ARGS)
        chunk["correlation"][drows] = correlations(args, strict)
        device = arg_ints(args, A_DEVICE, strict)
        fallback = np.where(pid[drows] >= 0, pid[drows], 0)
        device = np.where((device >= 0) & (device < 32768), device, fallback)
        chunk["device"][drows] = np.clip(device, -1, 32767)
        stream = arg_ints(args, A_STREAM, strict)
        chunk["stream"][drows] = np.where(stream >= 0, stream, chunk["stream"][drows])
        copies = _COPIES[kind[drows]]
        if copies.any():
            nbytes = arg_ints(args, A_BYTES, strict)
            nbytes2 = arg_ints(args, A_BYTES2, strict)
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
        args = args_dict(ev.args)
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
        elif ev.name == "process_sort_index" and is_number(sort_index):
            d.process_sort[pid] = float(sort_index)
        elif ev.name == "thread_sort_index" and is_number(sort_index):
            d.thread_sort[(pid, tid)] = float(sort_index)
        else:
            self.load_stats.skip(f"unused metadata event {ev.name[:40]!r}")

    def _memory(self, c: _Cols, idx: np.ndarray) -> None:
        """Kineto ``[memory]`` instants -> allocator samples (a counter, not slices)."""
        if not len(idx):
            return
        args, _ = decode_batch([c.evs[i].args for i in idx.tolist()], MEM_ARGS)
        dev_type = int_or([a.dev_type for a in args], -1)
        dev_id = int_or([a.dev_id for a in args], -1)
        total = float_or_nan(list(map(A_TOTAL, args)))
        delta = float_or_nan(list(map(A_DELTA, args)))
        bad = np.isnan(total) & np.isnan(delta)
        self._skip(bad, "memory event without byte counts")
        keep = ~bad
        self.data.memory.append((c.pid[idx][keep], dev_type[keep], dev_id[keep],
                                 c.ns[idx][keep], total[keep], delta[keep]))

    # -- B/E --------------------------------------------------------------------
    def finish_begin_end(self) -> None:
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
                out.append((pid, tid, b_ts, ts - b_ts, b_name, b_kind, merge_args(b_args, args)))
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
            self._piece["exact"] = bool(big.any()) and has_fraction(ts[big])
        return self._piece["exact"]

    def exact_ts(self) -> list:
        """The group's ``ts`` values as written (see :func:`exact_ts_strings`)."""
        if "written" not in self._piece:
            self._piece["written"] = exact_ts_strings(self.text)
        written = self._piece["written"]
        return written if self.mask is None else list(compress(written, self.mask.tolist()))
