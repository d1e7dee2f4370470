"""Nsight Systems activity tables -> slices.

CUDA runtime calls and NVTX ranges go on CPU lanes per thread (``globalTid``);
kernels, memcpys and memsets on GPU lanes per (device, stream); CUPTI
synchronization records on a per-thread "CUDA sync" lane, attributed to the
thread of the API call that caused them (by correlation id). Launch flows come
from the builder's correlation matching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...builder import TraceBuilder
from ...kinds import copy_kind_from_name, is_collective
from ...progress import Progress, subrange
from ...trace import CopyKind, Kind, LaneKind
from ..grouping import group_rows, lane_ids
from ..json_args import json_rows, take_rows
from .db import PID, NsysDb, StringIds

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"
TABLES = (NVTX, RUNTIME, SYNC, KERNEL, MEMCPY, MEMSET)  # load order (lane order on ties)

# Documented values (nsys 2024.6 export schema 3.16.1), used when ENUM_* tables are absent.
MEMCPY_OPER = {0: ("CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"), 1: ("CUDA_MEMCPY_KIND_HTOD", ""),
               2: ("CUDA_MEMCPY_KIND_DTOH", ""), 3: ("CUDA_MEMCPY_KIND_HTOA", ""),
               4: ("CUDA_MEMCPY_KIND_ATOH", ""), 5: ("CUDA_MEMCPY_KIND_ATOA", ""),
               6: ("CUDA_MEMCPY_KIND_ATOD", ""), 7: ("CUDA_MEMCPY_KIND_DTOA", ""),
               8: ("CUDA_MEMCPY_KIND_DTOD", ""), 9: ("CUDA_MEMCPY_KIND_HTOH", ""),
               10: ("CUDA_MEMCPY_KIND_PTOP", ""), 11: ("CUDA_MEMCPY_KIND_UVM_HTOD", ""),
               12: ("CUDA_MEMCPY_KIND_UVM_DTOH", ""), 13: ("CUDA_MEMCPY_KIND_UVM_DTOD", "")}
MEM_KIND = {0: ("", "Pageable"), 1: ("", "Pinned"), 2: ("", "Device"), 3: ("", "Array"),
            4: ("", "Managed"), 5: ("", "Device Static"), 6: ("", "Managed Static"),
            7: ("", "Unknown")}
SYNC_TYPE = {0: ("", "Unknown"), 1: ("", "Event sync"), 2: ("", "Stream wait sync"),
             3: ("", "Stream sync"), 4: ("", "Context sync")}
EVENT_TYPE = {34: ("NvtxMark", "NvtxMark"), 59: ("NvtxPushPopRange", "NvtxPushPopRange"),
              60: ("NvtxStartEndRange", "NvtxStartEndRange")}

_API_VERSION = re.compile(r"_v\d+$")
_LOW32 = 0xFFFFFFFF


@dataclass
class Ctx:
    """What every table loader needs."""

    b: TraceBuilder
    db: NsysDb
    strings: StringIds
    progress: Progress
    threads: dict[int, str] = field(default_factory=dict)  # pid << 24 | tid -> name
    processes: dict[int, str] = field(default_factory=dict)
    multi_process: bool = False
    # runtime calls by (pid << 32 | correlationId), for attributing sync records
    api_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    api_thread: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def corr(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """Correlation ids repeat across processes; make them unique when there are several."""
        if not self.multi_process:
            return corr
        return np.where(corr >= 0, (pid << 32) | (corr & _LOW32), -1)


# -- lanes ------------------------------------------------------------------------------------
_TAG_LABEL = {"cpu": "", "nvtx": "NVTX", "sync": "CUDA sync"}


def thread_lanes(ctx: Ctx, tag: str, pidtid: np.ndarray) -> np.ndarray:
    """Lane per thread (``pid << 24 | tid``), named from ThreadNames / PROCESSES."""
    def make(key):
        pid, tid = key >> 24, key & 0xFFFFFF
        tname = ctx.threads.get(key, "")
        label = f"{tname} {tid}" if tname else f"thread {tid}"
        if tag != "cpu":
            label = f"{_TAG_LABEL[tag]}, {label}" if tid or tname else _TAG_LABEL[tag]
        pname = ctx.processes.get(pid, "")
        group = f"process {pid}" + (f" ({pname})" if pname else "")
        return dict(key=(tag, pid, tid), name=label, kind=LaneKind.CPU, group=group, pid=pid,
                    tid=tid)

    return lane_ids(ctx.b, [pidtid], make)


def gpu_lanes(ctx: Ctx, pid: np.ndarray, dev_stream: np.ndarray) -> np.ndarray:
    """Lane per (device, stream); per process too when several processes share GPUs."""
    def make(p, ds):
        dev, stream = ds >> 32, ds & _LOW32
        name = f"stream {stream}" + (f" (pid {p})" if ctx.multi_process else "")
        return dict(key=("gpu", p, dev, stream), name=name, kind=LaneKind.GPU,
                    group=f"GPU {dev}", pid=p if ctx.multi_process else -1, device=dev,
                    stream=stream)

    pid_key = pid if ctx.multi_process else np.zeros_like(pid)
    return lane_ids(ctx.b, [pid_key, dev_stream], make)


def _fetch(ctx: Ctx, table: str, cols: list[str], share: tuple[float, float],
           text: str | None = None, texts: list | None = None) -> np.ndarray:
    """Integer columns of ``table`` (plus one text column into ``texts``), with progress."""
    total = ctx.db.count(table)
    sql = f'SELECT {", ".join(cols + ([text] if text else []))} FROM "{table}"'
    ctx.b.load_stats.read += total
    return ctx.db.ints(sql, len(cols), subrange(ctx.progress, *share), total,
                       f"reading {table}", texts if text else None)


def _dev_stream(db: NsysDb, table: str) -> str:
    return (f"({db.col(table, 'deviceId')} << 32) | ({db.col(table, 'streamId')} & {_LOW32})")


def _common(db: NsysDb, table: str) -> list[str]:
    """start, end, device<<32|stream, correlationId, pid."""
    pid = PID if "globalPid" in db.columns(table) else "0"
    return ["start", "end", _dev_stream(db, table),
            db.col(table, "correlationId", default="-1"), pid]


def _note_negative(ctx: Ctx, table: str, start: np.ndarray, end: np.ndarray) -> None:
    neg = int((end < start).sum())
    if neg:
        ctx.b.load_stats.notes.append(
            f"{table}: {neg:,} rows end before they start; shown as 0 long")


# -- runtime ----------------------------------------------------------------------------------
def load_runtime(ctx: Ctx, share) -> None:
    """CUDA runtime API calls on their thread; correlation ids feed launch flows."""
    db = ctx.db
    v = _fetch(ctx, RUNTIME, ["start", "end", "globalTid & 281474976710655",
                              db.col(RUNTIME, "correlationId", default="-1"),
                              db.col(RUNTIME, "nameId", default="-1")], share)
    if not len(v):
        return
    start, end, pidtid, corr, name = v.T
    pid = pidtid >> 24
    names, _, _ = ctx.strings.name_ids(ctx.b, name, "(unknown API)",
                                       lambda s: _API_VERSION.sub("", s))
    lanes = thread_lanes(ctx, "cpu", pidtid)
    _note_negative(ctx, RUNTIME, start, end)
    ctx.b.add_slices(start, end - start, lanes, names, kind=int(Kind.RUNTIME),
                     stream=pidtid & 0xFFFFFF, correlation=ctx.corr(pid, corr))
    has = corr >= 0
    key = (pid[has] << 32) | (corr[has] & _LOW32)
    order = np.argsort(key, kind="stable")
    ctx.api_key, ctx.api_thread = key[order], pidtid[has][order]


# -- kernels ----------------------------------------------------------------------------------
def load_kernels(ctx: Ctx, share) -> None:
    """Kernels (collectives -> COMMUNICATION) with launch configuration in args."""
    db = ctx.db
    t = KERNEL
    name = db.col(t, "demangledName", "shortName", "mangledName", default="-1")
    pid_name = f"({PID if 'globalPid' in db.columns(t) else '0'} << 32) | ({name} & {_LOW32})"
    # grid: x 31 bits, y and z 16 bits; block x, y 11 bits, z 7, registers 10, shared mem 20
    grid = (f"({db.col(t, 'gridX')} & 2147483647) | (({db.col(t, 'gridY')} & 65535) << 31)"
            f" | (({db.col(t, 'gridZ')} & 65535) << 47)")
    launch = (f"({db.col(t, 'blockX')} & 2047) | (({db.col(t, 'blockY')} & 2047) << 11)"
              f" | (({db.col(t, 'blockZ')} & 127) << 22)"
              f" | (({db.col(t, 'registersPerThread')} & 1023) << 29)"
              f" | ((({db.col(t, 'staticSharedMemory')} + {db.col(t, 'dynamicSharedMemory')})"
              f" & 1048575) << 39)")
    v = _fetch(ctx, t, [*_common(db, t)[:4], pid_name, grid, launch], share)
    if not len(v):
        return
    start, end, ds, corr, pn, g, la = v.T
    pid = pn >> 32
    names, texts, inv = ctx.strings.name_ids(ctx.b, pn & _LOW32, "(unknown kernel)")
    collective = np.array([is_collective(x) for x in texts], bool)[inv]
    _note_negative(ctx, t, start, end)
    ctx.b.add_slices(start, end - start, gpu_lanes(ctx, pid, ds), names, args=_launch_args(g, la),
                     kind=np.where(collective, int(Kind.COMMUNICATION), int(Kind.KERNEL)),
                     device=ds >> 32, stream=ds & _LOW32, correlation=ctx.corr(pid, corr))


def _launch_args(grid: np.ndarray, launch: np.ndarray):
    """Kineto-style kernel args, rendered once per distinct launch configuration."""
    reps, key = group_rows(grid, launch)
    g, la = reps[:, 0], reps[:, 1]
    distinct = json_rows({
        "grid": (g & 2147483647, (g >> 31) & 65535, (g >> 47) & 65535),
        "block": (la & 2047, (la >> 11) & 2047, (la >> 22) & 127),
        "registers per thread": (la >> 29) & 1023, "shared memory": (la >> 39) & 1048575})
    return take_rows(distinct, key)


# -- memcpy / memset --------------------------------------------------------------------------
def _copy_code(name: str, label: str) -> str:
    """``CUDA_MEMCPY_KIND_UVM_HTOD`` -> ``UVM HtoD``; labels when the name is not standard."""
    prefix = "CUDA_MEMCPY_KIND_"
    if not name.startswith(prefix):
        return label or name or "Unknown"
    code = name[len(prefix):].replace("TO", "to").replace("_", " ")
    return "Unknown" if code == "UNKNOWN" else code


def load_memcpy(ctx: Ctx, share) -> None:
    """Copies named like Kineto's (``Memcpy HtoD (Pageable -> Device)``) with kind and bytes."""
    db = ctx.db
    t = MEMCPY
    cols = [*_common(db, t), db.col(t, "bytes"), db.col(t, "copyKind"),
            db.col(t, "srcKind", default="-1"), db.col(t, "dstKind", default="-1"),
            db.col(t, "srcDeviceId", default="-1"), db.col(t, "dstDeviceId", default="-1")]
    v = _fetch(ctx, t, cols, share)
    if not len(v):
        return
    start, end, ds, corr, pid, nbytes, ck, src, dst, src_dev, dst_dev = v.T
    oper = db.enum("ENUM_CUDA_MEMCPY_OPER", MEMCPY_OPER)
    mem = db.enum("ENUM_CUDA_MEM_KIND", MEM_KIND)
    combo = np.stack([ck, src, dst], axis=1)
    uniq, inv = np.unique(combo, axis=0, return_inverse=True)
    texts, kinds = [], []
    for c, s, d in uniq.tolist():
        code = _copy_code(*oper.get(c, ("", f"kind {c}")))
        where = (f" ({mem[s][1]} -> {mem[d][1]})" if s in mem and d in mem else "")
        texts.append(f"Memcpy {code}{where}")
        kinds.append(int(copy_kind_from_name(code)) if code != "Unknown" else int(CopyKind.OTHER))
    inv = inv.reshape(-1)
    names = ctx.b.intern_many(texts)[inv]
    reps, key = group_rows(src_dev, dst_dev)
    args = take_rows(json_rows({"src device": reps[:, 0], "dst device": reps[:, 1]}), key)
    _note_negative(ctx, t, start, end)
    ctx.b.add_slices(start, end - start, gpu_lanes(ctx, pid, ds), names, args=args,
                     kind=int(Kind.MEMCPY), device=ds >> 32, stream=ds & _LOW32,
                     bytes=nbytes, copy_kind=np.array(kinds, np.int8)[inv],
                     correlation=ctx.corr(pid, corr))


def load_memset(ctx: Ctx, share) -> None:
    db = ctx.db
    t = MEMSET
    v = _fetch(ctx, t, [*_common(db, t), db.col(t, "bytes"),
                        db.col(t, "memKind", default="-1")], share)
    if not len(v):
        return
    start, end, ds, corr, pid, nbytes, mk = v.T
    mem = db.enum("ENUM_CUDA_MEM_KIND", MEM_KIND)
    uniq, inv = np.unique(mk, return_inverse=True)
    texts = [f"Memset ({mem[k][1]})" if k in mem else "Memset" for k in uniq.tolist()]
    names = ctx.b.intern_many(texts)[inv.reshape(-1)]
    _note_negative(ctx, t, start, end)
    ctx.b.add_slices(start, end - start, gpu_lanes(ctx, pid, ds), names,
                     kind=int(Kind.MEMSET), device=ds >> 32, stream=ds & _LOW32,
                     bytes=nbytes, correlation=ctx.corr(pid, corr))


# -- synchronization --------------------------------------------------------------------------
def load_sync(ctx: Ctx, share) -> None:
    """CUPTI sync records on the thread whose API call waited (by correlation id)."""
    db = ctx.db
    t = SYNC
    v = _fetch(ctx, t, [*_common(db, t), db.col(t, "syncType")], share)
    if not len(v):
        return
    start, end, ds, corr, pid, stype = v.T
    kinds = db.enum("ENUM_CUPTI_SYNC_TYPE", SYNC_TYPE)
    uniq, inv = np.unique(stype, return_inverse=True)
    texts = []
    for k in uniq.tolist():
        label = kinds.get(k, ("", f"Sync type {k}"))[1]
        texts.append(label if "sync" in label.lower() else f"{label} sync")
    names = ctx.b.intern_many(texts)[inv.reshape(-1)]
    key = (pid << 32) | (corr & _LOW32)
    pos = np.minimum(np.searchsorted(ctx.api_key, key), max(len(ctx.api_key) - 1, 0))
    hit = (corr >= 0) & (len(ctx.api_key) > 0)
    if len(ctx.api_key):
        hit &= ctx.api_key[pos] == key
    pidtid = np.where(hit, ctx.api_thread[pos] if len(ctx.api_key) else 0, pid << 24)
    unmatched = int((~hit).sum())
    if unmatched:
        ctx.b.load_stats.notes.append(
            f"{t}: {unmatched:,} records without a matching CUDA API call "
            "are shown on a per-process 'CUDA sync' lane")
    _note_negative(ctx, t, start, end)
    ctx.b.add_slices(start, end - start, thread_lanes(ctx, "sync", pidtid), names,
                     kind=int(Kind.SYNC), device=ds >> 32, stream=ds & _LOW32,
                     correlation=ctx.corr(pid, corr))


# -- NVTX -------------------------------------------------------------------------------------
def load_nvtx(ctx: Ctx, share) -> None:
    """Push/pop and start/end ranges (and marks, 0 long) as ANNOTATION slices per thread."""
    db = ctx.db
    t = NVTX
    texts: list = []
    v = _fetch(ctx, t, ["start", db.col(t, "end", default="-1"),
                        db.col(t, "eventType", default="-1"),
                        f"{db.col(t, 'globalTid')} & 281474976710655",
                        db.col(t, "textId", default="-1")], share,
               text="text" if "text" in db.columns(t) else "NULL", texts=texts)
    if not len(v):
        return
    start, end, etype, pidtid, text_id = v.T
    types = db.enum("ENUM_NSYS_EVENT_TYPE", EVENT_TYPE)
    ranges = {k for k, (n, _) in types.items() if n in ("NvtxPushPopRange", "NvtxStartEndRange")}
    marks = {k for k, (n, _) in types.items() if n == "NvtxMark"}
    is_range = np.isin(etype, list(ranges))
    is_mark = np.isin(etype, list(marks))
    open_ended = is_range & (end < 0)
    keep = (is_range & ~open_ended) | is_mark
    ctx.b.load_stats.skip(f"{t}: range without an end", int(open_ended.sum()))
    for k in np.unique(etype[~is_range & ~is_mark]).tolist():
        label = types.get(k, (f"type {k}", ""))[0]
        ctx.b.load_stats.skip(f"{t}: {label} (not a range or mark)", int((etype == k).sum()))
    if not keep.any():
        return
    idx = np.flatnonzero(keep)
    names = [texts[i] if texts[i] is not None else ctx.strings.get(text_id[i], "(unnamed range)")
             for i in idx.tolist()]
    dur = np.where(is_mark[idx], 0, end[idx] - start[idx])
    _note_negative(ctx, t, np.zeros(len(idx), np.int64), dur)
    ctx.b.add_slices(start[idx], dur, thread_lanes(ctx, "nvtx", pidtid[idx]), names,
                     kind=int(Kind.ANNOTATION), stream=pidtid[idx] & 0xFFFFFF)


LOADERS = {NVTX: load_nvtx, RUNTIME: load_runtime, SYNC: load_sync, KERNEL: load_kernels,
           MEMCPY: load_memcpy, MEMSET: load_memset}
