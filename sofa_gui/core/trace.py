"""The columnar trace model every importer produces and every view reads.

One :class:`Trace` holds numpy columns, never a Python object per event:

* ``slices`` -- timed events, sorted by start (then longer first), int64 ns on
  the trace's own clock (for Kineto: file ``ts`` in µs x 1000);
* ``lanes`` -- one row per CPU thread / GPU stream / network link / counter
  group, with kind, group (rank / process / device), display name and order;
* ``counters`` -- (series, time, value) samples, series described in a table;
* ``flows`` -- (src slice, dst slice) pairs, e.g. CPU launch -> GPU kernel;
* ``names`` -- the interned string table that ``slices.name`` indexes;
* ``args`` -- raw per-event arguments as JSON bytes, decoded only on demand;
* ``meta`` -- source, format, ranks, device properties and the load report.

Build traces with :class:`sofa_gui.core.builder.TraceBuilder`, not by hand.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import dataclass, field, fields
from enum import IntEnum

import numpy as np


class Kind(IntEnum):
    """What a slice is; stable ints stored in ``slices.kind`` and the cache."""

    CPU_OP = 0
    PYTHON = 1
    RUNTIME = 2
    KERNEL = 3
    MEMCPY = 4
    MEMSET = 5
    COMMUNICATION = 6
    ANNOTATION = 7
    SYNC = 8
    NETWORK = 9
    OTHER = 10

    @property
    def label(self) -> str:
        return self.name.lower()


class CopyKind(IntEnum):
    """Direction of a memory copy (``slices.copy_kind``); NONE for non-copies."""

    NONE = 0
    H2D = 1
    D2H = 2
    D2D = 3
    P2P = 4
    OTHER = 5


class LaneKind(IntEnum):
    """What a lane shows."""

    CPU = 0
    GPU = 1
    MEMCPY = 2
    NETWORK = 3
    COUNTER = 4

    @property
    def label(self) -> str:
        return self.name.lower()


#: Slice kinds that run on an accelerator.
DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.COMMUNICATION)


def _same_length(obj) -> int:
    lengths = {len(getattr(obj, f.name)) for f in fields(obj)}
    if len(lengths) > 1:
        raise ValueError(f"{type(obj).__name__}: columns differ in length {lengths}")
    return lengths.pop() if lengths else 0


@dataclass
class Slices:
    """Timed events as parallel numpy columns, sorted by (start, -dur).

    ``args`` is an index into :attr:`Trace.args` (-1: none); ``correlation`` is
    the runtime/kernel correlation id (-1: none); ``device`` is the GPU index
    (-1: host); ``stream`` is the GPU stream or the CPU thread id.
    """

    start: np.ndarray  # int64 ns
    dur: np.ndarray  # int64 ns, >= 0
    lane: np.ndarray  # int32 -> lanes row
    name: np.ndarray  # int32 -> Trace.names
    kind: np.ndarray  # int8 Kind
    depth: np.ndarray  # int16 nesting row within the lane
    device: np.ndarray  # int16
    stream: np.ndarray  # int64
    bytes: np.ndarray  # int64, -1 unknown
    copy_kind: np.ndarray  # int8 CopyKind
    correlation: np.ndarray  # int64
    args: np.ndarray  # int64 -> Trace.args row, -1 none

    def __len__(self) -> int:
        return len(self.start)

    @property
    def end(self) -> np.ndarray:
        """``start + dur``, computed once per pair of columns (the analyses read it ~50
        times per run: 2 ms each on 1M slices); read-only, as it is shared."""
        kept = self.__dict__.get("_end")
        if kept is None or kept[0] is not self.start or kept[1] is not self.dur:
            end = self.start + self.dur
            end.flags.writeable = False
            kept = self.__dict__["_end"] = (self.start, self.dur, end)
        return kept[2]

    def validate(self) -> None:
        _same_length(self)


@dataclass
class Lanes:
    """One row per lane.  ``group`` is the collapsible heading (rank/process/device)."""

    name: list[str]
    group: list[str]
    kind: np.ndarray  # int8 LaneKind
    rank: np.ndarray  # int32, -1 unknown
    pid: np.ndarray  # int64, -1 none
    tid: np.ndarray  # int64, -1 none
    device: np.ndarray  # int16, -1 host
    stream: np.ndarray  # int64, -1 none
    sort_key: np.ndarray  # int64: display order, ascending
    depth: np.ndarray  # int16: number of nesting rows (max depth + 1; 1 for counters)

    def __len__(self) -> int:
        return len(self.name)

    def display_order(self) -> np.ndarray:
        """Lane ids in the order they are drawn top to bottom."""
        return np.lexsort((np.arange(len(self)), self.sort_key)).astype(np.int32)


@dataclass
class CounterSeries:
    """Counter series table; samples of series ``i`` are where ``Counters.series == i``."""

    name: list[str]
    unit: list[str]
    lane: np.ndarray  # int32: the counter lane that draws it


@dataclass
class Counters:
    series: np.ndarray  # int32 -> CounterSeries row
    time: np.ndarray  # int64 ns, sorted within each series
    value: np.ndarray  # float64
    table: CounterSeries

    def __len__(self) -> int:
        return len(self.time)

    def samples(self, series_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of one series, in stored order: a slice of a per-series index
        built once (a scan of every sample per series was quadratic with 80k series)."""
        order, bounds = self._by_series
        rows = order[bounds[series_id]:bounds[series_id + 1]]
        return self.time[rows], self.value[rows]

    @functools.cached_property
    def _by_series(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.series, kind="stable")
        bounds = np.searchsorted(self.series[order], np.arange(len(self.table.name) + 1))
        return order, bounds


@dataclass
class Flows:
    """Arrows between slices, e.g. ``cudaLaunchKernel`` -> its kernel."""

    src: np.ndarray  # int64 slice index
    dst: np.ndarray  # int64 slice index
    kind: np.ndarray  # int8: 0 launch (CPU->GPU), 1 other (fwd/bwd, user flows)

    def __len__(self) -> int:
        return len(self.src)

    def partners(self, slice_index: int) -> np.ndarray:
        """Slices linked to ``slice_index`` by a flow, either direction."""
        out = np.concatenate(
            [self.dst[self.src == slice_index], self.src[self.dst == slice_index]]
        )
        return np.unique(out)


@dataclass
class LoadStats:
    """Every event in the source is either loaded or skipped with a reason."""

    read: int = 0
    loaded: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def skip(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] += n

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def to_dict(self) -> dict:
        return {
            "read": self.read,
            "loaded": self.loaded,
            "skipped": dict(self.skipped),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict) -> LoadStats:
        return cls(d["read"], d["loaded"], Counter(d["skipped"]), list(d["notes"]))


#: ``meta.extra`` key: lane ids whose slices are sampled stacks (py-spy), not traced calls;
#: the breakdown never takes them for the main thread when traced ops exist.
SAMPLED_LANES = "sampled_lanes"


@dataclass
class TraceMeta:
    """Where the trace came from and what it says about the run."""

    source: str = ""
    format: str = ""
    # ns to add to a slice start to get Unix epoch ns, when known (None: unknown).
    epoch_offset_ns: int | None = None
    ranks: list[int] = field(default_factory=list)
    world_size: int | None = None
    devices: dict = field(default_factory=dict)  # device index -> properties dict
    extra: dict = field(default_factory=dict)  # format-specific facts (JSON-able)
    load_stats: LoadStats = field(default_factory=LoadStats)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "format": self.format,
            "epoch_offset_ns": self.epoch_offset_ns,
            "ranks": list(self.ranks),
            "world_size": self.world_size,
            "devices": {str(k): v for k, v in self.devices.items()},
            "extra": self.extra,
            "report": self.load_stats.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> TraceMeta:
        return cls(
            source=d["source"],
            format=d["format"],
            epoch_offset_ns=d["epoch_offset_ns"],
            ranks=list(d["ranks"]),
            world_size=d["world_size"],
            devices={int(k): v for k, v in d["devices"].items()},
            extra=d["extra"],
            load_stats=LoadStats.from_dict(d["report"]),
        )


#: Key of an args row's references to rows stored once and shared (see
#: :meth:`ArgsStore.get`): at the top level a list of row ids whose keys are merged in
#: under the row's own; as a value, ``{SHARED: row}`` stands for that row's ``SHARED_TEXT``.
#: NUL-prefixed so that no real trace's key collides with it.
SHARED = "\u0000shared"
SHARED_TEXT = "\u0000text"
_MAX_SHARED_REFS = 64
#: Longest name kept in the string table; ``meta.extra[FULL_NAMES]`` maps the id of each
#: longer (cut) name to the args row holding its full text.
MAX_NAME_CHARS = 4096
FULL_NAMES = "full_names"


class ArgsStore:
    """Raw event arguments as JSON bytes, decoded one event at a time.

    Backed by any sequence of ``bytes`` (a list while importing, a memory-mapped
    pyarrow array after a cached reopen), so opening never decodes them all. A row
    may refer to shared rows (one copy of what many events carry, e.g. XPlane
    metadata stats); :meth:`get` resolves them, one level deep.
    """

    def __init__(self, raw=None):
        self._raw = raw if raw is not None else []

    def __len__(self) -> int:
        return len(self._raw)

    def raw(self, i: int) -> bytes:
        v = self._raw[i]
        if hasattr(v, "as_py"):
            v = v.as_py()
        return v or b"{}"

    def get(self, i: int) -> dict:
        """Row ``i`` as a dict, shared rows it refers to resolved."""
        own = self._plain(i)
        refs = own.pop(SHARED, None)
        if not isinstance(refs, list) and not any(is_shared_ref(v) for v in own.values()):
            return own
        out: dict = {}
        for r in refs[:_MAX_SHARED_REFS] if isinstance(refs, list) else ():
            shared = self._plain(r)
            shared.pop(SHARED, None)
            out.update(shared)
        out.update(own)
        for k, v in out.items():
            if is_shared_ref(v):
                out[k] = self._plain(v[SHARED]).get(SHARED_TEXT, "")
        return out

    def get_text(self, i: int) -> str | None:
        """The text of shared text row ``i`` (None if it is not one)."""
        text = self._plain(i).get(SHARED_TEXT)
        return text if isinstance(text, str) else None

    def _plain(self, i) -> dict:
        if not isinstance(i, int) or i < 0 or i >= len(self):
            return {}
        try:
            out = json.loads(self.raw(i))
        except (ValueError, UnicodeDecodeError, RecursionError):  # untrusted: ~1000 deep
            return {}
        except OSError as exc:  # args read on demand from a file that changed since
            return {ARGS_UNAVAILABLE: str(exc)}
        return out if isinstance(out, dict) else {"value": out}

    def may_hold(self, rows, texts: tuple[bytes, ...]) -> bool:
        """False only when the args of no row in ``rows`` can hold any of ``texts`` (UTF-8
        of a JSON string's content): a quick byte scan that spares decoding rows to look
        for a rare value. A backslash (an escape can spell any text; shared rows are
        marked by one) counts as a possible hit; rows read on demand scan their piece."""
        texts = (b"\\", *texts)
        scan = getattr(self._raw, "may_hold", None)
        if scan is not None:
            return scan(rows, texts)
        return any(_holds(self.raw(int(i)), texts) for i in rows)

    @property
    def backing(self):
        return self._raw


def _holds(raw: bytes, texts: tuple[bytes, ...]) -> bool:
    return any(t in raw for t in texts)


#: The key of the one entry :meth:`ArgsStore.get` returns when an event's args cannot be
#: read (the file they are read from on demand changed): its value says why.
ARGS_UNAVAILABLE = "(args unavailable)"


class ArgSegments:
    """Args rows kept in segments, as :class:`TraceBuilder` received them: Arrow arrays
    and rows read on demand from the source file (objects with ``in_file``, see
    ``importers/source_args.py``). A sequence of ``bytes``; :meth:`to_arrow` reads all."""

    def __init__(self, segments: list):
        self.segments = segments
        self._starts = np.cumsum([0, *map(len, segments)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, i: int) -> bytes:
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        v = self.segments[k][i - int(self._starts[k])]
        v = v.as_py() if hasattr(v, "as_py") else v
        return v if v is not None else b""

    def may_hold(self, rows, texts: tuple[bytes, ...]) -> bool:
        """:meth:`ArgsStore.may_hold` over these segments: a segment read from the file
        scans its piece once for all its rows."""
        rows = np.asarray(rows, np.int64)
        seg = np.searchsorted(self._starts, rows, side="right") - 1
        for k in np.unique(seg).tolist():
            segment = self.segments[k]
            if getattr(segment, "in_file", False):
                if segment.may_hold(texts):
                    return True
            elif any(_holds(self[int(i)], texts) for i in rows[seg == k]):
                return True
        return False

    def to_pylist(self) -> list:
        return self.to_arrow().to_pylist()

    def to_arrow(self):
        """Every row as one ``large_binary`` chunked array (raises OSError when the
        source file changed since it was opened)."""
        import pyarrow as pa

        out, run, size = [], [], 0
        for seg in self.segments:
            if not getattr(seg, "in_file", False):
                out.extend(_binary_run(run))
                run, size = [], 0
                out.append(seg if pa.types.is_large_binary(seg.type)
                           else seg.cast(pa.large_binary()))
                continue
            vals = seg.values()
            blob = b"".join(vals)
            run.append((blob, np.fromiter(map(len, vals), np.int64, len(vals))))
            size += len(blob)
            if size > _RUN_BYTES:
                out.extend(_binary_run(run))
                run, size = [], 0
        out.extend(_binary_run(run))
        return pa.chunked_array(out, pa.large_binary())


_RUN_BYTES = 64 << 20


def _binary_run(run: list) -> list:
    """[] or one ``large_binary`` array of the (blob, lengths) pairs in ``run``."""
    if not run:
        return []
    import pyarrow as pa

    lengths = np.concatenate([r[1] for r in run])
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = pa.py_buffer(b"".join(r[0] for r in run))
    return [pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(lengths),
                                             [None, pa.py_buffer(offsets), data])]


def is_shared_ref(v) -> bool:
    return isinstance(v, dict) and len(v) == 1 and isinstance(v.get(SHARED), int)


@dataclass
class Trace:
    slices: Slices
    lanes: Lanes
    names: list[str]
    counters: Counters
    flows: Flows
    args: ArgsStore
    meta: TraceMeta
    #: the cache folder this trace was read from or written to (None: not cached); the
    #: analysis cache keeps its results there (see core/analysis/cache.py)
    cache_entry: object = field(default=None, compare=False, repr=False)
    #: results derived from the (immutable) columns and kept for the trace's lifetime, so
    #: analysis steps share them instead of recomputing: lane roles, run facts, self times...
    #: Always go through :meth:`memo`; keys are the deriving module's names.
    derived: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def memo(self, key: str, build):
        """``build()``'s result, computed once per trace under ``key`` (see :attr:`derived`)."""
        if key not in self.derived:
            self.derived[key] = build()
        return self.derived[key]

    # -- extent ---------------------------------------------------------------
    @property
    def start_ns(self) -> int:
        """Earliest slice start or counter sample (0 for an empty trace)."""
        cands = []
        if len(self.slices):
            cands.append(int(self.slices.start[0]))
        if len(self.counters):
            cands.append(int(self.counters.time.min()))
        return min(cands) if cands else 0

    @property
    def end_ns(self) -> int:
        """Latest slice end or counter sample."""
        cands = []
        if len(self.slices):
            cands.append(int(self.slices.end.max()))
        if len(self.counters):
            cands.append(int(self.counters.time.max()))
        return max(cands) if cands else 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    # -- lookups --------------------------------------------------------------
    def name_of(self, slice_index: int) -> str:
        return self.names[int(self.slices.name[slice_index])]

    def name_is_cut(self, slice_index: int) -> bool:
        """Whether ``names`` holds this slice's name cut (see :meth:`full_name`)."""
        return str(int(self.slices.name[slice_index])) in self.meta.extra.get(FULL_NAMES, {})

    def full_name(self, slice_index: int) -> str:
        """The slice's name uncut (``names`` holds names over ``MAX_NAME_CHARS`` cut)."""
        i = int(self.slices.name[slice_index])
        row = self.meta.extra.get(FULL_NAMES, {}).get(str(i))
        if isinstance(row, int):
            text = self.args.get_text(row)
            if text is not None:
                return text
        return self.names[i]

    def name_ids(self, predicate) -> np.ndarray:
        """Ids of names for which ``predicate(name)`` is true (over the string table)."""
        return np.fromiter(
            (i for i, n in enumerate(self.names) if predicate(n)), dtype=np.int32
        )

    @property
    def max_dur_ns(self) -> int:
        if not hasattr(self, "_max_dur"):
            self._max_dur = int(self.slices.dur.max()) if len(self.slices) else 0
        return self._max_dur

    def lane_slices(self, lane_id: int) -> np.ndarray:
        """Indexes of one lane's slices, in start order."""
        return np.flatnonzero(self.slices.lane == lane_id)

    def kind_counts(self) -> dict[str, int]:
        counts = np.bincount(self.slices.kind.astype(np.int64), minlength=len(Kind))
        return {Kind(k).label: int(n) for k, n in enumerate(counts) if n}

    def lane_event_counts(self) -> np.ndarray:
        """Slices per lane, plus counter samples for counter lanes."""
        counts = np.bincount(self.slices.lane, minlength=len(self.lanes)).astype(np.int64)
        if len(self.counters):
            per_series = np.bincount(self.counters.series, minlength=len(self.counters.table.name))
            np.add.at(counts, self.counters.table.lane, per_series)
        return counts

    @property
    def events(self) -> int:
        return len(self.slices) + len(self.counters)
