"""Decode one large plain JSON trace on several cores: the events array cut into parts.

Part ``k`` is decoded as a document of its own by a :class:`~.reader.FileReader` in a
process pool (part 0 in the calling process): part 0 is the file's text up to the
first cut plus ``]}``; a middle part is ``{"traceEvents":[`` + the events between two
cuts + ``]}``; the last part runs from its cut to the end of the file (its real
trailing keys). The array form (``[...]``) gets ``[`` and ``]`` instead.

**Why a wrong cut cannot give a wrong trace.** A cut is placed after a ``}`` that is
followed by ``,`` and ``{`` (blanks allowed), taken from the chain of boundaries the
serial reader's own pieces end at (:func:`plan`), so the parts decode the very pieces
the serial read would. Such a ``}`` may lie inside a string or inside an event's
args. Part 0 starts where the file does, so its start is right; if the start of
part ``k`` is right and its end is not between two events, the part's text ends
inside a string (left open) or inside containers below the events array (``]}``
closes at most two of them), and the part cannot decode as a complete document:
every decode path of :class:`~.decode.EventStream`, lenient ones included, raises
on a truncated document. So if every part but the last decodes completely, every
cut is right, by induction. Any failure (or a worker that dies, or a pool that
cannot start) makes the whole file be read again serially; nothing of a failed
attempt reaches the caller's tables.

**Same trace as the serial read.** Names are interned part by part (part 0's first),
text pids/tids/flow ids and categories are re-coded by their value, lanes merged by
(pid, tid) in order of first appearance, per-file dicts merged in part order with
later values winning, B/E events matched once after the merge; each part keeps its
own args array. The typed decoder the serial read would settle on decides how a
piece's events are grouped; a mix of tagged and untagged pieces falls back.
"""

from __future__ import annotations

import logging
import mmap
import os
import tempfile
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ...builder import TraceBuilder
from ...errors import TraceFormatError
from ...idle_work import idle_work_pending, run_idle_work
from ...progress import NullProgress, Progress
from ...trace import LoadStats
from ..args_spill import ArgsSpill, part_array
from ..source_args import on_demand
from ..spill_dir import part_dir
from .cores import usable_cpus
from .decode import OBJECT_SEP, EventStream
from .file_data import FileData, LaneInfo
from .ids import SYNTHETIC_BELOW, NameTable, pack, pack_one, unpack
from .reader import FileReader
from .workers import (
    WorkerDied,
    die_with_parent,
    exit_text,
    sigint_held,
    start_context,
    stop_pool,
    workers_of,
)

log = logging.getLogger(__name__)

#: Plain files at least this large are decoded in parallel
#: (``SOFA_GUI_PARALLEL_MIN_BYTES`` overrides it).
PARALLEL_MIN_BYTES = 64 << 20
#: Most parts (processes) one file is cut into.
MAX_PARTS = 8
_OBJECT = (b'{"traceEvents":[', b"]}")
_ARRAY = (b"[", b"]")


def _env_int(name: str) -> int | None:
    try:
        return int(float(os.environ[name]))
    except (KeyError, ValueError):
        return None


def decode_parts(size: int) -> int:
    """How many parts a plain file of ``size`` bytes is decoded in (1: serially).

    One per usable core: the affinity mask capped by the cgroup's CPU quota
    (:func:`.cores.usable_cpus`), so a container allowed one CPU's worth of time decodes
    in one process.
    ``SOFA_GUI_DECODE_PARTS`` forces the count (for tests and benchmarks); a process
    that may not start children (a daemonic one) decodes serially."""
    if size < 1 << 20 and not {"SOFA_GUI_DECODE_PARTS", "SOFA_GUI_PARALLEL_MIN_BYTES"} & set(
            os.environ):
        return 1  # (spares small files the multiprocessing import)
    import multiprocessing as mp

    if mp.current_process().daemon:
        return 1
    forced = _env_int("SOFA_GUI_DECODE_PARTS")
    if forced is not None:
        return max(1, min(forced, 64))
    least = _env_int("SOFA_GUI_PARALLEL_MIN_BYTES")
    if size < (PARALLEL_MIN_BYTES if least is None else least):
        return 1
    return min(usable_cpus(), MAX_PARTS)


@dataclass(frozen=True)
class Part:
    """Bytes ``[lo, hi)`` of the file, decoded as ``prefix + bytes + suffix``."""

    prefix: bytes
    lo: int
    hi: int
    suffix: bytes
    chunk: int  # the piece size the cuts were planned with

    def stream(self, path: Path) -> EventStream:
        src = _RangeReader(path, self)
        stream = EventStream(path, source=(src, src, self.hi - self.lo))
        stream.chunk = self.chunk
        stream.file_origin = self.lo - len(self.prefix)  # pieces' spans are file offsets
        return stream


class _RangeReader:
    """A file-like view of ``prefix + file[lo:hi] + suffix`` for :class:`EventStream`."""

    def __init__(self, path: Path, part: Part):
        self._f = open(path, "rb")
        self._f.seek(part.lo)
        self._left = part.hi - part.lo
        self._head, self._tail = part.prefix, part.suffix
        self._done = 0

    def read(self, n: int = -1) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        if self._left > 0:
            out = self._f.read(self._left if n is None or n < 0 else min(n, self._left))
            self._left = self._left - len(out) if out else 0
            self._done += len(out)
            return out
        out, self._tail = self._tail, b""
        return out

    def tell(self) -> int:
        return self._done

    def close(self) -> None:
        self._f.close()


def plan(path: Path, parts: int, lead_less: int = 0) -> list[Part] | None:
    """Cuts for ``parts`` parts of a plain JSON file, None when it cannot be cut
    (gzip, not a trace, too few events); ``lead_less``: see :func:`_choose`."""
    with open(path, "rb") as f:
        if f.read(2) == b"\x1f\x8b":
            return None  # gzip: decompressing to split would cost more than it saves
        size = os.fstat(f.fileno()).st_size
        probe = EventStream(path)
        try:
            first = probe.events_offset()
        except TraceFormatError:
            return None  # the serial read says what is wrong
        if first < 0 or size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            cuts = _boundaries(mm, first, probe.chunk)
    opening, closing = _OBJECT if probe.form == "object" else _ARRAY
    chosen = _choose(cuts, first, size, parts, lead_less)
    if not chosen:
        return None
    out = [Part(b"", 0, chosen[0][0], closing, probe.chunk)]
    for (_, lo), (hi, _) in zip(chosen, chosen[1:]):
        out.append(Part(opening, lo, hi, closing, probe.chunk))
    out.append(Part(opening, chosen[-1][1], size, b"", probe.chunk))
    return out


def _boundaries(mm, first: int, chunk: int) -> list[tuple[int, int]]:
    """(end of a piece, start of the next) where the serial reader's pieces meet:
    each piece ends at the first ``},{`` at least ``chunk`` bytes past its start."""
    out, start = [], first
    while True:
        m = OBJECT_SEP.search(mm, start + chunk)
        if m is None:
            return out
        out.append((m.start() + 1, m.end() - 1))
        start = m.end() - 1


#: Part 0's share of the events text against each other part's 1.0 (a worker's part
#: also pays for its start and for writing its columns back, the caller for reading them).
LEAD_SHARE = 1.1
#: Events text taken off part 0 when the caller has idle work registered
#: (:mod:`~sofa_gui.core.idle_work`: the CLI's analysis imports, ~0.2-0.3 s), which it
#: does while its workers finish. Measured on the 984k-event file (2 parts): with 12 MiB
#: the worker ended within +-0.2 s of the caller's part + imports; with none, 0.1-0.5 s
#: before, with 20 MiB (and LEAD_SHARE 1.0) 0.2-0.35 s after.
IDLE_WORK_BYTES = 12 << 20


def _choose(cuts: list[tuple[int, int]], first: int, size: int, parts: int,
            lead_less: int = 0) -> list[tuple[int, int]]:
    """``parts - 1`` of ``cuts``, each the nearest to its share of the events text: part 0
    (decoded by the caller) :data:`LEAD_SHARE` times the others less ``lead_less`` bytes,
    but at least half of what it would be without; the others equal."""
    chosen: list[tuple[int, int]] = []
    starts = [c[1] for c in cuts]
    text = size - first
    less = min(lead_less, LEAD_SHARE * text / (2 * (parts - 1)))
    unit = (text + less) / (LEAD_SHARE + parts - 1)
    for k in range(1, parts):
        target = first + int(unit * (LEAD_SHARE + k - 1) - less)
        i = bisect_left(starts, target)
        i = min(range(max(i - 1, 0), min(i + 1, len(cuts))),
                key=lambda j: abs(starts[j] - target), default=None)
        if i is not None and (not chosen or cuts[i][1] > chosen[-1][1]):
            chosen.append(cuts[i])
    return chosen


# -- the worker ------------------------------------------------------------------------
@dataclass
class PartResult:
    """What one part's reader found, with its own name ids and codes (its column arrays
    possibly still in a file: :func:`unship`)."""

    data: FileData
    names: list[str]  # the part's name ids -> text
    stats: LoadStats
    offsets: np.ndarray  # its args spill
    blob: bytes | None
    tagged: set[bool]  # whether its pieces were decoded with a tagged union


def read_part(path: str, part: Part, spill_path: str, on_demand: bool = False,
              columns_path: str | None = None) -> PartResult:
    """Decode one part (in a pool process): its own tables, B/E left unmatched; with
    ``columns_path``, its column arrays go back through that file (:func:`ship`)."""
    names = NameTable(TraceBuilder(path, "chrome"))
    stats = LoadStats()
    spill = ArgsSpill(spill_path)
    try:
        stream = part.stream(Path(path))
        data = FileReader(Path(path), names, stats, spill, on_demand).read(
            NullProgress(), stream=stream, finish=False)
        offsets, blob = spill.export()
    finally:
        spill.close()
    if columns_path is not None:
        ship(data, columns_path)
    return PartResult(data, names.texts(), stats, offsets, blob, _tagged(stream))


def _tagged(stream: EventStream) -> set[bool]:
    return {k < 2 for k in stream.decoders_used}  # event_types.DECODERS: 0, 1 tagged


# -- a part's columns back through a file ------------------------------------------------
class _Column(NamedTuple):
    """Where one array of a part's columns lies in its columns file."""

    at: int
    dtype: str
    shape: tuple


class _Shipper:
    """Writes arrays one after another (8-byte aligned) to an open file."""

    def __init__(self, f):
        self.f, self.at = f, 0

    def __call__(self, v):
        if not isinstance(v, np.ndarray) or v.dtype.hasobject:
            return v
        marker = _Column(self.at, v.dtype.str, v.shape)
        v = np.ascontiguousarray(v)  # (0-d arrays come out 1-d: the marker keeps the shape)
        self.f.write(v.data)
        pad = -v.nbytes % 8
        self.f.write(bytes(pad))
        self.at += v.nbytes + pad
        return marker


def _restore(buf):
    def get(v):
        if not isinstance(v, _Column):
            return v
        return np.frombuffer(buf, v.dtype, int(np.prod(v.shape)), v.at).reshape(v.shape)
    return get


def _swap_arrays(data: FileData, swap) -> None:
    """``swap`` every value of the slice chunks, flows and memory samples."""
    for d in (*data.chunks, *data.flows):
        for k, v in d.items():
            d[k] = swap(v)
    data.memory = [tuple(map(swap, m)) for m in data.memory]


def ship(data: FileData, path: str) -> None:
    """Write the part's column arrays to ``path``, :class:`_Column` markers in their
    place: the pool then pickles a few kB instead of ~25 MB per 500k events. Through
    its pipe those took 0.17-0.24 s after the worker was done, and competed with the
    caller's own decode for its GIL when they overlapped it."""
    with open(path, "wb") as f:
        _swap_arrays(data, _Shipper(f))


def unship(data: FileData, path: str) -> None:
    """Put back the arrays :func:`ship` wrote: writable (copy-on-write) views of the file
    mapped once; the caller may unlink it at once (the file is this process's own)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) if size else bytearray()
    _swap_arrays(data, _restore(buf))


# -- the parent ------------------------------------------------------------------------
def read_file(path: Path, names: NameTable, stats: LoadStats, spill: ArgsSpill,
              progress: Progress, lo: float = 0.0, hi: float = 1.0) -> FileData:
    """One file's data, decoded in parallel when it is a large plain file."""
    try:
        size = Path(path).stat().st_size
    except OSError:
        size = 0
    parts = decode_parts(size)
    if parts > 1:
        data = _read_parallel(Path(path), parts, names, stats, progress, lo, hi)
        if data is not None:
            return data
        log.debug("%s: read serially", path)
    return FileReader(path, names, stats, spill, on_demand()).read(progress, lo, hi)


def _read_parallel(path: Path, parts: int, names: NameTable, stats: LoadStats,
                   progress: Progress, lo: float, hi: float) -> FileData | None:
    """The merged data, or None when any part fails (the caller then reads serially)."""
    from concurrent.futures import ProcessPoolExecutor  # imported for large files only

    cuts = plan(path, parts, IDLE_WORK_BYTES if idle_work_pending() else 0)
    if cuts is None:
        return None
    spill_paths, columns_paths = [], []
    pool = None
    try:
        spill_paths = [_spill_file() for _ in cuts[1:]]
        columns_paths = [_spill_file("sofa-columns-part-") for _ in cuts[1:]]
        lazy = on_demand()
        with sigint_held():
            pool = ProcessPoolExecutor(max_workers=len(cuts) - 1, mp_context=start_context(),
                                       initializer=die_with_parent, initargs=(os.getpid(),))
            futures = [pool.submit(read_part, str(path), part, sp, lazy, cp)
                       for part, sp, cp in zip(cuts[1:], spill_paths, columns_paths)]
        own_stats, own_spill = LoadStats(), ArgsSpill()
        reader = FileReader(path, names, own_stats, own_spill, lazy)
        stream = cuts[0].stream(path)
        reader.read(_OnCores(progress, len(cuts)), lo, lo + (hi - lo) / len(cuts),
                    stream=stream, finish=False)
        results = _collect(futures, progress, workers_of(pool))
        tagged = set().union(_tagged(stream), *(r.tagged for r in results))
        if len(tagged) > 1:
            log.info("%s: parts decoded with different decoders; reading serially", path)
            return None
        if len({r.data.args_source is None for r in results} | {
                reader.data.args_source is None}) > 1:
            log.info("%s: parts disagree on reading args on demand; reading serially", path)
            return None
        arrays = [part_array(sp, r.offsets, r.blob) for sp, r in zip(spill_paths, results)]
        for r, cp in zip(results, columns_paths):
            unship(r.data, cp)
    except WorkerDied as exc:
        raise TraceFormatError(path, str(exc)) from None
    except (TraceFormatError, OSError, RuntimeError, EOFError, ValueError, MemoryError) as exc:
        log.info("%s: parallel decode not used (%s); reading serially", path, exc)
        return None
    finally:
        stop_pool(pool)
        for sp in (*spill_paths, *columns_paths):
            _unlink(sp)
    log.debug("%s: decoded in %d parts", path, len(cuts))
    return _merge(reader, own_spill, stats, results, arrays)


class _OnCores:
    """The reader's progress, its messages saying how many cores decode ("reading
    x.json on 2 cores"): the user sees the parallel read happen."""

    def __init__(self, progress: Progress, parts: int):
        self._progress, self._suffix = progress, f" on {parts} cores"

    def update(self, fraction: float, message: str = "") -> None:
        self._progress.update(fraction, message + self._suffix if message else message)

    def check_cancelled(self) -> None:
        self._progress.check_cancelled()


def _collect(futures: list, progress: Progress, workers: list) -> list[PartResult]:
    """Results in part order; raises the first worker error, or :class:`WorkerDied` within
    0.1 s of a worker's death (its half-sent result would block the pool's reader
    forever); cancellable meanwhile."""
    from concurrent.futures import FIRST_EXCEPTION, wait

    pending = set(futures)
    if not all(f.done() for f in futures):
        run_idle_work()  # e.g. the CLI's analysis imports, while the workers finish
    while pending:
        done, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
        for f in done:
            if f.exception() is not None:
                raise _as_error(f.exception())
        progress.check_cancelled()
        dead = [p for p in workers if p.exitcode is not None]
        if pending and dead:
            how = exit_text(dead[0].exitcode)
            raise WorkerDied(f"a decode worker ended while reading ({how}); nothing was loaded")
    return [f.result() for f in futures]


def _as_error(exc: BaseException) -> BaseException:
    """A worker's failure as one of the errors that mean "read serially"; an interrupt
    stays one."""
    if isinstance(exc, (TraceFormatError, OSError, RuntimeError, ValueError, MemoryError,
                        KeyboardInterrupt)):
        return exc
    return RuntimeError(f"decode worker failed: {exc!r}")


def _spill_file(prefix: str = "sofa-args-part-") -> str:
    fd, name = tempfile.mkstemp(prefix=prefix, dir=part_dir())
    os.close(fd)
    return name


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# -- merging ---------------------------------------------------------------------------
class _Codes:
    """A part's text pid/tid (or flow id) codes -> the merged table's codes; other
    codes (numbers, the reserved annotation/global codes) stay as they are."""

    def __init__(self, part_map: dict, table):
        self._keys = np.array(sorted(part_map), np.int64)
        self._vals = np.array([table.code(part_map[c]) for c in self._keys.tolist()], np.int64)

    def one(self, c: int) -> int:
        return int(self.many(np.array([c], np.int64))[0]) if len(self._keys) else c

    def many(self, codes: np.ndarray) -> np.ndarray:
        if not len(self._keys):
            return codes
        rows = np.flatnonzero(codes < SYNTHETIC_BELOW)
        if not len(rows):
            return codes
        pos = np.minimum(np.searchsorted(self._keys, codes[rows]), len(self._keys) - 1)
        hit = self._keys[pos] == codes[rows]
        out = codes.copy()
        out[rows[hit]] = self._vals[pos[hit]]
        return out


def _merge(reader: FileReader, own_spill: ArgsSpill, stats: LoadStats,
           results: list[PartResult], arrays: list) -> FileData:
    d = reader.data
    _add_stats(stats, reader.load_stats)
    lane_of = {pack_one(i.pid, i.tid): n for n, i in enumerate(d.lanes)}
    for r, arr in zip(results, arrays):
        _merge_part(reader, r, arr, lane_of)
        _add_stats(stats, r.stats)
    reader.load_stats = stats
    d.category_names = list(reader.cats.names)
    reader.finish_begin_end()
    own = own_spill.array()
    for chunk in d.chunks:
        chunk.setdefault("args", own)
    return d


def _add_stats(into: LoadStats, part: LoadStats) -> None:
    into.read += part.read
    for reason, n in part.skipped.items():
        into.skip(reason, n)
    into.notes.extend(part.notes)


def _merge_part(reader: FileReader, r: PartResult, args, lane_of: dict) -> None:
    d, p = reader.data, r.data
    ids, flow_ids = _Codes(p.ids.synthetic(), d.ids), _Codes(p.flow_ids.synthetic(), d.flow_ids)
    name_map = reader.names.ids(r.names)
    cat_map = np.array([reader.cats.code(c) for c in p.category_names] or [0], np.int32)
    lane_map = _merge_lanes(d, p, ids, lane_of)
    first_chunk = len(d.chunks)
    for chunk in p.chunks:
        chunk["lane"] = lane_map[chunk["lane"]]
        chunk["name"] = name_map[chunk["name"]]
        chunk["args"] = args
        d.chunks.append(chunk)
    for attr in ("process_names", "process_labels", "process_sort"):
        getattr(d, attr).update({ids.one(k): v for k, v in getattr(p, attr).items()})
    for attr in ("thread_names", "thread_sort"):
        getattr(d, attr).update({(ids.one(a), ids.one(b)): v
                                 for (a, b), v in getattr(p, attr).items()})
    for (pid, name), samples in p.counters.items():
        d.counters.setdefault((ids.one(pid), name), []).extend(samples)
    d.memory.extend((ids.many(m[0]), *m[1:]) for m in p.memory)
    for f in p.flows:
        pid, tid = unpack(f["key"])
        d.flows.append({**f, "key": pack(ids.many(pid), ids.many(tid)), "cat": cat_map[f["cat"]],
                        "id": flow_ids.many(f["id"])})
    d.bound_flows.extend((c + first_chunk, row, flow_ids.one(fid), fin, fout)
                         for c, row, fid, fin, fout in p.bound_flows)
    seq = len(d.begin_end)
    d.begin_end.extend((ids.one(pid), ids.one(tid), ts, s + seq, ph, int(name_map[name]), kind,
                        raw) for pid, tid, ts, s, ph, name, kind, raw in p.begin_end)
    d.header.update(p.header)
    d.notes.extend(p.notes)


def _merge_lanes(d: FileData, p: FileData, ids: _Codes, lane_of: dict) -> np.ndarray:
    """The part's local lanes -> merged lanes (new ones appended in the part's order)."""
    lane_map = np.empty(max(len(p.lanes), 1), np.int32)
    for n, info in enumerate(p.lanes):
        pid, tid = ids.one(info.pid), ids.one(info.tid)
        key = pack_one(pid, tid)
        at = lane_of.get(key)
        if at is None:
            at = lane_of[key] = len(d.lanes)
            d.lanes.append(LaneInfo(pid, tid, info.klass))
            d.lane_index.add(key, at)
        merged = d.lanes[at]
        if info.device_slices:
            if merged.device_slices == 0:
                merged.device, merged.stream = info.device, info.stream
            merged.device_slices += info.device_slices
        lane_map[n] = at
    return lane_map


__all__ = ["PARALLEL_MIN_BYTES", "Part", "decode_parts", "die_with_parent", "plan", "read_file",
           "read_part"]
