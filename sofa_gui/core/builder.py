"""Assemble a :class:`Trace` from columnar chunks, whatever the source format.

Importers append slices in chunks of numpy arrays (in any order), declare lanes
by a hashable key, add counters and flows, and call :meth:`TraceBuilder.finish`,
which sorts, assigns nesting depth per lane (overlaps are kept, never dropped),
remaps flows to sorted indexes and derives launch flows from correlation ids.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Hashable, Sequence

import numpy as np
import pyarrow as pa

from .nesting import assign_depths
from .progress import NullProgress, Progress
from .trace import (
    DEVICE_KINDS,
    FULL_NAMES,
    MAX_NAME_CHARS,
    SHARED_TEXT,
    ArgSegments,
    ArgsStore,
    Counters,
    CounterSeries,
    Flows,
    Kind,
    LaneKind,
    Lanes,
    LoadStats,
    Slices,
    Trace,
    TraceMeta,
)

_SLICE_DEFAULTS = {
    "kind": (np.int8, int(Kind.OTHER)),
    "device": (np.int16, -1),
    "stream": (np.int64, -1),
    "bytes": (np.int64, -1),
    "copy_kind": (np.int8, 0),
    "correlation": (np.int64, -1),
}


def _col(value, n: int, dtype, default) -> np.ndarray:
    if value is None:
        return np.full(n, default, dtype)
    arr = np.asarray(value)
    if arr.ndim == 0:
        return np.full(n, arr, dtype)
    if len(arr) != n:
        raise ValueError(f"column has {len(arr)} values, expected {n}")
    return arr.astype(dtype, copy=False)


class TraceBuilder:
    """Collects one trace's data; see the module docstring."""

    def __init__(self, source: str = "", format: str = ""):
        self.meta = TraceMeta(source=str(source), format=format)
        self._names: dict[str, int] = {}
        self._name_list: list[str] = []
        self._lane_keys: dict[Hashable, int] = {}
        self._lanes: list[dict] = []
        self._chunks: list[dict[str, np.ndarray]] = []
        self._args: list = []
        self._arg_segments: list[pa.Array] = []  # earlier args, as Arrow arrays
        self._n_segment_args = 0
        self._n = 0
        self._series: list[tuple[str, str, int]] = []
        self._counter_chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._flow_src: list[np.ndarray] = []
        self._flow_dst: list[np.ndarray] = []
        self._flow_kind: list[np.ndarray] = []

    @property
    def load_stats(self) -> LoadStats:
        return self.meta.load_stats

    @property
    def n_slices(self) -> int:
        return self._n

    # -- strings and lanes ------------------------------------------------------
    def intern(self, name: str) -> int:
        """Id of ``name`` in the string table. Names over :data:`MAX_NAME_CHARS` are cut
        there for display and matching (a 200 MB name froze the app and took minutes of
        regex work); the full text is kept once in the args store, see
        :meth:`Trace.full_name`."""
        i = self._names.get(name)
        if i is None:
            i = self._names[name] = len(self._name_list)
            if len(name) > MAX_NAME_CHARS:
                row = self.share_text(name)
                self.meta.extra.setdefault(FULL_NAMES, {})[str(i)] = row
                name = cut_name(name)
            self._name_list.append(name)
        return i

    def name_text(self, i: int) -> str:
        """The string table's text for id ``i`` (cut when long)."""
        return self._name_list[i]

    def intern_many(self, names: Sequence[str]) -> np.ndarray:
        get = self._names.get
        out = np.empty(len(names), np.int32)
        for k, n in enumerate(names):
            i = get(n)
            if i is None:
                i = self.intern(n)
            out[k] = i
        return out

    def lane(
        self,
        key: Hashable,
        name: str,
        kind: LaneKind,
        group: str = "",
        *,
        rank: int = -1,
        pid: int = -1,
        tid: int = -1,
        device: int = -1,
        stream: int = -1,
        sort_key: int | None = None,
    ) -> int:
        """Id of the lane with ``key``, creating it on first use."""
        i = self._lane_keys.get(key)
        if i is None:
            i = self._lane_keys[key] = len(self._lanes)
            self._lanes.append(
                dict(
                    name=name, group=group, kind=int(kind), rank=rank, pid=pid, tid=tid,
                    device=device, stream=stream,
                    sort_key=default_sort_key(kind, rank, pid, tid, device, stream)
                    if sort_key is None else sort_key,
                )
            )
        return i

    def has_lane(self, key: Hashable) -> bool:
        return key in self._lane_keys

    def rename_lane(self, lane_id: int, name: str | None = None, group: str | None = None,
                    sort_key: int | None = None) -> None:
        row = self._lanes[lane_id]
        if name is not None:
            row["name"] = name
        if group is not None:
            row["group"] = group
        if sort_key is not None:
            row["sort_key"] = sort_key

    # -- data -------------------------------------------------------------------
    def add_slices(self, start, dur, lane, name, *, args=None, **cols) -> np.ndarray:
        """Append a chunk; returns the builder-wide row ids of the new slices.

        ``name`` is an array of name ids or a sequence of strings. ``args`` is a
        sequence of JSON ``bytes`` (or None) per slice. Other columns
        (kind, device, stream, bytes, copy_kind, correlation) default when omitted.
        """
        start = np.asarray(start, np.int64)
        n = len(start)
        if n == 0:
            return np.zeros(0, np.int64)
        if len(name) and isinstance(name[0], str):
            name = self.intern_many(name)
        chunk = {
            "start": start,
            "dur": np.maximum(_col(dur, n, np.int64, 0), 0),
            "lane": _col(lane, n, np.int32, 0),
            "name": _col(name, n, np.int32, 0),
        }
        unknown = set(cols) - set(_SLICE_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown slice columns {sorted(unknown)}")
        for col, (dtype, default) in _SLICE_DEFAULTS.items():
            chunk[col] = _col(cols.get(col), n, dtype, default)
        chunk["args"] = self._add_args(args, n)
        self._chunks.append(chunk)
        rows = np.arange(self._n, self._n + n, dtype=np.int64)
        self._n += n
        return rows

    def _add_args(self, args, n: int) -> np.ndarray:
        if args is None:
            return np.full(n, -1, np.int64)
        if len(args) != n:
            raise ValueError("args length differs from slices")
        if isinstance(args, pa.Array) or getattr(args, "lazy_args", False):
            return self._add_arrow_args(args)
        idx = np.full(n, -1, np.int64)
        base = self._n_segment_args + len(self._args)
        k = 0
        for j, a in enumerate(args):
            if a:
                idx[j] = base + k
                self._args.append(a)
                k += 1
        return idx

    def share_args(self, data: bytes) -> int:
        """Store one args row that no slice owns and return its id: what many events
        carry (an XPlane metadata stat) is kept once and referred to with
        :data:`~sofa_gui.core.trace.SHARED` (see :meth:`ArgsStore.get`)."""
        self._args.append(data)
        return self._n_segment_args + len(self._args) - 1

    def share_text(self, text: str) -> int:
        """Store ``text`` once as a shared text row (:data:`SHARED_TEXT`, read back with
        :meth:`ArgsStore.get_text`) and return its id."""
        return self.share_args(json.dumps({SHARED_TEXT: text}, separators=(",", ":")).encode())

    def _add_arrow_args(self, args: pa.Array) -> np.ndarray:
        """A binary Arrow chunk is kept as is (zero-copy, e.g. memory-mapped); empty = none.
        Args that stay in the file (``lazy_args``, importers/source_args.py): one row
        per slice (``rows``), and which slices have args (``present``)."""
        self._flush_args()
        if not isinstance(args, pa.Array):
            base = self._n_segment_args
            self._arg_segments.append(args.rows)
            self._n_segment_args += len(args.rows)
            return np.where(args.present, base + np.arange(len(args), dtype=np.int64), -1)
        if not pa.types.is_large_binary(args.type):
            args = args.cast(pa.large_binary())
        base = self._n_segment_args
        self._arg_segments.append(args)
        self._n_segment_args += len(args)
        lo, n = args.offset, len(args)
        present = np.diff(np.frombuffer(args.buffers()[1], np.int64)[lo:lo + n + 1]) > 0
        if args.null_count:
            bits = np.frombuffer(args.buffers()[0], np.uint8)
            present &= np.unpackbits(bits, bitorder="little")[lo:lo + n] == 1
        return np.where(present, base + np.arange(n, dtype=np.int64), -1)

    def _flush_args(self) -> None:
        if self._args:
            self._arg_segments.append(pa.array(self._args, pa.large_binary()))
            self._n_segment_args += len(self._args)
            self._args = []

    def _args_array(self):
        self._flush_args()
        segs = [s for s in self._arg_segments if len(s)]
        if not segs:
            return []
        if not all(isinstance(s, pa.Array) for s in segs):
            return ArgSegments(segs)
        return segs[0] if len(segs) == 1 else pa.chunked_array(segs, pa.large_binary())

    def add_counter(self, name: str, unit: str, lane: int, time, value) -> int:
        """Add one counter series (samples sorted here); returns its id."""
        sid = len(self._series)
        self._series.append((name, unit, lane))
        t = np.asarray(time, np.int64)
        v = np.asarray(value, np.float64)
        order = np.argsort(t, kind="stable")
        self._counter_chunks.append((np.full(len(t), sid, np.int32), t[order], v[order]))
        return sid

    def add_flows(self, src_rows, dst_rows, kind: int = 1) -> None:
        """Flows between builder row ids (as returned by :meth:`add_slices`)."""
        src = np.asarray(src_rows, np.int64)
        self._flow_src.append(src)
        self._flow_dst.append(np.asarray(dst_rows, np.int64))
        self._flow_kind.append(np.full(len(src), kind, np.int8))

    # -- finish -----------------------------------------------------------------
    def finish(self, correlate: bool = True, progress: Progress | None = None) -> Trace:
        """Sort, nest, link and return the :class:`Trace`.

        ``progress`` is only asked whether to stop, between the phases (each is one
        vectorised pass, so a cancel is honoured within one phase at 10M events).
        """
        check = (progress or NullProgress()).check_cancelled
        cols = self._concat()
        check()
        order = start_order(cols["start"], cols["dur"])
        check()
        for k in cols:
            cols[k] = cols[k][order]
        rank_of = np.empty(len(order), np.int64)
        rank_of[order] = np.arange(len(order))
        check()
        n_lanes = len(self._lanes)
        depth, lane_depth = assign_depths(cols["start"], cols["dur"], cols["lane"], n_lanes)
        check()
        slices = Slices(depth=depth, **cols)
        lanes = self._lanes_table(lane_depth)
        flows = self._flows(rank_of)
        if correlate and len(flows) == 0:
            flows = correlation_flows(slices, lanes)
        self._count_loaded(len(slices) + sum(len(c[1]) for c in self._counter_chunks))
        if not self.meta.ranks:
            self.meta.ranks = sorted({int(r) for r in lanes.rank if r >= 0})
        return Trace(
            slices=slices,
            lanes=lanes,
            names=list(self._name_list),
            counters=self._counters(),
            flows=flows,
            args=ArgsStore(self._args_array()),
            meta=self.meta,
        )

    def _concat(self) -> dict[str, np.ndarray]:
        keys = ["start", "dur", "lane", "name", *_SLICE_DEFAULTS, "args"]
        if not self._chunks:
            empty = {"start": np.int64, "dur": np.int64, "lane": np.int32, "name": np.int32,
                     "args": np.int64}
            empty.update({k: v[0] for k, v in _SLICE_DEFAULTS.items()})
            return {k: np.zeros(0, empty[k]) for k in keys}
        # one column at a time, dropping its chunks as we go: peak memory ~ one extra column
        out = {k: np.concatenate([c.pop(k) for c in self._chunks]) for k in keys}
        self._chunks = []
        return out

    def _count_loaded(self, events: int) -> None:
        """``loaded`` is one thing everywhere: source records that made it in (read minus
        skipped). One record may give several events (a SOFA mpstat row adds an all-core
        mean, an old nvsmi row two samples), so the event count is not it; it stands in
        only for importers that do not count what they read."""
        st = self.meta.load_stats
        st.loaded = max(st.read - st.skipped_total, 0) if st.read else events

    def _lanes_table(self, lane_depth: np.ndarray) -> Lanes:
        rows = self._lanes

        def col(k, dtype):
            return np.array([r[k] for r in rows], dtype=dtype)

        depth = np.maximum(lane_depth, 1).astype(np.int16)
        return Lanes(
            name=[r["name"] for r in rows], group=[r["group"] for r in rows],
            kind=col("kind", np.int8), rank=col("rank", np.int32), pid=col("pid", np.int64),
            tid=col("tid", np.int64), device=col("device", np.int16),
            stream=col("stream", np.int64), sort_key=col("sort_key", np.int64), depth=depth,
        )

    def _flows(self, rank_of: np.ndarray) -> Flows:
        if not self._flow_src:
            return empty_flows()
        src = np.concatenate(self._flow_src)
        dst = np.concatenate(self._flow_dst)
        kind = np.concatenate(self._flow_kind)
        ok = (src >= 0) & (src < len(rank_of)) & (dst >= 0) & (dst < len(rank_of))
        self.meta.load_stats.skip("flow endpoint not found", int((~ok).sum()))
        return Flows(rank_of[src[ok]], rank_of[dst[ok]], kind[ok])

    def _counters(self) -> Counters:
        table = CounterSeries(
            name=[s[0] for s in self._series],
            unit=[s[1] for s in self._series],
            lane=np.array([s[2] for s in self._series], np.int32),
        )
        if not self._counter_chunks:
            return Counters(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0), table)
        sid, t, v = (np.concatenate(x) for x in zip(*self._counter_chunks))
        return Counters(sid, t, v, table)


def cut_name(name: str) -> str:
    """``name`` cut to :data:`MAX_NAME_CHARS` with its length and a checksum, so that two
    long names sharing a prefix stay two names (and a cut name is never cut again)."""
    crc = zlib.crc32(name.encode("utf-8", "surrogatepass"))
    tail = f"… [{len(name):,} characters, crc {crc:08x}]"
    return name[:MAX_NAME_CHARS - len(tail)] + tail


def start_order(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((-dur, start))``: by start, longest first, else as given.

    Importers append slices nearly in start order, which a stable sort (timsort)
    handles in close to linear time; only runs of equal starts are sorted again.
    """
    order = np.argsort(start, kind="stable")
    s = start[order]
    tie = s[1:] == s[:-1]
    if tie.any():
        member = np.zeros(len(s), bool)
        member[1:] |= tie
        member[:-1] |= tie
        at = np.flatnonzero(member)
        sub = order[at]
        order[at] = sub[np.lexsort((-dur[sub], start[sub]))]
    return order


def empty_flows() -> Flows:
    return Flows(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8))


def default_sort_key(kind, rank, pid, tid, device, stream) -> int:
    """Rank first, then host lanes before device lanes before counters."""
    rank_part = max(rank, 0) + 1
    kind_part = {LaneKind.CPU: 0, LaneKind.GPU: 1, LaneKind.MEMCPY: 1,
                 LaneKind.NETWORK: 2, LaneKind.COUNTER: 3}[LaneKind(kind)]
    if LaneKind(kind) in (LaneKind.GPU, LaneKind.MEMCPY):
        within = (max(device, 0) << 24) + (max(stream, 0) & 0xFFFFFF)
    else:
        within = ((max(pid, 0) & 0xFFFFFF) << 24) + (max(tid, 0) & 0xFFFFFF)
    return (rank_part << 52) + (kind_part << 49) + (within & ((1 << 49) - 1))


def correlation_flows(slices: Slices, lanes: Lanes) -> Flows:
    """Launch flows from correlation ids: host runtime slice -> device slices.

    Correlation ids repeat across processes/ranks, so they are matched within
    the same rank only.
    """
    corr = slices.correlation
    has = corr >= 0
    if not has.any():
        return empty_flows()
    kind = slices.kind
    dev_mask = has & np.isin(kind, [int(k) for k in DEVICE_KINDS])
    host_mask = has & (kind == int(Kind.RUNTIME))
    if not dev_mask.any() or not host_mask.any():
        return empty_flows()
    rank = lanes.rank[slices.lane].astype(np.int64)
    key = (rank + 1) * (1 << 40) + corr
    host_idx = np.flatnonzero(host_mask)
    hk = key[host_idx]
    order = np.argsort(hk, kind="stable")
    hk_sorted, host_sorted = hk[order], host_idx[order]
    dev_idx = np.flatnonzero(dev_mask)
    pos = np.searchsorted(hk_sorted, key[dev_idx])
    pos_c = np.minimum(pos, len(hk_sorted) - 1)
    hit = hk_sorted[pos_c] == key[dev_idx]
    src = host_sorted[pos_c[hit]]
    dst = dev_idx[hit]
    return Flows(src.astype(np.int64), dst.astype(np.int64), np.zeros(len(src), np.int8))
