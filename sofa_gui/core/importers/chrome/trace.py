"""Chrome Trace Event Format / PyTorch Kineto JSON importer (``.json``, ``.json.gz``).

Reads all three Kineto schema generations (2021 ``Operator/Runtime/Kernel`` with
flow cat ``async``; 2022 ``async_cpu_to_gpu``; current ``cpu_op/cuda_runtime/
kernel/gpu_memcpy`` with ``ac2g``) and plain Chrome traces (array or object
form; phases X, B/E, i/I, C, M, s/t/f and ``bind_id`` flows). Times stay on the
file's clock: ``ts`` µs x 1000 = ns. The pipeline: :mod:`.decode`
(streaming typed JSON decode) -> :mod:`.reader` (columns per piece) ->
:mod:`.lanes` (lanes, slices, counters into the builder) ->
:mod:`.flows` (flow binding after the sort). :func:`load_files` also
serves the rank-folder importer.
"""

from __future__ import annotations

import ctypes
import gc
from dataclasses import dataclass
from pathlib import Path

from ... import metadata
from ...builder import TraceBuilder
from ...progress import Progress, subrange
from ...trace import Trace
from ..args_spill import ArgsSpill
from ..confidence import Confidence
from ..opening import sniff_head
from .file_data import FileData
from .flows import link_flows
from .ids import NameTable
from .lanes import commit
from .parallel import read_file

_SUFFIXES = (".json", ".json.gz")
_KINETO_CATS = {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "operator", "runtime",
                "memcpy", "python_function", "cuda_driver", "ac2g", "async_cpu_to_gpu"}
EPOCH_US = (1e15, 4.1e15)  # ts in this range (2001..2100) are Unix epoch µs


def has_json_suffix(path: Path) -> bool:
    return path.name.lower().endswith(_SUFFIXES)


def sniff(path: Path) -> Confidence:
    """Confidence that ``path`` is a Chrome/Kineto trace, from its first 64 KiB."""
    if not path.is_file():
        return Confidence.NO
    head = sniff_head(path)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    suffix = has_json_suffix(path)
    unclear = Confidence.CONTAINER if suffix else Confidence.NO
    if text.startswith(b"{"):
        return Confidence.SIGNATURE if b'"traceEvents"' in head else unclear
    if text.startswith(b"["):
        rest = text[1:].lstrip()
        if rest.startswith(b"{") and b'"ph"' in head:
            return Confidence.CONTENT
        return unclear
    return Confidence.NAME_ONLY if suffix else Confidence.NO


@dataclass
class RankedFile:
    """A file to load and the rank its lanes get (-1: unknown)."""

    path: Path
    rank: int = -1
    rank_from: str = ""


class ChromeTraceImporter:
    name = "chrome"
    suffixes = (*_SUFFIXES, ".gz")  # any gzip file is sniffed by its content

    def can_open(self, path: Path) -> Confidence:
        return sniff(Path(path))

    def load(self, path: Path, progress: Progress) -> Trace:
        return load_files(Path(path), [Path(path)], progress, rank_of=rank_from_header)


IMPORTER = ChromeTraceImporter()


def rank_from_header(datas: list[FileData]) -> list[RankedFile]:
    out = []
    for d in datas:
        rank = header_rank(d.header)
        out.append(RankedFile(d.path, -1 if rank is None else rank,
                              "distributedInfo" if rank is not None else ""))
    return out


def header_rank(header: dict) -> int | None:
    info = header.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None


def load_files(source: Path, paths: list[Path], progress: Progress, rank_of) -> Trace:
    """Load Chrome/Kineto files into one trace; ``rank_of(datas)`` assigns ranks.

    The cyclic garbage collector is paused meanwhile: the parse makes millions of
    short-lived objects with no cycles, and collections would rescan them.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_files(source, paths, progress, rank_of)
    finally:
        if was_enabled:
            gc.enable()
        release_free_memory()


def release_free_memory() -> None:
    """Give the heap freed by the parse back to the OS (glibc keeps it otherwise).

    Parsing leaves many medium-sized freed blocks between live ones; without
    this the process stays tens of bytes per event larger than its data.
    """
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


def _load_files(source: Path, paths: list[Path], progress: Progress, rank_of) -> Trace:
    builder = TraceBuilder(str(source), "chrome")
    names = NameTable(builder)
    spill = ArgsSpill()
    try:
        datas = []
        for i, p in enumerate(paths):
            lo, hi = 0.85 * i / len(paths), 0.85 * (i + 1) / len(paths)
            datas.append(read_file(p, names, builder.load_stats, spill, progress, lo, hi))
        progress.update(0.86, "building lanes")
        args = spill.array()
        release_free_memory()
    finally:
        spill.close()
    ranked = rank_of(datas)
    shifts = _clock_shifts(datas, builder)
    pending = [commit(d, builder, args, r.rank, i, shifts[i])
               for i, (d, r) in enumerate(zip(datas, ranked))]
    progress.check_cancelled()
    progress.update(0.9, "sorting slices")
    trace = builder.finish(correlate=False, progress=progress)
    release_free_memory()
    progress.update(0.96, "linking flows")
    link_flows(trace, pending, builder.load_stats)
    _fill_meta(trace, datas, ranked, shifts)
    rep = trace.meta.load_stats
    rep.loaded = rep.read - rep.skipped_total
    subrange(progress, 0.96, 1.0).update(1.0, "loaded")
    return trace


def _clock_shifts(datas: list[FileData], builder: TraceBuilder) -> list[int]:
    """Per-file ns to add so files with different ``baseTimeNanoseconds`` share a clock."""
    bases = [_base_ns(d.header) for d in datas]
    known = [b for b in bases if b is not None]
    if len(set(known)) <= 1:
        return [0] * len(datas)
    lo = min(known)
    builder.load_stats.notes.append(
        "files have different baseTimeNanoseconds; times are shifted onto the earliest base")
    return [0 if b is None else b - lo for b in bases]


def _base_ns(header: dict) -> int | None:
    v = header.get("baseTimeNanoseconds")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _schema(categories: set[str]) -> str | None:
    if {"Operator", "Runtime", "Kernel"} & categories:
        return "2021"
    lower = {c.lower() for c in categories}
    if "async_cpu_to_gpu" in lower:
        return "2022"
    if lower & {"ac2g", "cpu_op", "cuda_runtime", "gpu_memcpy"}:
        return "current"
    return None


#: Trace metadata the run facts read, and the kind each must be.
HEADER_KINDS = {"cpu_cores": metadata.count, "cpu_busy_other_cores": metadata.amount,
                "cpu_core_interference": metadata.number,
                "cpu_batch_handover_us": metadata.amount,
                "cpu_batch_handover_tensor_us": metadata.amount,
                "cpu_batch_handover_mb_us": metadata.amount,
                "cpu_batch_send_us": metadata.amount,
                "cpu_batch_send_tensor_us": metadata.amount,
                "cpu_batch_send_mb_us": metadata.amount}


def _fill_meta(trace: Trace, datas: list[FileData], ranked: list[RankedFile],
               shifts: list[int]) -> None:
    meta = trace.meta
    cats = set().union(*(d.category_names for d in datas))
    kineto = any("schemaVersion" in d.header or "deviceProperties" in d.header for d in datas) \
        or bool({c.lower() for c in cats} & _KINETO_CATS)
    meta.format = "kineto" if kineto else "chrome"
    first = datas[0].header if datas else {}
    meta.extra["kineto_schema"] = _schema(cats) if kineto else None
    meta.extra["display_time_unit"] = first.get("displayTimeUnit")
    notes = [n for d in datas for n in d.notes]
    header = {k: v for d in datas for k, v in d.header.items()
              if isinstance(v, (str, int, float, bool)) and k not in meta.extra}
    meta.extra["header"] = metadata.check(header, HEADER_KINDS, "trace metadata", notes)
    meta.load_stats.notes.extend(dict.fromkeys(notes))
    infos = [d.header.get("distributedInfo") for d in datas]
    infos = [i for i in infos if isinstance(i, dict)]
    if infos:
        meta.extra["distributed"] = infos[0] if len(infos) == 1 else infos
        sizes = [i.get("world_size") for i in infos if isinstance(i.get("world_size"), int)]
        meta.world_size = max(sizes) if sizes else None
    for d in datas:
        for prop in d.header.get("deviceProperties") or []:
            if isinstance(prop, dict) and isinstance(prop.get("id"), int):
                meta.devices.setdefault(prop["id"], prop)
    if len(datas) > 1:
        meta.extra["files"] = [{"file": r.path.name, "rank": r.rank, "rank_from": r.rank_from}
                               for r in ranked]
    meta.epoch_offset_ns = _epoch_offset(trace, datas, shifts)


def _epoch_offset(trace: Trace, datas: list[FileData], shifts: list[int]) -> int | None:
    bases = [_base_ns(d.header) for d in datas]
    if all(b is not None for b in bases) and bases:
        return min(bases)
    if any(b is not None for b in bases) or not len(trace.slices):
        return None
    lo, hi = EPOCH_US
    start_us = trace.start_ns / 1000
    return 0 if lo <= start_us <= hi else None
