"""XProf / TSL ``XSpace`` protobufs (``*.xplane.pb``, or gzip-compressed ``*.xplane.pb.gz``):
TensorFlow and JAX profiles.

Schema: tsl/profiler/protobuf/xplane.proto. A space holds planes (``/host:CPU``,
``/device:GPU:N``, ``/device:TPU:N``, ...); a plane holds lines (threads, streams)
of events whose names and stats are interned in per-plane metadata maps. Event
start = ``line.timestamp_ns + offset_ps / 1000`` (ns, the trace clock). Read with
the small wire reader in :mod:`.wire`; no protobuf package needed.
"""

from __future__ import annotations

import json
import math
import re
from collections import ChainMap
from dataclasses import dataclass, field
from pathlib import Path

from ...builder import TraceBuilder
from ...errors import TraceFormatError
from ...kinds import copy_kind_from_name, is_collective
from ...progress import Progress
from ...trace import MAX_NAME_CHARS, SHARED, CopyKind, Kind, LaneKind, Trace
from ..confidence import Confidence
from ..opening import is_gzip, read_whole, sniff_head
from . import hlo
from . import wire as w
from .folder import SUFFIXES, describe_others, find_runs

_METADATA_PLANE = "/host:metadata"
_SKIPPED_PLANES = (_METADATA_PLANE, "Task Environment")
#: Decompressed bytes of a gzip file the sniffer reads (its size is known below this).
_SNIFF_BYTES = 1 << 16
#: ``meta.extra`` key: the XLA programs that ran in the capture, each summarised from
#: its HloProto (:func:`.hlo.summary`; ``hlo`` False where the capture has none).
XLA_PROGRAMS = "xla_programs"
#: At most this many distinct programs are noted as run.
_MAX_PROGRAMS = 512
_DEVICE = re.compile(r"^/device:(GPU|TPU|CUSTOM):(\d+)")
_STREAM = re.compile(r"Stream #(\d+)")
_RUNTIME = re.compile(r"^(cuda|cu|hip|hsa|nccl|rccl)[A-Z_]")
_COPY = re.compile(r"memcpy|MemcpyH2D|MemcpyD2H|MemcpyD2D|MemcpyP2P", re.I)
_NUM_BYTES = re.compile(r"num_bytes:\s*(\d+)")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
#: tf.data runs its iterators on threads named ``tf_data_iterator_resource/...`` and
#: ``tf_data_private_threadpool/...``; their lanes are grouped under this name.
_TF_DATA_THREAD = "tf_data"
TF_DATA_GROUP = "tf.data"
#: Stat names longer than this are cut in args keys (real ones are identifiers of a few
#: dozen characters); interned strings (``ref_value``) longer than ``_SHARE_TEXT`` are
#: stored once and referred to, so that no event copies a long string (a string many
#: events carry would otherwise cost its length per event).
_MAX_KEY = 100
_SHARE_TEXT = 32


@dataclass
class _Plane:
    id: int = 0
    name: str = ""
    lines: list = field(default_factory=list)  # spans
    event_names: dict = field(default_factory=dict)  # id -> name
    event_stats: dict = field(default_factory=dict)  # id -> [stat spans]
    stat_names: dict = field(default_factory=dict)  # id -> name
    meta_args: dict = field(default_factory=dict)  # event metadata id -> (stats, shared row)
    text_rows: dict = field(default_factory=dict)  # interned string id -> shared row


@dataclass
class _Line:
    id: int = 0
    name: str = ""
    display_name: str = ""
    timestamp_ns: int = 0
    events: list = field(default_factory=list)  # spans


_SPACE = {1: ("planes", w.SPAN), 4: ("hostnames", w.TEXT)}
_MAP_ENTRY = {1: ("key", w.INT64), 2: ("value", w.SPAN)}
_PLANE = {1: ("id", w.INT64), 2: ("name", w.TEXT), 3: ("lines", w.SPAN),
          4: ("event_metadata", w.SPAN), 5: ("stat_metadata", w.SPAN)}
_EVENT_METADATA = {1: ("id", w.INT64), 2: ("name", w.TEXT), 4: ("display_name", w.TEXT),
                   5: ("stats", w.SPAN)}
_STAT_METADATA = {1: ("id", w.INT64), 2: ("name", w.TEXT)}
_LINE = {1: ("id", w.INT64), 2: ("name", w.TEXT), 11: ("display_name", w.TEXT),
         3: ("timestamp_ns", w.INT64), 4: ("events", w.SPAN)}
_EVENT = {1: ("metadata_id", w.INT64), 2: ("offset_ps", w.INT64),
          5: ("num_occurrences", w.INT64), 3: ("duration_ps", w.INT64), 4: ("stats", w.SPAN)}
_STAT = {1: ("metadata_id", w.INT64), 2: ("double", w.DOUBLE), 3: ("uint64", w.UINT64),
         4: ("int64", w.INT64), 5: ("str", w.TEXT), 6: ("bytes", w.SPAN), 7: ("ref", w.UINT64)}
_STAT_VALUES = ("double", "uint64", "int64", "str", "bytes", "ref")


def _space_planes(buf: bytes) -> tuple[list, list[str]]:
    m = w.message(buf, (0, len(buf)), _SPACE, frozenset(("planes", "hostnames")), "XSpace")
    return m["planes"], m["hostnames"]


def _plane(buf: bytes, span) -> _Plane:
    m = w.message(buf, span, _PLANE,
                  frozenset(("lines", "event_metadata", "stat_metadata")), "XPlane")
    p = _Plane(id=m.get("id", 0), name=m.get("name", ""), lines=m["lines"])
    for events, entries in ((True, m["event_metadata"]), (False, m["stat_metadata"])):
        for entry in entries:
            kv = w.message(buf, entry, _MAP_ENTRY, name="XPlane metadata map")
            if "value" in kv:
                _metadata(buf, kv["value"], kv.get("key"), p, events)
    return p


def _metadata(buf: bytes, span, key, p: _Plane, events: bool) -> None:
    if events:
        m = w.message(buf, span, _EVENT_METADATA, frozenset(("stats",)), "XEventMetadata")
    else:
        m = w.message(buf, span, _STAT_METADATA, name="XStatMetadata")
    if key is None:
        key = m.get("id", 0)
    if events:
        p.event_names[key] = m.get("display_name") or m.get("name", "")
        if m["stats"]:
            p.event_stats[key] = m["stats"]
    else:
        p.stat_names[key] = m.get("name", "")


def _line(buf: bytes, span) -> _Line:
    m = w.message(buf, span, _LINE, frozenset(("events",)), "XLine")
    return _Line(id=m.get("id", 0), name=m.get("name", ""),
                 display_name=m.get("display_name", ""),
                 timestamp_ns=m.get("timestamp_ns", 0), events=m["events"])


def _event(buf: bytes, span):
    """(metadata_id, offset_ps or None when aggregated, duration_ps, stat spans)."""
    m = w.message(buf, span, _EVENT, frozenset(("stats",)), "XEvent")
    offset = None if "num_occurrences" in m else m.get("offset_ps", 0)
    return m.get("metadata_id", 0), offset, m.get("duration_ps", 0), m["stats"]


def _stat(buf: bytes, span, names: dict):
    """(name, JSON-safe value, interned string id or None) of one XStat."""
    m = w.message(buf, span, _STAT, name="XStat")
    value, ref = None, None
    for kind in _STAT_VALUES:  # a oneof: at most one is present
        if kind in m:
            value = m[kind]
            break
    if kind == "double" and not math.isfinite(value):
        value = None
    elif kind == "ref":  # ref_value names an interned string
        ref, value = value, names.get(value, value)
    elif kind == "bytes":
        value = f"<{value[1] - value[0]} bytes>"
    mid = m.get("metadata_id", 0)
    key = names.get(mid, f"stat#{mid}")
    return (key if len(key) <= _MAX_KEY else key[:_MAX_KEY] + "…"), value, ref


def _host_kind(name: str, stats: dict) -> Kind:
    if name.startswith("ProfilerStep#") or _step_num(stats) is not None:
        return Kind.ANNOTATION
    if "correlation_id" in stats or _RUNTIME.match(name):
        return Kind.RUNTIME
    if name.startswith("$"):  # XProf's Python tracer: "$file:line function"
        return Kind.PYTHON
    return Kind.CPU_OP


def _step_num(stats: dict) -> int | None:
    n = stats.get("step_num")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def step_marker_name(name: str, stats: dict) -> str:
    """TF/Keras step markers (``tf.profiler.experimental.Trace("train", step_num=i)``, the
    Keras ``train`` TraceMe, JAX ``StepTraceAnnotation``) as ``"train step 3"``: one name
    per step, recognised as a step annotation like ``ProfilerStep#3``."""
    n = _step_num(stats)
    if n is None:
        return name
    return f"{name} {n}" if name.lower().endswith("step") else f"{name} step {n}"


def _device_kind(line_name: str, name: str, stats: dict) -> tuple[Kind, CopyKind]:
    if not _STREAM.search(line_name):
        return Kind.ANNOTATION, CopyKind.NONE  # derived lines: XLA Ops/Modules, Steps
    if "memcpy_details" in stats or _COPY.search(name) or "Memcpy" in line_name:
        return Kind.MEMCPY, copy_kind_from_name(f"{name} {line_name}")
    if "memset" in name.lower() or "Memset" in line_name:
        return Kind.MEMSET, CopyKind.NONE
    if is_collective(name):
        return Kind.COMMUNICATION, CopyKind.NONE
    return Kind.KERNEL, CopyKind.NONE


def _int(value, default: int = -1) -> int:
    if isinstance(value, int) and _INT64_MIN <= value <= _INT64_MAX:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return min(int(value.strip()), _INT64_MAX)
    return default


def _copy_bytes(stats: dict) -> int:
    found = _NUM_BYTES.search(str(stats.get("memcpy_details", "")))
    if found:
        return min(int(found.group(1)), _INT64_MAX)
    return _int(stats.get("num_bytes", stats.get("bytes")))


class _Loader:
    """Reads one XSpace buffer into ``builder``; ``rank`` >= 0 when it is one host of
    several (its lanes are then grouped as ``rank R · host``)."""

    def __init__(self, path: Path, buf: bytes, progress: Progress,
                 builder: TraceBuilder | None = None, rank: int = -1, host: str = ""):
        self.path, self.buf, self.progress = path, buf, progress
        self.b = builder or TraceBuilder(str(path), "xplane")
        self.rank, self.host = rank, host
        self.hlo_spans: dict[str, tuple[int, int]] = {}  # "module(program id)" -> HloProto
        self.ran: set[tuple[str, int]] = set()  # (hlo_module, program_id) of events

    def run(self) -> Trace:
        self.read()
        self.progress.update(0.95, "building trace")
        return self.b.finish(progress=self.progress)

    def read(self, lo: float = 0.0, hi: float = 0.9) -> None:
        planes, hosts = _space_planes(self.buf)
        if not planes:
            raise TraceFormatError(self.path, "XSpace has no planes")
        if hosts:
            self.b.load_stats.notes.append("hosts: " + ", ".join(hosts[:8]))
        for k, span in enumerate(planes):
            self.progress.check_cancelled()
            self.progress.update(lo + (hi - lo) * k / len(planes), "reading planes")
            self.plane(_plane(self.buf, span))
        self.note_programs()

    def plane(self, p: _Plane) -> None:
        if p.name == _METADATA_PLANE:
            self.hlo_spans.update(self.programs(p))
        if p.name in _SKIPPED_PLANES:
            n = sum(len(_line(self.buf, s).events) for s in p.lines)
            self.b.load_stats.read += n
            self.b.load_stats.skip(f"metadata plane {p.name}", n)
            self.b.load_stats.notes.append(f"plane {p.name!r} skipped ({n} events): "
                                       "profiler metadata, not a timeline")
            return
        dev = _DEVICE.match(p.name)
        for span in p.lines:
            ln = _line(self.buf, span)
            if dev and int(dev.group(2)) < 4096:
                self.device_line(p, ln, dev.group(1), int(dev.group(2)))
            else:
                self.host_line(p, ln)

    def programs(self, p: _Plane) -> dict[str, tuple[int, int]]:
        """Where the metadata plane holds each compiled program's HloProto, by the name
        of its event (``module(program id)``)."""
        out = {}
        for mid, spans in p.event_stats.items():
            for span in spans:
                m = w.message(self.buf, span, _STAT, name="XStat")
                if p.stat_names.get(m.get("metadata_id")) == "Hlo Proto" and "bytes" in m:
                    out[p.event_names.get(mid, "")] = m["bytes"]
        return out

    def note_programs(self) -> None:
        """Summarise the programs that ran (their events name them) into
        ``meta.extra[XLA_PROGRAMS]``; a program whose HloProto is missing or unreadable is
        noted with ``hlo`` False."""
        noted = self.b.meta.extra.setdefault(XLA_PROGRAMS, [])
        read: dict[tuple[int, int], dict | None] = {}  # each HloProto read once
        for module, pid in sorted(self.ran):
            span = self.hlo_spans.get(f"{module}({pid})") or self.hlo_spans.get(module)
            if span is not None and span not in read:
                try:
                    read[span] = hlo.summary(self.buf, span)
                except w.WireError as exc:
                    self.b.load_stats.notes.append(f"HloProto of {module} unreadable: {exc}")
                    read[span] = None
            got = read.get(span) if span is not None else None
            noted.append({**(got or {}), "module": module, "program_id": pid,
                          "hlo": got is not None})

    def _lane(self, p: _Plane, ln: _Line, device: int | None, kind: str) -> int:
        label = ln.display_name or ln.name or f"line {ln.id}"
        prefix = f"rank {self.rank} · " if self.rank >= 0 else ""
        if device is None:
            group = "Host CPU" if p.name == "/host:CPU" else p.name
            if ln.name.startswith(_TF_DATA_THREAD):
                group = TF_DATA_GROUP
            return self.b.lane((self.rank, "host", p.id, p.name, ln.id), label, LaneKind.CPU,
                               prefix + group, rank=self.rank, pid=max(self.rank, 0),
                               tid=ln.id & 0xFFFFFFFF)
        found = _STREAM.search(ln.name)
        stream = int(found.group(1)) if found else ln.id & 0xFFFFFF
        sort = None if found else (2 << 49) | (device << 24) | 0xFFF000 | (ln.id & 0xFFF)
        if sort is not None and self.rank >= 0:
            sort |= (self.rank + 1) << 52
        return self.b.lane((self.rank, "dev", p.id, p.name, ln.id), label, LaneKind.GPU,
                           f"{prefix}{kind} {device}", rank=self.rank, device=device,
                           stream=stream, sort_key=sort)

    def host_line(self, p: _Plane, ln: _Line) -> None:
        rows = self.events(p, ln)
        if rows is None:
            return
        starts, durs, names, args, corr, stats_list = rows
        kinds = [int(_host_kind(n, s)) for n, s in zip(names, stats_list)]
        names = [step_marker_name(n, s) for n, s in zip(names, stats_list)]
        lane = self._lane(p, ln, None, "")
        self.b.add_slices(starts, durs, lane, names, args=args, kind=kinds, correlation=corr)

    def device_line(self, p: _Plane, ln: _Line, kind: str, device: int) -> None:
        rows = self.events(p, ln)
        if rows is None:
            return
        starts, durs, names, args, corr, stats_list = rows
        kinds, copies, nbytes = [], [], []
        for n, s in zip(names, stats_list):
            k, c = _device_kind(ln.name, n[:MAX_NAME_CHARS], s)  # regexes: never a huge name
            kinds.append(int(k))
            copies.append(int(c))
            nbytes.append(_copy_bytes(s) if k == Kind.MEMCPY else -1)
        lane = self._lane(p, ln, device, kind)
        found = _STREAM.search(ln.name)
        self.b.add_slices(starts, durs, lane, names, args=args, kind=kinds, copy_kind=copies,
                          bytes=nbytes, correlation=corr, device=device,
                          stream=int(found.group(1)) if found else -1)

    def events(self, p: _Plane, ln: _Line):
        """Columns of one line's timed events; aggregated or out-of-range ones are skipped."""
        starts, durs, names, args, corr, stats_list = [], [], [], [], [], []
        report = self.b.load_stats
        for span in ln.events:
            report.read += 1
            mid, offset, dur_ps, stat_spans = _event(self.buf, span)
            if offset is None:
                report.skip("aggregated event (num_occurrences, no timestamp)")
                continue
            start = ln.timestamp_ns + offset // 1000
            if not (_INT64_MIN < start < _INT64_MAX) or not (0 <= dur_ps < 1 << 62):
                report.skip("timestamp or duration out of range")
                continue
            meta, meta_row = self._meta_stats(p, mid)
            own, doc = self._stats(p, stat_spans)
            stats = ChainMap(own, meta) if meta else own
            if meta_row is not None:
                doc = {**doc, SHARED: [meta_row]}  # doc may be ``own`` itself
            starts.append(start)
            durs.append(dur_ps // 1000)
            names.append(p.event_names.get(mid, f"event #{mid}"))
            corr.append(_int(stats.get("correlation_id")))
            module = stats.get("hlo_module")
            if isinstance(module, str) and len(self.ran) < _MAX_PROGRAMS:
                self.ran.add((module[:MAX_NAME_CHARS], _int(stats.get("program_id"))))
            args.append(json.dumps(doc, separators=(",", ":")).encode() if doc else None)
            stats_list.append(stats)
        return (starts, durs, names, args, corr, stats_list) if starts else None

    def _stats(self, p: _Plane, spans) -> tuple[dict, dict]:
        """(name -> value, the same as stored: long interned strings as shared refs).

        One dict per event unless it has such strings (the second is then a copy)."""
        stats, refs = {}, {}
        for span in spans:
            key, value, ref = _stat(self.buf, span, p.stat_names)
            stats[key] = value
            if ref is not None and isinstance(value, str) and len(value) > _SHARE_TEXT:
                row = p.text_rows.get(ref)
                if row is None:
                    row = p.text_rows[ref] = self.b.share_text(value)
                refs[key] = {SHARED: row}
            else:
                refs.pop(key, None)  # a later stat of the same name replaced it
        return stats, ({**stats, **refs} if refs else stats)

    def _meta_stats(self, p: _Plane, mid: int) -> tuple[dict, int | None]:
        """Stats of event metadata ``mid``, read once and stored once (a shared args row):
        copied into each event they made a 1 MB file take 1.3 GB for 300 events."""
        got = p.meta_args.get(mid)
        if got is None:
            stats, doc = self._stats(p, p.event_stats.get(mid, ()))
            row = self.b.share_args(json.dumps(doc, separators=(",", ":")).encode()) \
                if doc else None
            got = p.meta_args[mid] = (stats, row)
        return got


class XPlaneImporter:
    name = "xplane"
    suffixes = (".xplane.pb", ".xplane.pb.gz", ".pb")

    def can_open(self, path: Path) -> Confidence:
        path = Path(path)
        if path.is_dir():
            return Confidence.CONTENT if find_runs(path) else Confidence.NO
        if not path.is_file():
            return Confidence.NO
        own = path.name.endswith(SUFFIXES)
        if not _sane_head(*_head(path)):
            # a file named as a capture is claimed anyway: its load says what is wrong
            # (not gzip, a truncated or corrupt gzip) rather than "not a trace file"
            return Confidence.NAME_ONLY if own and path.name.endswith(".gz") else Confidence.NO
        return Confidence.SIGNATURE if own else Confidence.NAME_ONLY

    def load(self, path: Path, progress: Progress) -> Trace:
        path = Path(path)
        if path.is_dir():
            return _load_folder(path, progress)
        return _load_file(path, progress, None)


def _head(path: Path) -> tuple[bytes, float]:
    """(first decompressed bytes, the decompressed size or an upper bound): gzip content
    is sniffed through the capped reader; its size is known when it ends within the head."""
    if not is_gzip(path):
        with open(path, "rb") as f:
            return f.read(16), path.stat().st_size
    head = sniff_head(path, _SNIFF_BYTES)
    return head, len(head) if len(head) < _SNIFF_BYTES else math.inf


def _load_file(path: Path, progress: Progress, builder: TraceBuilder | None,
               rank: int = -1, span: tuple[float, float] = (0.0, 0.9)) -> Trace | None:
    """One ``.xplane.pb`` (or gzip of one): a whole trace, or (with ``builder``) one
    host's lanes."""
    gz = is_gzip(path)
    buf = read_whole(path)
    if not buf:
        raise TraceFormatError(path, "file is empty" if not gz else "gzip data is empty")
    if not _sane_head(buf[:16], len(buf)):
        if path.name.endswith(".gz") and not gz:
            raise TraceFormatError(path, "not gzip data (the name ends in .gz but the file "
                                         "has no gzip header) nor an XSpace protobuf")
        raise TraceFormatError(path, "not an XSpace protobuf (first field is not a plane "
                                     "or host list)")
    try:
        loader = _Loader(path, buf, progress, builder, rank)
        if builder is None:
            return loader.run()
        loader.read(*span)
        return None
    except w.WireError as exc:
        raise TraceFormatError(path, f"corrupt or truncated XSpace protobuf: {exc}") from None
    except RecursionError:
        raise TraceFormatError(path, "XSpace protobuf nests too deeply") from None


def _load_folder(path: Path, progress: Progress) -> Trace:
    """The newest run below ``path``; its hosts become ranks when there are several."""
    runs = find_runs(path)
    if not runs:
        raise TraceFormatError(path, "no .xplane.pb (or .xplane.pb.gz) profile in this folder "
                                     "or below it")
    run = runs[-1]
    b = TraceBuilder(str(path), "xplane")
    several = len(run.files) > 1
    for k, f in enumerate(run.files):
        lo = 0.9 * k / len(run.files)
        _load_file(f, progress, b, k if several else -1, (lo, lo + 0.9 / len(run.files)))
    b.load_stats.notes.append(f"TensorBoard profile run {run.folder.name}: "
                          + ", ".join(f"{'rank ' + str(k) + ' = ' if several else ''}host {h}"
                                      for k, h in enumerate(run.hosts)))
    if len(runs) > 1:
        b.load_stats.notes.append(describe_others(run, runs, path))
    progress.update(0.95, "building trace")
    trace = b.finish(progress=progress)
    trace.meta.extra["profile_run"] = {"folder": str(run.folder), "hosts": run.hosts,
                                       "other_runs": [str(r.folder) for r in runs[:-1]]}
    if several:
        trace.meta.world_size = len(run.files)
    return trace


def _sane_head(head: bytes, size: int) -> bool:
    """First field is XSpace.planes..hostnames (wire type 2) with a length inside the file."""
    if len(head) < 2 or head[0] not in (0x0A, 0x12, 0x1A, 0x22):
        return False
    try:
        length, pos = w.read_varint(head, 1, len(head))
    except w.WireError:
        return False
    return pos + length <= size


IMPORTER = XPlaneImporter()
