"""Nsight Systems SQLite exports (``nsys export --type sqlite report.nsys-rep``).

Times in the export are ns since the capture started; they are kept as they
are (the trace clock) and ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` becomes
``meta.epoch_offset_ns``. The schema follows nsys's export (3.x; columns an
older export lacks fall back to defaults): see ``nsys.activity`` for what each
table becomes.
"""

from __future__ import annotations

import math
from pathlib import Path

from ...builder import TraceBuilder
from ...errors import TraceFormatError
from ...progress import Progress
from ...trace import Trace
from ..confidence import Confidence
from .activity import LOADERS, TABLES, Ctx
from .db import NsysDb, OverBudget, StringIds, budget_for, connect, is_sqlite

_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_GPU_FIELDS = {"name": "name", "totalMemory": "total memory", "smCount": "SM count",
               "clockRate": "clock rate", "memoryBandwidth": "memory bandwidth",
               "busLocation": "bus", "uuid": "uuid", "cuDevice": "CUDA device",
               "chipName": "chip"}


def _is_nsys(tables: set[str]) -> bool:
    return "StringIds" in tables and bool(tables & set(TABLES))


class NsysSqliteImporter:
    name = "nsys"
    suffixes = (".sqlite", *_REPORT_SUFFIXES)

    def can_open(self, path: Path) -> Confidence:
        path = Path(path)
        if not path.is_file():
            return Confidence.NO
        if not is_sqlite(path):
            own = path.suffix in _REPORT_SUFFIXES
            return Confidence.OWN_SUFFIX if own else Confidence.NO
        import sqlite3  # here: only SQLite files need it

        try:
            con = connect(path)
            try:
                tables = NsysDb(con).tables
            finally:
                con.close()
        except sqlite3.Error:
            return Confidence.CONTAINER  # load() explains what is wrong
        return Confidence.SIGNATURE if _is_nsys(tables) else Confidence.CONTAINER

    def load(self, path: Path, progress: Progress) -> Trace:
        path = Path(path)
        if not is_sqlite(path):
            if path.suffix in _REPORT_SUFFIXES:
                raise TraceFormatError(path, "Nsight Systems report: export it with `nsys "
                                             "export --type sqlite` and open the .sqlite file")
            raise TraceFormatError(path, "not an SQLite file")
        import sqlite3

        try:
            con = connect(path)
        except sqlite3.Error as exc:
            raise TraceFormatError(path, f"cannot open SQLite file ({exc})") from None
        db = None
        try:
            db = NsysDb(con, progress, budget_for(path))
            return _load(path, db, progress)
        except sqlite3.Error as exc:
            stop = db.why_stopped(exc) if db is not None else None
            if isinstance(stop, OverBudget):
                raise TraceFormatError(path, str(stop)) from None
            if stop is not None:
                raise stop from None  # Cancel or Ctrl-C stopped the query
            raise TraceFormatError(path, f"unreadable SQLite data ({exc})") from None
        finally:
            con.close()


def _load(path: Path, db: NsysDb, progress: Progress) -> Trace:
    if not _is_nsys(db.tables):
        raise TraceFormatError(path, "SQLite file but not an Nsight Systems export"
                               + _what_it_is(db.tables))
    crafted = db.crafted()
    if crafted is not None:
        raise TraceFormatError(path, f"SQLite file not read: {crafted}")
    b = TraceBuilder(str(path), "nsys")
    ctx = Ctx(b, db, StringIds(db), progress)
    _meta(ctx)
    present = [t for t in TABLES if t in db.tables]
    counts = {t: db.count(t) for t in present}
    total = sum(counts.values()) or 1
    done = 0
    for t in present:
        share = (done / total, (done + counts[t]) / total)
        LOADERS[t](ctx, share)
        done += counts[t]
    absent = [t for t in TABLES if t not in db.tables]
    if absent:
        b.load_stats.notes.append("tables not in export (nothing of that kind recorded): "
                              + ", ".join(absent))
    if db.bad_rows:
        b.load_stats.skip("non-integer value in an integer column", db.bad_rows)
    progress.update(1.0, "building trace")
    trace = b.finish(progress=progress)
    if trace.events == 0:
        raise TraceFormatError(path, "Nsight Systems export with no CUDA or NVTX events")
    return trace


def _what_it_is(tables: set[str]) -> str:
    if "StringTable" in tables and any(t.startswith("CUPTI_ACTIVITY_KIND") for t in tables):
        return " (looks like an nvprof .nvvp profile)"
    if "StringIds" in tables:
        return " with CUDA or NVTX data (no CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS table)"
    return " (no StringIds or CUPTI_ACTIVITY_KIND_* tables)"


# -- metadata ---------------------------------------------------------------------------------
def _meta(ctx: Ctx) -> None:
    db, b = ctx.db, ctx.b
    if "TARGET_INFO_SESSION_START_TIME" in db.tables and \
            "utcEpochNs" in db.columns("TARGET_INFO_SESSION_START_TIME"):
        row = db.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        if row and row[0][0] is not None:
            b.meta.epoch_offset_ns = int(row[0][0])
    if "META_DATA_EXPORT" in db.tables:
        b.meta.extra["nsys"] = {str(k): str(v) for k, v in
                                db.rows("SELECT name, value FROM META_DATA_EXPORT")}
    b.meta.devices.update(_devices(db))
    if "PROCESSES" in db.tables and {"pid", "name"} <= db.columns("PROCESSES"):
        ctx.processes = {int(p): str(n) for p, n in
                         db.rows("SELECT pid, name FROM PROCESSES") if p is not None and n}
    if "ThreadNames" in db.tables and {"nameId", "globalTid"} <= db.columns("ThreadNames"):
        for name_id, gtid in db.rows("SELECT nameId, globalTid FROM ThreadNames"):
            if gtid is not None and name_id is not None:
                ctx.threads[int(gtid) & 0xFFFFFFFFFFFF] = ctx.strings.get(name_id)
    ctx.multi_process = _process_count(db) > 1
    if ctx.multi_process:
        b.load_stats.notes.append("several processes: correlation ids are made unique per process "
                              "(pid << 32 | correlationId)")
    if ctx.processes:
        b.meta.extra["processes"] = {str(k): v for k, v in ctx.processes.items()}


def _devices(db: NsysDb) -> dict[int, dict]:
    table = "TARGET_INFO_GPU"
    if table not in db.tables or "id" not in db.columns(table):
        return {}
    cols = ["id", *[c for c in _GPU_FIELDS if c in db.columns(table)]]
    have = db.columns(table)
    cc = "computeMajor" in have and "computeMinor" in have
    sql = f"SELECT {', '.join(cols)}" + (", computeMajor, computeMinor" if cc else "") + \
        f" FROM {table}"
    out = {}
    for row in db.rows(sql):
        props = {_GPU_FIELDS[c]: _plain(v) for c, v in zip(cols[1:], row[1:])
                 if _plain(v) is not None}
        if cc and row[-2] is not None:
            props["compute capability"] = f"{row[-2]}.{row[-1]}"
        out[int(row[0])] = props
    return out


def _plain(v):
    """A cell as a JSON-safe value: SQLite hands back blobs and infinite reals as they
    were stored, and meta goes to ``analyze --json`` and the cache manifest."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _process_count(db: NsysDb) -> int:
    pids = set()
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"):
        if t not in db.tables:
            continue
        col = "globalTid" if t.endswith("RUNTIME") else "globalPid"
        if col not in db.columns(t):
            continue
        sql = f"SELECT DISTINCT ({col} >> 24) & 16777215 FROM {t} LIMIT 3"
        pids.update(r[0] for r in db.rows(sql))
    return len(pids)


IMPORTER = NsysSqliteImporter()
