"""A folder written by ``sofa-gui record``: counters, process tree, Kineto and py-spy.

Everything lands on one clock, Unix epoch ns (``meta.epoch_offset_ns == 0``):
the recorder's samples are already there; Kineto slices are shifted by the
file's ``baseTimeNanoseconds`` (its ``ts`` are µs since that base), py-spy's
by the recorded launch time. Counter lanes: machine CPU, per-core CPU, memory,
disk, network per interface, context switches, each GPU (utilisation, memory,
PCIe, power, SM clock) and the child's processes (CPU, RSS, threads, context
switches). A folder from a recorder that was killed (manifest ``running``,
parts not compacted) loads up to the last flush, with a note.

The folder layout constants below are shared with :mod:`sofa_gui.recorder`.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from ... import metadata
from ...builder import TraceBuilder, default_sort_key
from ...errors import TraceFormatError
from ...progress import NullProgress, Progress, subrange
from ...trace import FULL_NAMES, SAMPLED_LANES, SHARED, Kind, LaneKind, Trace, is_shared_ref
from ..confidence import Confidence
from . import guard
from .contract import (
    COUNTERS_FILE,
    COUNTERS_PARTS,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    PROCESSES_FILE,
    PROCESSES_PARTS,
    PYSPY_PATH,
    TORCH_DIR,
)

#: Display order of counter lanes (top to bottom), by lane-name prefix.
_LANE_ORDER = ["CPU", "CPU cores", "Memory", "Disk I/O", "Network", "Context switches",
               "GPU", "Process"]
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
_PYSPY_PROCESS = re.compile(r'^process (\d+):"?(.*?)"?$', re.DOTALL)
_PYSPY_THREAD = re.compile(r"^thread \((0x[0-9a-fA-F]+|\d+)\)(?::\s*(.*))?$")


class RecordingImporter:
    name = "recording"
    suffixes = ()  # a folder (or its manifest.json)

    def can_open(self, path: Path) -> Confidence:
        manifest = _manifest_path(Path(path))
        if manifest is None or not manifest.is_file() or manifest.stat().st_size > 16 << 20:
            return Confidence.NO
        if not guard.inside(manifest.parent, manifest):  # load() says why, reading nothing
            return Confidence.OWN_NAMES
        try:
            doc = json.loads(manifest.read_bytes())
        except ValueError:
            return Confidence.NO
        ours = isinstance(doc, dict) and doc.get("format") == FORMAT_NAME
        return Confidence.DECLARED if ours else Confidence.NO

    def load(self, path: Path, progress: Progress | None = None) -> Trace:
        progress = progress or NullProgress()
        folder = _manifest_path(Path(path)).parent
        manifest = _read_manifest(folder)
        b = TraceBuilder(folder, self.name)
        b.meta.epoch_offset_ns = 0
        progress.update(0.0, "reading counters")
        _load_counters(b, folder)
        progress.update(0.1, "reading process samples")
        _load_processes(b, folder, manifest)
        progress.check_cancelled()
        _load_kineto(b, folder, manifest, subrange(progress, 0.2, 0.9))
        _load_pyspy(b, folder, manifest)
        _describe(b, manifest)
        progress.update(0.95, "building the trace")
        trace = b.finish(progress=progress)
        progress.update(1.0, "recording loaded")
        return trace


IMPORTER = RecordingImporter()


# -- manifest -------------------------------------------------------------------------------
def _manifest_path(path: Path) -> Path | None:
    if path.is_dir():
        return path / MANIFEST
    return path if path.name == MANIFEST else None


def _read_manifest(folder: Path) -> dict:
    if not guard.inside(folder, folder / MANIFEST):
        raise TraceFormatError(folder, guard.outside_note(folder, folder / MANIFEST))
    try:
        doc = json.loads((folder / MANIFEST).read_bytes())
    except ValueError as exc:
        raise TraceFormatError(folder, f"{MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise TraceFormatError(folder, f"{MANIFEST} does not describe a sofa_gui recording")
    version = doc.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise TraceFormatError(folder, f"recording format version {version!r} is newer than "
                                       f"this program reads ({FORMAT_VERSION})")
    return doc


#: Manifest facts the analysis reads as numbers, and the kind each must be.
HOST_KINDS = {"physical_cores": metadata.count, "logical_cores": metadata.count,
              "memory_bytes": metadata.amount, "cpu_isa": metadata.cpu_isa}
RUN_KINDS = {"duration_s": metadata.amount}


def _describe(b: TraceBuilder, m: dict) -> None:
    notes = b.load_stats.notes
    host = m.get("host") if isinstance(m.get("host"), dict) else {}
    host = metadata.check(host, HOST_KINDS, f"{MANIFEST} host", notes)
    m = metadata.check(m, RUN_KINDS, MANIFEST, notes)
    for g in host.get("gpus") or []:
        if isinstance(g, dict) and isinstance(g.get("index"), int):
            b.meta.devices.setdefault(g["index"], {k: v for k, v in g.items() if k != "index"})
    sources = m.get("sources") or {}
    b.meta.extra["recording"] = {
        "status": m.get("status"),
        "command": m.get("command"),
        "cwd": m.get("cwd"),
        "start": m.get("start"),
        "end": m.get("end"),
        "duration_s": m.get("duration_s"),
        "exit": m.get("exit"),
        "host": {k: host.get(k) for k in ("hostname", "cpu_model", "cpu_isa",
                                          "physical_cores", "logical_cores", "memory_bytes",
                                          "core_interference", "batch_handover")},
        "sources": {k: {"recorded": bool(v.get("recorded")), "reason": v.get("reason")}
                    for k, v in sources.items() if isinstance(v, dict)},
    }
    if m.get("status") != "complete":
        b.load_stats.notes.append("recording incomplete: the recorder ended before finalising it; "
                              "data up to its last flush is shown")
    for k, v in sources.items():
        if isinstance(v, dict) and not v.get("recorded") and v.get("reason") and \
                not str(v["reason"]).startswith("not requested"):
            b.load_stats.notes.append(f"{k} not recorded: {v['reason']}")


# -- counters -------------------------------------------------------------------------------
def _read_table(folder: Path, single: str, parts_dir: str, b: TraceBuilder) -> pa.Table | None:
    """The compacted table, or the flushed parts of an unfinished recording."""

    whole = folder / single
    if whole.is_file():
        return _bounded_table(folder, whole, b)
    parts = sorted(p for p in (folder / parts_dir).glob("part-*.parquet") if p.is_file()) \
        if (folder / parts_dir).is_dir() else []
    tables = []
    for p in parts:
        try:
            table = _bounded_table(folder, p, b)
            if table is not None:
                tables.append(table)
        except (OSError, pa.ArrowException) as exc:
            b.load_stats.notes.append(f"{p.relative_to(folder)} unreadable, left out: {exc}")
            b.load_stats.read += 1  # its rows are unknown: the file counts as one event
            b.load_stats.skip("unreadable part file")
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive")


def _bounded_table(folder: Path, path: Path, b: TraceBuilder) -> pa.Table | None:
    """The Parquet table at ``path``; None (noted) when it is a link out of the folder or
    declares more than its file can hold (:mod:`.guard`)."""
    import pyarrow.parquet as pq

    why = guard.outside_note(folder, path) if not guard.inside(folder, path) else \
        guard.oversized(folder, path)
    if why is None:
        return pq.read_table(path)
    b.load_stats.notes.append(why)
    b.load_stats.read += 1
    b.load_stats.skip("table not read (link out of the folder or over its bound)")
    return None


def _strings(col) -> tuple[list[str], np.ndarray]:
    """(unique strings, int32 id per row) for a string or dictionary column.

    Each part file has its own dictionary; ids are mapped chunk by chunk onto one
    sorted vocabulary instead of unifying the dictionaries row by row.
    """
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    chunks = [c if pa.types.is_dictionary(c.type) else c.dictionary_encode() for c in chunks]
    vocab = sorted({w for c in chunks for w in c.dictionary.to_pylist()})
    pos = {w: i for i, w in enumerate(vocab)}
    out = []
    for c in chunks:
        remap = np.array([pos[w] for w in c.dictionary.to_pylist()] or [0], np.int32)
        out.append(remap[c.indices.to_numpy(zero_copy_only=False)])
    ids = np.concatenate(out) if out else np.zeros(0, np.int32)
    return [str(w) for w in vocab], ids


def _lane_sort(name: str, device: int) -> int:
    rank = max((i for i, p in enumerate(_LANE_ORDER) if name.startswith(p)), default=5)
    base = default_sort_key(LaneKind.COUNTER, -1, -1, -1, -1, -1)
    return base + (rank << 32) + (max(device, 0) << 16)


def _counter_lane(b: TraceBuilder, name: str, device: int = -1) -> int:
    group = f"GPU {device}" if device >= 0 else ("Processes" if name.startswith("Process")
                                                 else "Host")
    key = ("recording", name)
    if b.has_lane(key):
        return b.lane(key, name, LaneKind.COUNTER)
    sort = _lane_sort(name, device) + len(b._lanes)  # noqa: SLF001 - keep insertion order
    return b.lane(key, name, LaneKind.COUNTER, group, device=device, sort_key=sort)


def _load_counters(b: TraceBuilder, folder: Path) -> None:
    table = _read_table(folder, COUNTERS_FILE, COUNTERS_PARTS, b)
    if table is None or table.num_rows == 0:
        b.load_stats.notes.append("no counter samples in this recording")
        return
    b.load_stats.read += table.num_rows
    t = table["time_ns"].to_numpy().astype(np.int64)
    v = table["value"].to_numpy(zero_copy_only=False).astype(np.float64)
    dev = table["device"].to_numpy(zero_copy_only=False).astype(np.int64)
    series, sid = _strings(table["series"])
    lanes, lid = _strings(table["lane"])
    units, uid = _strings(table["unit"])
    finite = np.isfinite(v)
    b.load_stats.skip("counter sample is not a number", int((~finite).sum()))
    order = np.argsort(sid, kind="stable")  # rows were written in time order
    bounds = np.searchsorted(sid[order], np.arange(len(series) + 1))
    for s in range(len(series)):
        rows = order[bounds[s]:bounds[s + 1]]
        rows = rows[finite[rows]]
        if not len(rows):
            continue
        lane = _counter_lane(b, lanes[int(lid[rows[0]])], int(dev[rows[0]]))
        b.add_counter(series[s], units[int(uid[rows[0]])], lane, t[rows], v[rows])


def _load_processes(b: TraceBuilder, folder: Path, manifest: dict) -> None:
    table = _read_table(folder, PROCESSES_FILE, PROCESSES_PARTS, b)
    if table is None or table.num_rows == 0:
        return
    cols = {c: table[c].to_numpy(zero_copy_only=False) for c in
            ("time_ns", "since_ns", "pid", "cpu_percent", "rss_bytes", "threads",
             "ctx_switches_per_s")}
    names, nid = _strings(table["name"])
    pids = cols["pid"].astype(np.int64)
    lanes = {k: _counter_lane(b, f"Process {k}") for k in
             ("CPU", "RSS", "threads", "context switches")}
    specs = [("CPU", "cpu_percent", "since_ns", "CPU %", "%"),
             ("RSS", "rss_bytes", "time_ns", "RSS", "B"),
             ("threads", "threads", "time_ns", "threads", "threads"),
             ("context switches", "ctx_switches_per_s", "since_ns", "context switches", "1/s")]
    order = np.argsort(pids, kind="stable")  # one pass per process, not one scan each
    uniq, first = np.unique(pids[order], return_index=True)
    groups = _busiest(cols["cpu_percent"], np.split(order, first[1:]), b, len(uniq))
    for pid, rows in zip(uniq.tolist(), groups):
        if rows is None:
            continue
        label = f"{names[int(nid[rows[0]])]} [{pid}]"
        for lane_key, col, tcol, what, unit in specs:
            val = cols[col][rows].astype(np.float64)
            ok = np.isfinite(val)  # NaN: a rate on a process's first sample, not an event
            b.load_stats.read += int(ok.sum())
            if ok.any():
                b.add_counter(f"{label} {what}", unit, lanes[lane_key],
                              cols[tcol][rows][ok].astype(np.int64), val[ok])
    if len(uniq) > 1:
        _process_totals(b, cols, lanes)


#: Processes with series of their own; the others count in the process-tree totals only.
MAX_PROCESS_LANES = 256


def _busiest(cpu: np.ndarray, groups: list, b: TraceBuilder, n: int) -> list:
    """``groups`` (rows per process) with all but the MAX_PROCESS_LANES busiest (total
    CPU %) set to None, noted: 80k processes would be 320k series."""
    if n <= MAX_PROCESS_LANES:
        return groups
    load = np.array([np.nansum(cpu[rows]) for rows in groups])
    keep = set(np.argsort(-load, kind="stable")[:MAX_PROCESS_LANES].tolist())
    b.load_stats.notes.append(f"{n:,} processes: the {MAX_PROCESS_LANES} busiest have series "
                              "of their own, the others count in the process-tree totals")
    return [rows if i in keep else None for i, rows in enumerate(groups)]


def _process_totals(b: TraceBuilder, cols: dict, lanes: dict) -> None:
    """Whole-tree CPU % and RSS per sample time (derived, noted)."""
    for lane_key, col, tcol, name, unit in (("CPU", "cpu_percent", "since_ns",
                                             "process tree CPU %", "%"),
                                            ("RSS", "rss_bytes", "time_ns",
                                             "process tree RSS", "B")):
        val = cols[col].astype(np.float64)
        ok = np.isfinite(val)
        times, inv = np.unique(cols[tcol][ok].astype(np.int64), return_inverse=True)
        b.add_counter(name, unit, lanes[lane_key], times, np.bincount(inv, weights=val[ok]))
    b.load_stats.notes.append("process tree CPU % and RSS are sums over the tree's processes")


# -- Kineto ---------------------------------------------------------------------------------
def _kineto_files(folder: Path, notes: list[str]) -> list[Path]:
    d = folder / TORCH_DIR
    if not d.is_dir():
        return []
    # Regular files only: opening a FIFO left in the folder would block forever.
    return guard.own(folder, sorted(p for p in d.glob("kineto-*.json*")
                                    if not p.name.endswith(".status.json") and p.is_file()),
                     notes)


def _load_kineto(b: TraceBuilder, folder: Path, manifest: dict, progress: Progress) -> None:
    files = _kineto_files(folder, b.load_stats.notes)
    if not files:
        return
    try:
        from ..chrome.trace import IMPORTER as chrome
    except ModuleNotFoundError:
        b.load_stats.notes.append(f"{len(files)} Kineto trace(s) present but this build has no "
                              "Chrome/Kineto importer; not loaded")
        b.load_stats.skip("Kineto trace file not loaded (no importer)", len(files))
        return
    for k, path in enumerate(files):
        sub = subrange(progress, k / len(files), (k + 1) / len(files))
        try:
            kt = chrome.load(path, sub)
        except TraceFormatError as exc:
            b.load_stats.notes.append(f"{path.name}: not loaded: {exc.reason}")
            b.load_stats.skip("unreadable Kineto trace file")
            continue
        shift, how = _kineto_shift(path, kt)
        b.load_stats.notes.append(f"{path.name}: {len(kt.slices):,} events; clock: {how}")
        merge_trace(b, kt, shift, ("kineto", k))


def _kineto_shift(path: Path, kt: Trace) -> tuple[int, str]:
    """ns to add to the Kineto trace's clock to get Unix epoch ns, and how it was found."""
    if kt.meta.epoch_offset_ns is not None:
        return int(kt.meta.epoch_offset_ns), "importer's epoch offset"
    base = _header_base_time(path)
    if base is not None:
        return base, "baseTimeNanoseconds from the file"
    if kt.start_ns > 10 ** 18:
        return 0, "timestamps are already Unix epoch"
    status = path.with_name(path.name.split(".json")[0] + ".status.json")
    try:
        if not status.is_file() or not guard.inside(path.parent, status):
            raise FileNotFoundError(status)
        start = int(json.loads(status.read_text())["trace_start_ns"])
        return start - kt.start_ns, "aligned on the profiler's recorded start"
    except (OSError, ValueError, KeyError, TypeError):
        return 0, "unknown (left unshifted)"


def _header_base_time(path: Path) -> int | None:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return None
    m = _BASE_TIME.search(head)
    return int(m.group(1)) if m else None


def merge_trace(b: TraceBuilder, t: Trace, shift_ns: int, key) -> None:
    """Copy every slice, lane, flow and counter of ``t`` into ``b``, shifted by ``shift_ns``."""
    L = t.lanes
    lane_map = np.array([
        b.lane((key, i), L.name[i], LaneKind(int(L.kind[i])), L.group[i], rank=int(L.rank[i]),
               pid=int(L.pid[i]), tid=int(L.tid[i]), device=int(L.device[i]),
               stream=int(L.stream[i]), sort_key=int(L.sort_key[i]))
        for i in range(len(L))], dtype=np.int32)
    # metadata events (names, flows) fold into what they describe: count what became data
    b.load_stats.read += len(t.slices) + len(t.counters) + t.meta.load_stats.skipped_total
    for reason, n in t.meta.load_stats.skipped.items():
        b.load_stats.skip(reason, n)
    s = t.slices
    if len(s):
        names = b.intern_many(_full_names(t))
        backing = t.args.backing
        raw = backing.to_pylist() if hasattr(backing, "to_pylist") else list(backing)
        _move_shared_rows(b, raw, s.args)
        args = [raw[a] if a >= 0 else None for a in s.args.tolist()]
        rows = b.add_slices(s.start + shift_ns, s.dur, lane_map[s.lane], names[s.name],
                            args=args, kind=s.kind, device=s.device, stream=s.stream,
                            bytes=s.bytes, copy_kind=s.copy_kind, correlation=s.correlation)
        if len(t.flows):
            b.add_flows(rows[t.flows.src], rows[t.flows.dst], t.flows.kind)
    c = t.counters
    for sid, name in enumerate(c.table.name):
        ts, vs = c.samples(sid)
        b.add_counter(name, c.table.unit[sid], int(lane_map[c.table.lane[sid]]), ts + shift_ns,
                      vs)
    for r in t.meta.ranks:
        if r not in b.meta.ranks:
            b.meta.ranks.append(r)
    b.meta.world_size = b.meta.world_size or t.meta.world_size
    for dev, props in t.meta.devices.items():
        b.meta.devices.setdefault(dev, {}).update(props)


def _full_names(t: Trace) -> list[str]:
    """``t``'s string table with each cut name's full text (the builder cuts it again and
    keeps the full text in its own args store)."""
    names = list(t.names)
    for i, row in t.meta.extra.get(FULL_NAMES, {}).items():
        text = t.args.get_text(row) if str(i).isdigit() and int(i) < len(names) else None
        if text is not None:
            names[int(i)] = text
    return names


_SHARED_JSON = json.dumps(SHARED).strip('"').encode()


def _move_shared_rows(b: TraceBuilder, raw: list, owned: np.ndarray) -> None:
    """Copy the rows no slice owns (stored once, referred to by id: XPlane metadata
    stats, interned strings) into ``b`` and point the references in ``raw`` at them."""
    mine = np.zeros(len(raw), bool)
    mine[owned[(owned >= 0) & (owned < len(raw))]] = True
    if mine.all():
        return
    moved: dict[int, int] = {}

    def to(r):
        if not isinstance(r, int) or not 0 <= r < len(raw) or mine[r]:
            return -1  # bad or not a shared row: resolves to nothing, as before
        if r not in moved:
            moved[r] = b.share_args(raw[r] or b"{}")
        return moved[r]

    for i in np.flatnonzero(mine).tolist():
        if raw[i] and _SHARED_JSON in raw[i]:
            raw[i] = _with_refs_moved(raw[i], to)


def _with_refs_moved(row: bytes, to) -> bytes:
    try:
        d = json.loads(row)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return row
    if not isinstance(d, dict):
        return row
    refs = d.get(SHARED)
    if isinstance(refs, list):
        d[SHARED] = [to(r) for r in refs]
    for k, v in d.items():
        if is_shared_ref(v):
            d[k] = {SHARED: to(v[SHARED])}
    return json.dumps(d).encode()


# -- py-spy ---------------------------------------------------------------------------------
def _load_pyspy(b: TraceBuilder, folder: Path, manifest: dict) -> None:
    path = folder / PYSPY_PATH
    if not path.is_file():
        return
    if not guard.inside(folder, path):
        b.load_stats.notes.append(guard.outside_note(folder, path))
        return
    info = (manifest.get("sources") or {}).get("py_spy") or {}
    base = info.get("launch_epoch_ns") or (manifest.get("start") or {}).get("epoch_ns")
    if base is None:
        b.load_stats.notes.append(f"{PYSPY_PATH}: no launch time in the manifest; not loaded")
        return
    try:
        events = json.loads(path.read_bytes())
    except ValueError as exc:
        b.load_stats.notes.append(f"{PYSPY_PATH}: not valid JSON ({exc}); not loaded")
        b.load_stats.skip("unreadable py-spy file")
        return
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    if not isinstance(events, list):
        raise TraceFormatError(path, "py-spy output is not a list of trace events")
    pyspy_slices(b, events, int(base))


def pyspy_slices(b: TraceBuilder, events: list, base_ns: int) -> None:
    """Match py-spy's B/E events per thread into PYTHON slices on per-thread CPU lanes.

    One B/E pair is one read event; a stray E or a non-B/E event is read and skipped.
    The outermost ``process N:"cmd"`` and ``thread (tid): name`` frames (py-spy's
    ``--subprocesses --threads``) are labels, not samples: they name the lane and its
    group.
    """
    stacks: dict[tuple, list] = {}
    procs: dict[int, str] = {}
    threads: dict[tuple, str] = {}
    out = {"start": [], "dur": [], "lane": [], "name": []}
    last = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") not in ("B", "E"):
            b.load_stats.read += 1
            b.load_stats.skip("py-spy event that is not a B/E sample edge")
            continue
        try:
            ts, pid, tid = int(e["ts"]) * 1000, int(e["pid"]), int(e["tid"])
        except (KeyError, TypeError, ValueError):
            b.load_stats.read += 1
            b.load_stats.skip("py-spy event without ts/pid/tid")
            continue
        last = max(last, ts)
        stack = stacks.setdefault((pid, tid), [])
        if e["ph"] == "B":
            b.load_stats.read += 1
            stack.append((str(e.get("name", "")), ts))
            continue
        if not stack:
            b.load_stats.read += 1
            b.load_stats.skip("py-spy end without a begin")
            continue
        opened, t0 = stack.pop()
        m = _PYSPY_PROCESS.match(opened) if not stack else None
        if m:  # py-spy's process frame: names the lane group, is not a sample
            procs[pid] = m.group(2)
            b.load_stats.read -= 1
            continue
        m = _PYSPY_THREAD.match(opened) if len(stack) <= 1 else None
        if m:  # and its thread frame: names the lane
            threads[(pid, tid)] = f"{m.group(2) or 'thread'} {m.group(1)}"
            b.load_stats.read -= 1
            continue
        for k, x in zip(out, (base_ns + t0, ts - t0, _pyspy_lane(b, pid, tid), opened)):
            out[k].append(x)
    for (pid, tid), stack in stacks.items():  # py-spy closes all frames; be safe anyway
        for opened, t0 in stack:
            for k, x in zip(out, (base_ns + t0, last - t0, _pyspy_lane(b, pid, tid), opened)):
                out[k].append(x)
    for lane_id in set(out["lane"]):
        row = b._lanes[lane_id]  # noqa: SLF001 - named once the process and thread are known
        pid, tid = row["pid"], row["tid"]
        b.rename_lane(lane_id, name=f"py-spy {threads.get((pid, tid), f'thread {tid}')}",
                      group=f"py-spy: {_short_cmd(procs[pid])} [{pid}]" if pid in procs
                      else None)
    # Marker for the analyses: these lanes hold stack samples, not traced calls.
    sampled = b.meta.extra.setdefault(SAMPLED_LANES, [])
    sampled.extend(sorted(set(out["lane"]) - set(sampled)))
    if out["start"]:
        b.add_slices(out["start"], out["dur"], out["lane"], out["name"], kind=Kind.PYTHON)


def _short_cmd(cmdline: str) -> str:
    """``/usr/bin/python3 train.py --lr 1`` -> ``python3 train.py --lr 1`` (at most 60 chars)."""
    head, _, rest = " ".join(cmdline.split()).partition(" ")
    text = f"{head.rsplit('/', 1)[-1]} {rest}".strip()
    return text if len(text) <= 60 else text[:59] + "…"


def _pyspy_lane(b: TraceBuilder, pid: int, tid: int) -> int:
    return b.lane(("pyspy", pid, tid), f"py-spy thread {tid}", LaneKind.CPU,
                  f"py-spy [{pid}]", pid=pid, tid=tid)
