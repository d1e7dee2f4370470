"""Nsight Systems SQLite importer, on exports written by ``nsys_fixture`` (documented schema)."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace, pick_importer
from sofa_gui.core.importers.nsys.sqlite import IMPORTER
from sofa_gui.core.progress import Cancelled, CancelToken
from sofa_gui.core.summary import trace_dict
from sofa_gui.core.trace import CopyKind, Kind, LaneKind

sys.path.insert(0, str(Path(__file__).parent))
from nsys_fixture import BWD, EPOCH_NS, MAIN, PID, make_nsys_db  # noqa: E402


def _count(db: Path, sql: str) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


@pytest.fixture
def db(tmp_path) -> Path:
    return make_nsys_db(tmp_path / "report.sqlite")


@pytest.fixture
def trace(db):
    return load_trace(db, use_cache=False)


def _names(t, kind) -> list[str]:
    return sorted(t.name_of(i) for i in np.flatnonzero(t.slices.kind == kind))


def test_counts_match_sqlite(db, trace):
    t = trace
    k = t.kind_counts()
    assert k["runtime"] == _count(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    kernels = _count(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    nccl = _count(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                      "ON s.id = k.demangledName WHERE s.value LIKE 'nccl%'")
    assert k["kernel"] == kernels - nccl and k["communication"] == nccl == 1
    assert k["memcpy"] == _count(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    assert k["memset"] == _count(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")
    assert k["sync"] == _count(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    ranges = _count(db, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                        "AND end IS NOT NULL")
    marks = _count(db, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34")
    assert k["annotation"] == ranges + marks
    rep = t.meta.load_stats
    tables = ["CUPTI_ACTIVITY_KIND_" + x for x in
              ("RUNTIME", "KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION")] + ["NVTX_EVENTS"]
    assert rep.read == sum(_count(db, f"SELECT count(*) FROM {x}") for x in tables)
    assert rep.read == len(t.slices) + rep.skipped_total
    assert rep.skipped == {"NVTX_EVENTS: range without an end": 1,
                           "NVTX_EVENTS: NvtxDomainCreate (not a range or mark)": 1}
    assert (t.slices.dur >= 0).all()


def test_lanes_threads_streams(trace):
    t = trace
    lanes = {(t.lanes.group[i], t.lanes.name[i], LaneKind(int(t.lanes.kind[i])))
             for i in range(len(t.lanes))}
    group = f"process {PID} (python)"
    assert lanes == {
        (group, f"python3 {MAIN}", LaneKind.CPU),
        (group, f"pt_autograd_0 {BWD}", LaneKind.CPU),
        (group, f"NVTX, python3 {MAIN}", LaneKind.CPU),
        (group, f"CUDA sync, python3 {MAIN}", LaneKind.CPU),
        (group, "CUDA sync", LaneKind.CPU),
        ("GPU 0", "stream 7", LaneKind.GPU), ("GPU 0", "stream 8", LaneKind.GPU),
        ("GPU 1", "stream 14", LaneKind.GPU)}
    main = t.lanes.name.index(f"python3 {MAIN}")
    assert int(t.lanes.pid[main]) == PID and int(t.lanes.tid[main]) == MAIN
    order = [t.lanes.name[i] for i in t.lanes.display_order()]
    assert order.index(f"NVTX, python3 {MAIN}") < order.index(f"python3 {MAIN}")
    gpu = np.flatnonzero(t.lanes.kind[t.slices.lane] == LaneKind.GPU)
    assert set(t.slices.kind[gpu].tolist()) <= {int(k) for k in (
        Kind.KERNEL, Kind.COMMUNICATION, Kind.MEMCPY, Kind.MEMSET)}


def test_names_copies_and_args(trace):
    t = trace
    assert set(_names(t, Kind.RUNTIME)) == {"cudaLaunchKernel", "cudaMemcpyAsync",
                                           "cudaMemsetAsync", "cudaStreamSynchronize"}
    assert _names(t, Kind.MEMCPY) == ["Memcpy DtoH (Device -> Pinned)",
                                      "Memcpy HtoD (Pageable -> Device)",
                                      "Memcpy PtoP (Device -> Device)"]
    copies = {t.name_of(i): i for i in np.flatnonzero(t.slices.kind == Kind.MEMCPY)}
    h2d = copies["Memcpy HtoD (Pageable -> Device)"]
    assert t.slices.copy_kind[h2d] == CopyKind.H2D and t.slices.bytes[h2d] == 4096
    assert t.slices.copy_kind[copies["Memcpy DtoH (Device -> Pinned)"]] == CopyKind.D2H
    assert t.slices.copy_kind[copies["Memcpy PtoP (Device -> Device)"]] == CopyKind.P2P
    assert _names(t, Kind.MEMSET) == ["Memset (Device)"]
    assert _names(t, Kind.SYNC) == ["Context sync", "Stream sync"]
    assert _names(t, Kind.ANNOTATION) == ["ProfilerStep#1", "checkpoint", "forward"]
    gemm = [i for i in np.flatnonzero(t.slices.kind == Kind.KERNEL)
            if t.name_of(i).startswith("void gemm_kernel")]
    args = t.args.get(int(t.slices.args[gemm[0]]))
    assert args["grid"] == [64, 2, 1] and args["block"] == [128, 1, 1]
    assert args["registers per thread"] == 32 and args["shared memory"] == 1024
    mark = t.names.index("checkpoint")
    assert t.slices.dur[t.slices.name == mark].tolist() == [0]


def test_launch_flows_follow_correlation(db, trace):
    t = trace
    pairs = {(t.name_of(int(s)), int(t.slices.correlation[d]), t.name_of(int(d)))
             for s, d in zip(t.flows.src, t.flows.dst)}
    con = sqlite3.connect(db)
    expected = set()
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        for corr, api in con.execute(
                f"SELECT x.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_{table} x "
                "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = x.correlationId "
                "JOIN StringIds s ON s.id = r.nameId"):
            expected.add((api.split("_v")[0], corr))
    con.close()
    assert {(a, c) for a, c, _ in pairs} == expected
    assert len(t.flows) == len(expected) == 6
    for s, d in zip(t.flows.src, t.flows.dst):
        assert t.slices.kind[s] == Kind.RUNTIME
        assert t.lanes.kind[t.slices.lane[d]] == LaneKind.GPU
        assert t.slices.start[s] <= t.slices.start[d]


def test_sync_on_the_waiting_thread(trace):
    t = trace
    sync = {t.name_of(i): t.lanes.name[t.slices.lane[i]]
            for i in np.flatnonzero(t.slices.kind == Kind.SYNC)}
    assert sync == {"Stream sync": f"CUDA sync, python3 {MAIN}", "Context sync": "CUDA sync"}
    assert any("without a matching CUDA API call" in n for n in t.meta.load_stats.notes)


def test_meta_devices_epoch_times(trace):
    t = trace
    assert t.meta.format == "nsys"
    assert t.meta.epoch_offset_ns == EPOCH_NS
    assert t.meta.devices[0]["name"] == "NVIDIA H100 80GB HBM3"
    assert t.meta.devices[1]["compute capability"] == "9.0"
    assert t.meta.extra["nsys"]["EXPORT_SCHEMA_VERSION"] == "3.16.1"
    d = trace_dict(t)
    assert d["start_us"] == 0.09 and d["end_us"] == 0.96  # ns in the export / 1000


def test_without_enum_tables_same_result(tmp_path, trace):
    t2 = load_trace(make_nsys_db(tmp_path / "noenum.sqlite", enums=False), use_cache=False)
    assert sorted(t2.names) == sorted(trace.names)
    assert t2.slices.copy_kind.tolist() == trace.slices.copy_kind.tolist()
    assert t2.kind_counts() == trace.kind_counts()


def test_older_schema_missing_columns(tmp_path, trace):
    t2 = load_trace(make_nsys_db(tmp_path / "old.sqlite", old=True), use_cache=False)
    assert t2.kind_counts() == trace.kind_counts()
    assert _names(t2, Kind.ANNOTATION) == _names(trace, Kind.ANNOTATION)
    assert len(t2.flows) == len(trace.flows)


def test_several_processes_keep_flows_apart(tmp_path):
    other = 4321
    t = load_trace(make_nsys_db(tmp_path / "two.sqlite", second_pid=other), use_cache=False)
    assert len(t.flows) == 12
    for s, d in zip(t.flows.src, t.flows.dst):
        src_pid = int(t.lanes.pid[t.slices.lane[s]])
        dst_pid = int(t.lanes.pid[t.slices.lane[d]])
        assert src_pid == dst_pid
    groups = Counter(t.lanes.group)
    assert groups[f"process {other}"] >= 1
    assert any("unique per process" in n for n in t.meta.load_stats.notes)


def test_not_nsys_sqlite_is_a_format_error(tmp_path):
    p = tmp_path / "app.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    assert 0 < IMPORTER.can_open(p) < 0.5
    assert pick_importer(p).name == "nsys"
    with pytest.raises(TraceFormatError, match="SQLite file but not an Nsight Systems export"):
        load_trace(p, use_cache=False)


def test_nvprof_file_is_named(tmp_path):
    p = tmp_path / "gputrace123.nvvp"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE StringTable (_id_ INTEGER, value TEXT)")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match="nvprof"):
        load_trace(p, use_cache=False)


def test_report_file_and_corrupt_sqlite(tmp_path):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00QDSTRM binary report")
    assert IMPORTER.can_open(rep) > 0
    with pytest.raises(TraceFormatError, match="nsys export"):
        load_trace(rep, use_cache=False)
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + os.urandom(600))
    with pytest.raises(TraceFormatError):
        load_trace(bad, use_cache=False)


def test_empty_export_is_a_format_error(tmp_path):
    p = make_nsys_db(tmp_path / "empty.sqlite")
    con = sqlite3.connect(p)
    for table in ("KERNEL", "MEMCPY", "MEMSET", "RUNTIME", "SYNCHRONIZATION"):
        con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_{table}")
    con.execute("DELETE FROM NVTX_EVENTS")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match="no CUDA or NVTX events"):
        load_trace(p, use_cache=False)


def test_opened_read_only(db):
    before = (db.stat().st_size, db.stat().st_mtime_ns)
    load_trace(db, use_cache=False)
    assert (db.stat().st_size, db.stat().st_mtime_ns) == before
    assert sorted(x.name for x in db.parent.iterdir()) == ["report.sqlite"]


def test_cancel_and_progress(db):
    seen = []
    load_trace(db, progress=CancelToken(lambda f, m: seen.append(f)), use_cache=False)
    assert seen and seen[-1] == 1.0 and all(0 <= f <= 1 for f in seen)
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        load_trace(db, progress=token, use_cache=False)


def test_cache_round_trip(db):
    first = load_trace(db)
    again = load_trace(db)
    assert again.names == first.names and len(again.flows) == len(first.flows)
    assert again.meta.devices == first.meta.devices
