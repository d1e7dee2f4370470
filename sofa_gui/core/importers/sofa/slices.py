"""SOFA trace CSVs that become slices: GPU, CUDA API, perf samples, strace, Python, network.

Each ``load_*`` takes the builder, the parsed rows of one file and ``shift_ns``
(added to every timestamp to put the file on the trace clock). Column meanings
differ per file; they follow SOFA's ``sofa_preprocess.py`` (see
``../shared/reference/sofa-profiler.md`` section 2.3).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...builder import TraceBuilder
from ...kinds import is_collective
from ...trace import CopyKind, Kind, LaneKind
from ..grouping import lane_ids
from ..json_args import json_rows
from .csv_rows import CsvRows, NumericRows, reads, text_ids, text_values

#: SOFA / CUPTI memcpy kind -> CopyKind; 0 is a kernel, 3..7 and 9 are array/host copies.
_SOFA_COPY = {1: CopyKind.H2D, 2: CopyKind.D2H, 8: CopyKind.D2D, 10: CopyKind.P2P}
_COPY_LABEL = {CopyKind.H2D: "H2D", CopyKind.D2H: "D2H", CopyKind.D2D: "D2D",
               CopyKind.P2P: "P2P", CopyKind.OTHER: "OTHER"}


def _names(b: TraceBuilder, rows: CsvRows, clean) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(name id per row, cleaned distinct names, index into them per row)."""
    return _names_of(b, rows.columns["name"], clean)


def _names_of(b: TraceBuilder, col, clean=None) -> tuple[np.ndarray, list[str], np.ndarray]:
    uniq, idx = text_ids(col)
    if clean is None:
        clean = str
    cleaned = [clean(u) for u in uniq]
    ids = b.intern_many(cleaned) if cleaned else np.zeros(0, np.int32)
    return ids[idx], cleaned, idx


def _note_negative(b: TraceBuilder, file: str, dur: np.ndarray, why: str = "") -> None:
    neg = int((dur < 0).sum())
    if neg:
        b.load_stats.notes.append(f"{file}: {neg:,} negative durations shown as 0{why}")


# -- GPU trace (13 columns) -----------------------------------------------------------------
_GPU_PREFIX = re.compile(r"^\[gpu\d+\]")
_COPY_SIZE = re.compile(r"^(CUDA_COPY_(?:H2D|D2H|D2D))_\d+B$")
_P2P = re.compile(r"^\[CUDA_COPY_P2P\]from_gpu(\d+)_to_gpu(\d+)_\d+B$")
_API = "[CUDA_API]"


def _gpu_name(raw: str) -> str:
    """Drop the ``[gpuN]`` prefix and the byte count SOFA bakes into copy names."""
    name = _GPU_PREFIX.sub("", raw)
    m = _COPY_SIZE.match(name)
    if m:
        return m.group(1)
    m = _P2P.match(name)
    if m:
        return f"CUDA_COPY_P2P gpu{m.group(1)}->gpu{m.group(2)}"
    return name[len(_API):] if name.startswith(_API) else name


def copy_kinds(ck: np.ndarray) -> np.ndarray:
    """SOFA/CUPTI copyKind column -> CopyKind (NONE for kernels: 0 or -1)."""
    out = np.where(ck > 0, int(CopyKind.OTHER), int(CopyKind.NONE)).astype(np.int8)
    for code, kind in _SOFA_COPY.items():
        out[ck == code] = int(kind)
    return out


@reads("timestamp", "duration", "deviceId", "copyKind", "payload", "bandwidth", "pkt_src",
       "pkt_dst", "pid", "tid", "name")
def load_gputrace(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """nvprof GPU activity: kernels and copies on (context, stream) lanes."""
    is_api_raw = pc.starts_with(rows.columns["name"].cast(pa.string(), safe=False),
                                _API).to_numpy(zero_copy_only=False)
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.ns("duration")
    for col in ("copyKind", "deviceId", "payload", "bandwidth", "pkt_src", "pkt_dst", "pid",
                "tid"):
        nr.optional(col)
    v = nr.finish()
    is_api = is_api_raw[nr.kept]
    name_id, cleaned, idx = _names(b, rows, _gpu_name)
    start, dur = v["timestamp"] + shift_ns, v["duration"]
    _note_negative(b, rows.file, dur)
    if is_api.any():
        _add_api(b, start[is_api], dur[is_api], name_id[is_api], v["pid"][is_api],
                 v["tid"][is_api])
    g = ~is_api
    if not g.any():
        return
    copy_kind = copy_kinds(v["copyKind"][g].astype(np.int64))
    is_copy = copy_kind != CopyKind.NONE
    collective = np.array([is_collective(n) for n in cleaned], bool)[idx[g]]
    kind = np.where(is_copy, int(Kind.MEMCPY),
                    np.where(collective, int(Kind.COMMUNICATION), int(Kind.KERNEL)))
    ctx = v["deviceId"][g].astype(np.int64)
    device = np.maximum(ctx - 1, 0)
    stream = v["tid"][g].astype(np.int64)
    lanes = lane_ids(b, [device, stream], lambda d, s: dict(
        key=("gpu", d, s), name=f"stream {s}", kind=LaneKind.GPU, group=f"GPU {d}",
        device=d, stream=s))
    cols = dict(kind=kind, device=device, stream=stream, copy_kind=copy_kind,
                bytes=np.where(is_copy, v["payload"][g].astype(np.int64), -1))
    extra = {k: v[k][g] for k in ("bandwidth", "pkt_src", "pkt_dst")}
    _add_split(b, start[g], dur[g], lanes, name_id[g], cols, is_copy, lambda m: json_rows({
        "bandwidth": extra["bandwidth"][m], "pkt_src": extra["pkt_src"][m].astype(np.int64),
        "pkt_dst": extra["pkt_dst"][m].astype(np.int64), "context": ctx[m]}))
    b.load_stats.notes.append(f"{rows.file}: deviceId is nvprof's CUDA context (1-based); "
                          "context N is shown as GPU N-1")


def _add_split(b, start, dur, lanes, names, cols, with_args, make_args) -> None:
    """Add rows in two chunks: those with args (few, e.g. copies) and the rest."""
    for m, args in ((~with_args, None), (with_args, True)):
        if not m.any():
            continue
        b.add_slices(start[m], dur[m], lanes[m], names[m],
                     args=make_args(m) if args else None,
                     **{k: c[m] for k, c in cols.items()})


def _add_api(b, start, dur, name_id, pid, tid) -> None:
    pid = pid.astype(np.int64)
    tid = tid.astype(np.int64)
    lanes = lane_ids(b, [pid, tid], lambda p, t: dict(
        key=("cuda_api", p, t), kind=LaneKind.CPU, group="CUDA API",
        name=f"nvprof process #{p}" + (f" thread {t}" if t >= 0 else ""), pid=p, tid=t))
    b.add_slices(start, dur, lanes, name_id, kind=int(Kind.RUNTIME), stream=tid)


@reads("timestamp", "duration", "pid", "tid", "name")
def load_cuda_api(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """``cuda_api_trace.csv``: CUDA runtime calls (pid is nvprof's file ordinal)."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.ns("duration")
    nr.optional("pid")
    nr.optional("tid")
    v = nr.finish()
    name_id, _, _ = _names(b, rows, _gpu_name)
    _note_negative(b, rows.file, v["duration"])
    _add_api(b, v["timestamp"] + shift_ns, v["duration"], name_id, v["pid"], v["tid"])


# -- 2017 six-column GPU trace --------------------------------------------------------------
def load_legacy_gputrace(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """``time_ms,event,duration(ms),copyKind,data_B,streamId``; event is a kernel id."""
    nr = NumericRows(rows)
    nr.ns("time_ms", 6)
    nr.ns("duration(ms)", 6)
    nr.float("event")
    nr.float("copyKind")
    nr.float("streamId")
    nr.optional("data_B")
    v = nr.finish()
    n = len(v["event"])
    event = v["event"].astype(np.int64)
    copy_kind = copy_kinds(v["copyKind"].astype(np.int64))
    is_copy = copy_kind != CopyKind.NONE
    kernels, inv = np.unique(event, return_inverse=True)
    kernel_ids = b.intern_many([f"kernel {e}" for e in kernels.tolist()])
    copy_ids = b.intern_many([f"CUDA_COPY_{_COPY_LABEL.get(CopyKind(k), 'OTHER')}"
                              for k in range(len(CopyKind))])
    name_id = np.where(is_copy, copy_ids[copy_kind], kernel_ids[inv.reshape(-1)]) if n else inv
    stream = v["streamId"].astype(np.int64)
    lanes = lane_ids(b, [stream], lambda s: dict(
        key=("gpu", 0, s), name=f"stream {s}", kind=LaneKind.GPU, group="GPU 0", device=0,
        stream=s))
    cols = dict(kind=np.where(is_copy, int(Kind.MEMCPY), int(Kind.KERNEL)),
                device=np.zeros(n, np.int16), stream=stream, copy_kind=copy_kind,
                bytes=np.where(is_copy, v["data_B"].astype(np.int64), -1))
    _add_split(b, v["time_ms"] + shift_ns, v["duration(ms)"], lanes, name_id, cols, is_copy,
               lambda m: json_rows({"event": event[m]}))
    b.load_stats.notes.append(
        f"{rows.file}: 2017 six-column SOFA GPU trace (ms resolution, no device recorded: "
        "all streams shown as GPU 0; kernels named by their integer id)")
    if rows.header_repeats:
        b.load_stats.notes.append(
            f"{rows.file}: the header line repeats {rows.header_repeats} time(s) inside the "
            f"file ({rows.header_repeats + 1} traces concatenated); all rows are loaded on "
            "one timeline")


# -- perf samples ---------------------------------------------------------------------------
_EVENT_PREFIX = re.compile(r"^\[[\w.:\-]*:\]")
_SYM_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+(?=\(|$)")
_SYM_DSO = re.compile(r"^(.+?)(\([^()]*\))$")


def _sample_name(raw: str) -> str:
    """``[cycles:]sym+0x1a(dso)`` -> ``sym (dso)``: samples of one function share a name."""
    name = _SYM_OFFSET.sub("", _EVENT_PREFIX.sub("", raw))
    m = _SYM_DSO.match(name)
    return f"{m.group(1)} {m.group(2)}" if m else name


@reads("timestamp", "duration", "pid", "tid", "name")
def load_cputrace(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """perf samples as slices per (pid, tid); duration = SOFA's CPU-time estimate."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.ns("duration")
    nr.float("pid")
    nr.float("tid")
    v = nr.finish()
    name_id, _, _ = _names(b, rows, _sample_name)
    start, dur = v["timestamp"] + shift_ns, v["duration"]
    pid, tid = v["pid"].astype(np.int64), v["tid"].astype(np.int64)
    _note_negative(b, rows.file, dur, " (SOFA writes log2(ip/1e14) when `cycles` is not "
                   "recorded)")
    lanes = _thread_lanes(b, pid, tid, "cpu")
    dur, trimmed = trim_to_next(start, np.maximum(dur, 0), lanes)
    if trimmed:
        b.load_stats.notes.append(
            f"{rows.file}: {trimmed:,} sample durations (estimates: period / CPU MHz) trimmed "
            "to the next sample of the same thread")
    b.add_slices(start, dur, lanes, name_id, kind=int(Kind.OTHER), stream=tid)


def _thread_lanes(b, pid, tid, tag: str, what: str = "", fallback: str = "threads"):
    """One CPU lane per (pid, tid): ``[what, ]thread T`` under ``process P``."""
    def make(p, t):
        prefix = f"{what}, " if what else ""
        name = f"{prefix}thread {t}" if t >= 0 else (what or "thread ?")
        group = f"process {p}" if p >= 0 else fallback
        return dict(key=(tag, p, t), name=name, kind=LaneKind.CPU, group=group, pid=p, tid=t)

    return lane_ids(b, [pid, tid], make)


def trim_to_next(start: np.ndarray, dur: np.ndarray, lanes: np.ndarray) -> tuple[np.ndarray, int]:
    """Cap each slice at the next slice's start on the same lane (samples cannot overlap)."""
    if len(start) < 2:
        return dur, 0
    order = np.lexsort((start, lanes))
    s, ln = start[order], lanes[order]
    gap = np.full(len(s), np.iinfo(np.int64).max)
    same = ln[1:] == ln[:-1]
    gap[:-1][same] = s[1:][same] - s[:-1][same]
    capped = np.minimum(dur[order], gap)
    out = np.empty_like(dur)
    out[order] = capped
    return out, int((out < dur).sum())


# -- strace -------------------------------------------------------------------------------------
# SOFA joins the strace fields without spaces; with ``strace -f -o`` the text starts
# with the timestamp ("1550311783.488821mmap(NULL,...)=0x7f..").
_SYSCALL = r"^[\d.\s]*(?P<call>[A-Za-z_][A-Za-z0-9_]*)\("


@reads("timestamp", "duration", "pid", "tid", "name")
def load_strace(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """System calls per thread, named by the call; the full line is kept in args."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.ns("duration")
    nr.optional("pid")
    nr.optional("tid")
    v = nr.finish()
    text = rows.columns["name"].cast(pa.string(), safe=False)
    call = pc.struct_field(pc.extract_regex(text, _SYSCALL), "call")
    name = pc.coalesce(call, pc.utf8_slice_codeunits(text, 0, 40))
    name = pc.if_else(pc.equal(name, ""), "syscall", name)
    name_id, _, _ = _names_of(b, name)
    pid, tid = v["pid"].astype(np.int64), v["tid"].astype(np.int64)
    lanes = _thread_lanes(b, pid, tid, "strace", "syscalls", "strace")
    _note_negative(b, rows.file, v["duration"])
    b.add_slices(v["timestamp"] + shift_ns, v["duration"], lanes, name_id, kind=int(Kind.OTHER),
                 stream=tid, args=json_rows({"call": text}) if len(text) else None)


# -- Python stacks ------------------------------------------------------------------------------
@reads("timestamp", "duration", "name")
def load_pystacks(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """pyflame samples (frames root -> leaf, ``<br>``-joined) merged into a flame chart."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.ns("duration")
    v = nr.finish()
    stacks = [s.split("<br>") for s in text_values(rows.columns["name"])]
    start, dur = v["timestamp"] + shift_ns, np.maximum(v["duration"], 0)
    order = np.argsort(start, kind="stable")
    out_s, out_e, out_n = merge_stacks([stacks[i] for i in order], start[order],
                                       start[order] + dur[order])
    lane = b.lane(("py", -1, -1), "Python stacks", LaneKind.CPU, "Python")
    if out_s:
        b.add_slices(np.array(out_s), np.array(out_e) - np.array(out_s), lane, out_n,
                     kind=int(Kind.PYTHON))
    b.load_stats.notes.append(f"{rows.file}: {len(stacks):,} stack samples merged into "
                          f"{len(out_s):,} frame slices")


def merge_stacks(stacks: list[list[str]], start: np.ndarray, end: np.ndarray):
    """Consecutive samples sharing a stack prefix extend one slice per shared frame."""
    out_s: list[int] = []
    out_e: list[int] = []
    out_n: list[str] = []
    open_: list[list] = []  # [frame, start, end]
    for frames, s, e in zip(stacks, start.tolist(), end.tolist()):
        frames = [f for f in frames if f]
        k = 0
        while (k < len(open_) and k < len(frames) and open_[k][0] == frames[k]
               and open_[k][2] >= s):
            k += 1
        for frame, fs, fe in reversed(open_[k:]):
            out_n.append(frame)
            out_s.append(fs)
            out_e.append(fe)
        del open_[k:]
        for item in open_:
            item[2] = max(item[2], e)
        open_.extend([f, s, e] for f in frames[k:])
    for frame, fs, fe in reversed(open_):
        out_n.append(frame)
        out_s.append(fs)
        out_e.append(fe)
    return out_s, out_e, out_n


# -- packets ------------------------------------------------------------------------------------
_PROTO = re.compile(r"^network:([A-Za-z0-9]+):")


def ip_text(code: int) -> str:
    """SOFA's a*1e9 + b*1e6 + c*1e3 + d encoding back to dotted IPv4."""
    if code < 0:
        return "?"
    return ".".join(str((code // 1000**k) % 1000) for k in (3, 2, 1, 0))


@reads("timestamp", "duration", "payload", "pkt_src", "pkt_dst", "name")
def load_nettrace(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """tcpdump packets as NETWORK slices on one lane per source -> destination."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.ns("duration")
    nr.float("payload")
    nr.float("pkt_src")
    nr.float("pkt_dst")
    v = nr.finish()

    def proto(raw: str) -> str:
        m = _PROTO.match(raw)
        return m.group(1) if m else "packet"

    name_id, _, _ = _names(b, rows, proto)
    src, dst = v["pkt_src"].astype(np.int64), v["pkt_dst"].astype(np.int64)
    lanes = lane_ids(b, [src, dst], lambda s, d: dict(
        key=("net", s, d), name=f"{ip_text(s)} → {ip_text(d)}", kind=LaneKind.NETWORK,
        group="Network", pid=s, tid=d))
    _note_negative(b, rows.file, v["duration"])
    b.add_slices(v["timestamp"] + shift_ns, v["duration"], lanes, name_id,
                 kind=int(Kind.NETWORK), bytes=v["payload"].astype(np.int64))
