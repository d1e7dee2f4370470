"""SOFA logdir importer: real logdirs checked against plain ``csv`` counts, plus synthetic files."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace, pick_importer
from sofa_gui.core.importers.sofa.logdir import IMPORTER
from sofa_gui.core.importers.sofa.slices import merge_stacks
from sofa_gui.core.progress import Cancelled, CancelToken
from sofa_gui.core.summary import trace_dict
from sofa_gui.core.trace import CopyKind, Kind, LaneKind

DATA = Path(__file__).resolve().parents[1] / "data"
DEMO = DATA / "sofa-demo-sofalog"
DEEPPROF = DATA / "sofa-deepprof-gputrace" / "gputrace.csv"
HEADER = ("timestamp,event,duration,deviceId,copyKind,payload,bandwidth,pkt_src,pkt_dst,pid,tid,"
          "name,category")


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _lane_slices(t, name: str) -> np.ndarray:
    lanes = [i for i, n in enumerate(t.lanes.name) if n == name]
    return np.flatnonzero(np.isin(t.slices.lane, lanes))


def _series(t, name: str) -> tuple[np.ndarray, np.ndarray]:
    return t.counters.samples(t.counters.table.name.index(name))


def _write(folder: Path, name: str, lines: list[str], header: str = HEADER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("\n".join([header, *lines]) + "\n")
    return p


# -- the real demo logdir -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo():
    return load_trace(DEMO, use_cache=False)


def test_demo_counts_match_plain_csv(demo):
    t = demo
    files = ["cputrace.csv", "strace.csv", "mpstat.csv", "vmstat.csv", "nvsmi_trace.csv"]
    assert t.meta.load_stats.read == sum(len(_rows(DEMO / f)) for f in files)
    assert not t.meta.load_stats.skipped
    # loaded counts records, as for every importer (derived means add events, not records)
    assert t.meta.load_stats.loaded == t.meta.load_stats.read < t.events
    cpu = _rows(DEMO / "cputrace.csv")
    threads = {(int(r["pid"]), int(r["tid"])) for r in cpu}
    cpu_lanes = {(int(t.lanes.pid[i]), int(t.lanes.tid[i])) for i in range(len(t.lanes))
                 if t.lanes.name[i].startswith("thread")}
    assert cpu_lanes == threads
    assert len(_lane_slices(t, "thread 7125")) == len(cpu)
    assert len(_lane_slices(t, "syscalls")) == len(_rows(DEMO / "strace.csv"))
    assert t.kind_counts() == {"other": len(cpu) + 2}
    assert (t.slices.dur >= 0).all()


def test_demo_times_are_exact_file_seconds(demo):
    t = demo
    first = _rows(DEMO / "cputrace.csv")[0]
    ts = int(first["timestamp"].replace(".", "")) * 1000  # exact decimal -> ns
    lane_idx = _lane_slices(t, "thread 7125")
    assert int(t.slices.start[lane_idx].min()) == ts
    assert t.meta.epoch_offset_ns == 0  # the demo was recorded with --absolute_timestamp
    d = trace_dict(t)
    all_ts = [float(r["timestamp"]) for f in ("mpstat.csv", "vmstat.csv", "cputrace.csv",
                                              "strace.csv", "nvsmi_trace.csv")
              for r in _rows(DEMO / f)]
    assert d["start_us"] == pytest.approx(min(all_ts) * 1e6, abs=0.5)
    assert d["format"] == "sofa"
    assert any("absolute_timestamp" in n for n in t.meta.load_stats.notes)


def test_demo_counters_per_core_and_vmstat_blocks(demo):
    t = demo
    mp = _rows(DEMO / "mpstat.csv")
    per_core = Counter(int(float(r["deviceId"])) for r in mp)
    for core, n in per_core.items():
        times, values = _series(t, f"CPU{core} util %")
        assert len(times) == n
    # first mpstat row: |  8|  8| 83|  0|  0| -> usr+sys+irq = 16
    assert _series(t, "CPU0 util %")[1][0] == 16
    vm = _rows(DEMO / "vmstat.csv")
    for name in ("vmstat blocks in/s", "vmstat context switches/s", "vmstat system %"):
        assert len(_series(t, name)[0]) == len(vm) // 8
    cs = [int(r["name"].split("cs=")[1].split("|")[0]) for r in vm[: len(vm) // 8]]
    assert _series(t, "vmstat context switches/s")[1].tolist() == cs
    for name in t.counters.table.name:
        sid = t.counters.table.name.index(name)
        assert t.lanes.kind[t.counters.table.lane[sid]] == LaneKind.COUNTER
    # old nvsmi rows carry SM and memory in one name: two samples per row
    nv = _rows(DEMO / "nvsmi_trace.csv")
    assert len(_series(t, "GPU0 SM util %")[0]) == len(nv)
    assert len(_series(t, "GPU0 memory util %")[0]) == len(nv)


def test_demo_missing_files_are_noted(demo):
    notes = " ".join(demo.meta.load_stats.notes)
    assert "not in folder:" in notes and "gputrace.csv" in notes
    assert demo.meta.extra["sofa_misc"]["vcores"] == 8


def test_single_csv_in_logdir_opens_alone():
    t = load_trace(DEMO / "cputrace.csv", use_cache=False)
    assert len(t.slices) == len(_rows(DEMO / "cputrace.csv"))
    assert t.meta.epoch_offset_ns == 0


# -- the 2017 six-column GPU trace ----------------------------------------------------------------
def _deepprof_rows() -> list[dict]:
    rows = _rows(DEEPPROF)
    return [r for r in rows if r["time_ms"] != "time_ms"]


def test_legacy_gputrace_counts_kinds_bytes():
    t = load_trace(DEEPPROF, use_cache=False)
    rows = _deepprof_rows()
    assert t.meta.load_stats.read == len(rows) and not t.meta.load_stats.skipped
    ck = Counter(int(r["copyKind"]) for r in rows)
    kinds = t.kind_counts()
    assert kinds["kernel"] == ck[-1] + ck[0]
    assert kinds["memcpy"] == ck[1] + ck[2] + ck[8] + ck[10]
    for code, kind in ((1, CopyKind.H2D), (2, CopyKind.D2H), (8, CopyKind.D2D),
                       (10, CopyKind.P2P)):
        assert int((t.slices.copy_kind == kind).sum()) == ck[code]
    copies = t.slices.kind == Kind.MEMCPY
    assert int(t.slices.bytes[copies].sum()) == sum(int(r["data_B"]) for r in rows
                                                    if int(r["copyKind"]) > 0)
    assert {int(s) for s in t.lanes.stream} == {int(r["streamId"]) for r in rows}
    assert all(k == LaneKind.GPU for k in t.lanes.kind)
    assert "kernel 5" in t.names
    assert t.slices.start.min() == min(int(r["time_ms"]) for r in rows) * 1_000_000
    i = int(np.flatnonzero(copies)[0])
    assert "event" in t.args.get(int(t.slices.args[i]))
    notes = " ".join(t.meta.load_stats.notes)
    assert "header line repeats 2 time(s)" in notes and "3 traces concatenated" in notes


# -- synthetic 13-column files --------------------------------------------------------------------
GPU_ROWS = [
    "0.100000,17,0.000200,1,0,0,0.000000,0,0,1,7,[gpu1]volta_sgemm_128x64_nn,0",
    "0.100300,102400017,0.000094,1,1,1024000,10.850000,0,1,1,14,[gpu1]CUDA_COPY_H2D_1024000B,0",
    "0.100500,51200017,0.000050,1,2,512000,9.5,1,0,1,14,[gpu1]CUDA_COPY_D2H_512000B,0",
    "0.100600,2048017,0.000010,2,8,20480,100.0,2,2,1,21,[gpu2]CUDA_COPY_D2D_20480B,0",
    "0.100700,4096017,0.000020,1,10,40960,50.0,1,2,1,7,[CUDA_COPY_P2P]from_gpu1_to_gpu2_40960B,0",
    "0.101000,17,0.000300,2,0,0,0.0,0,0,1,21,[gpu2]ncclAllReduceKernel_sum_f32,0",
    "0.101500,17,0.000100,1,0,0,0.0,0,0,1,7,[gpu1]volta_sgemm_128x64_nn,0",
]


def _synthetic(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sofa_time.txt").write_text("1000.250000000\n")
    _write(folder, "gputrace.csv", GPU_ROWS)
    _write(folder, "cuda_api_trace.csv", [
        "0.099000,17,0.000050,-1,0,0,0,0,0,1,-1,[CUDA_API]cudaLaunch,0",
        "0.099500,17,0.000900,-1,0,0,0,0,0,1,-1,[CUDA_API]cudaDeviceSynchronize,0"])
    _write(folder, "nettrace.csv", [
        "0.200000,146817,0.000011,-1,-1,1468,128000000,10000000001,10000000002,-1,-1,"
        "network:tcp:10000000001_to_10000000002_with_1468,0",
        "0.200100,6417,0.000001,-1,-1,64,128000000,10000000002,10000000001,-1,-1,"
        "network:tcp:10000000002_to_10000000001_with_64,0"])
    _write(folder, "netstat.csv", [
        "0.1,0,-1,-1,-1,-1,1250000.0,-1,-1,-1,-1,network_bandwidth_tx(bytes):1250000,0",
        "0.2,0,-1,-1,-1,-1,250000.0,-1,-1,-1,-1,network_bandwidth_tx(bytes):250000,0",
        "0.1,1,-1,-1,-1,-1,5000.0,-1,-1,-1,-1,network_bandwidth_rx(bytes):5000,0"])
    _write(folder, "diskstat.csv", [
        "0.300000,-1,0.1,nvme0n1,-1,4194304,40.0,-1,-1,-1,-1,"
        "diskstat_dev:nvme0n1 (read|write): |4194304|  0| bytes,0",
        "0.400000,-1,8192,-1,-1,-1,-1,-1,-1,-1,-1,"
        "diskstat_dev:sda (read|write): |4096|4096| bytes,0"])
    _write(folder, "nvsmi_trace.csv", [
        "0.1,0,87.000000,0,-1,-1,-1,-1,-1,-1,-1,GPUID_sm=0_87,0",
        "0.1,1,30.000000,0,-1,-1,-1,-1,-1,-1,-1,GPUID_mem=0_30,0",
        "0.1,0,12.000000,1,-1,-1,-1,-1,-1,-1,-1,GPUID_sm=1_12,0"])
    _write(folder, "pystacks.csv", [
        "0.0,-1,0.01,-1,-1,-1,-1,-1,-1,-1,-1,main.py:<module>:1<br>train.py:step:9,0",
        "0.01,-1,0.01,-1,-1,-1,-1,-1,-1,-1,-1,main.py:<module>:1<br>train.py:step:9,0",
        "0.02,-1,0.01,-1,-1,-1,-1,-1,-1,-1,-1,main.py:<module>:1<br>io.py:read:3,0"])
    return folder


@pytest.fixture
def synthetic(tmp_path):
    return load_trace(_synthetic(tmp_path / "sofalog"), use_cache=False)


def test_synthetic_gputrace_kinds_copies_streams(synthetic):
    t = synthetic
    gpu = np.flatnonzero(t.lanes.kind[t.slices.lane] == LaneKind.GPU)
    assert len(gpu) == len(GPU_ROWS)
    by_name = {t.name_of(i): i for i in gpu}
    assert "volta_sgemm_128x64_nn" in by_name  # [gpuN] prefix dropped
    h2d = by_name["CUDA_COPY_H2D"]
    assert t.slices.copy_kind[h2d] == CopyKind.H2D and t.slices.bytes[h2d] == 1024000
    assert t.slices.kind[h2d] == Kind.MEMCPY and t.slices.stream[h2d] == 14
    assert t.args.get(int(t.slices.args[h2d]))["bandwidth"] == pytest.approx(10.85)
    assert t.slices.copy_kind[by_name["CUDA_COPY_D2H"]] == CopyKind.D2H
    d2d = by_name["CUDA_COPY_D2D"]
    assert t.slices.copy_kind[d2d] == CopyKind.D2D and t.slices.device[d2d] == 1  # context 2
    assert t.slices.copy_kind[by_name["CUDA_COPY_P2P gpu1->gpu2"]] == CopyKind.P2P
    assert t.slices.kind[by_name["ncclAllReduceKernel_sum_f32"]] == Kind.COMMUNICATION
    kernel = by_name["volta_sgemm_128x64_nn"]
    assert t.slices.bytes[kernel] == -1 and t.slices.copy_kind[kernel] == CopyKind.NONE
    lanes = {(t.lanes.group[i], t.lanes.name[i]) for i in set(t.slices.lane[gpu].tolist())}
    assert lanes == {("GPU 0", "stream 7"), ("GPU 0", "stream 14"), ("GPU 1", "stream 21")}


def test_synthetic_relative_times_and_epoch(synthetic):
    t = synthetic
    assert t.meta.epoch_offset_ns == 1000_250_000_000
    sgemm = np.flatnonzero(t.slices.name == t.names.index("volta_sgemm_128x64_nn"))
    assert t.slices.start[sgemm].tolist() == [100_000_000, 101_500_000]
    assert t.slices.dur[sgemm].tolist() == [200_000, 100_000]
    assert trace_dict(t)["start_us"] == 0.0  # pystacks starts at 0.0 s


def test_synthetic_api_network_python_counters(synthetic):
    t = synthetic
    api = np.flatnonzero(t.slices.kind == Kind.RUNTIME)
    assert sorted(t.name_of(i) for i in api) == ["cudaDeviceSynchronize", "cudaLaunch"]
    net = np.flatnonzero(t.slices.kind == Kind.NETWORK)
    assert sorted(t.slices.bytes[net].tolist()) == [64, 1468]
    net_lanes = {t.lanes.name[i] for i in t.slices.lane[net]}
    assert net_lanes == {"10.0.0.1 → 10.0.0.2", "10.0.0.2 → 10.0.0.1"}
    assert all(t.lanes.kind[i] == LaneKind.NETWORK for i in t.slices.lane[net])
    py = np.flatnonzero(t.slices.kind == Kind.PYTHON)
    frames = sorted((t.name_of(i), int(t.slices.start[i]), int(t.slices.dur[i])) for i in py)
    assert frames == [("io.py:read:3", 20_000_000, 10_000_000),
                      ("main.py:<module>:1", 0, 30_000_000),
                      ("train.py:step:9", 0, 20_000_000)]
    assert _series(t, "network tx B/s")[1].tolist() == [1250000.0, 250000.0]
    assert _series(t, "network rx B/s")[1].tolist() == [5000.0]
    assert _series(t, "disk nvme0n1 MB/s")[1].tolist() == [40.0]
    assert _series(t, "disk sda read+write bytes per sample")[1].tolist() == [8192.0]
    assert _series(t, "GPU0 SM util %")[1].tolist() == [87.0]
    assert _series(t, "GPU0 memory util %")[1].tolist() == [30.0]
    assert _series(t, "GPU1 SM util %")[1].tolist() == [12.0]


def test_bad_rows_skipped_and_counted(tmp_path):
    folder = tmp_path / "bad"
    (folder).mkdir()
    _write(folder, "cputrace.csv", [
        "1.000000,14.0,0.000100,-1,-1,0,0,-1,-1,10,11,[cycles:]f+0x1(/bin/a),0",
        "oops,14.0,0.000100,-1,-1,0,0,-1,-1,10,11,[cycles:]f+0x2(/bin/a),0",
        "1.100000,14.0,,-1,-1,0,0,-1,-1,10,11,[cycles:]g+0x2(/bin/a),0",
        "1.200000,14.0,0.000100,-1,-1,0,0,-1,-1,10,11",
        HEADER,
        "1.300000,14.0,0.000100,-1,-1,0,0,-1,-1,10,12,[cycles:]g+0x9(/bin/a),0",
        "1.400000,14.0,0.000100,-1,-1,0,0,-1,-1,x,12,[cycles:]g+0x9(/bin/a),0",
    ])
    t = load_trace(folder, use_cache=False)
    rep = t.meta.load_stats
    assert rep.skipped == {"cputrace.csv: non-numeric timestamp": 1,
                           "cputrace.csv: missing duration": 1,
                           "cputrace.csv: wrong number of columns": 1,
                           "cputrace.csv: non-numeric pid": 1}
    assert rep.read == 6 and len(t.slices) == 2
    assert rep.read == len(t.slices) + rep.skipped_total
    assert sorted(t.names) == ["f (/bin/a)", "g (/bin/a)"]
    assert any("header line repeats 1" in n for n in rep.notes)
    assert t.meta.epoch_offset_ns is None  # no sofa_time.txt


def test_overlapping_samples_trimmed_not_hidden(tmp_path):
    folder = tmp_path / "ov"
    _write(folder, "cputrace.csv", [
        "1.000000,14.0,0.010000,-1,-1,0,0,-1,-1,10,11,a,0",
        "1.001000,14.0,0.010000,-1,-1,0,0,-1,-1,10,11,b,0",
        "1.001000,14.0,0.010000,-1,-1,0,0,-1,-1,10,12,c,0"])
    t = load_trace(folder, use_cache=False)
    assert dict(zip((t.name_of(i) for i in range(3)), t.slices.dur.tolist())) == {
        "a": 1_000_000, "b": 10_000_000, "c": 10_000_000}
    assert any("trimmed" in n for n in t.meta.load_stats.notes)


def test_unreadable_and_foreign_files_noted(tmp_path):
    folder = tmp_path / "mixed"
    _write(folder, "strace.csv", ["1.0,-1,0.5,-1,-1,-1,-1,-1,-1,5,5,read(3)=1,0"])
    (folder / "cputrace.csv").mkdir()  # exists but is not a file
    (folder / "mpstat.csv").write_text("a,b,c\n1,2,3\n")
    t = load_trace(folder, use_cache=False)
    notes = " ".join(t.meta.load_stats.notes)
    assert "cputrace.csv: not a regular file, not loaded" in notes
    assert "mpstat.csv: header is not SOFA's" in notes
    assert len(t.slices) == 1 and t.name_of(0) == "read"
    assert t.args.get(int(t.slices.args[0])) == {"call": "read(3)=1"}


def test_mixed_clocks_moved_onto_time_base(tmp_path):
    folder = tmp_path / "clk"
    folder.mkdir()
    (folder / "sofa_time.txt").write_text("1548903849.000000000\n")
    _write(folder, "strace.csv", ["2.500000,-1,0.5,-1,-1,-1,-1,-1,-1,5,5,read(3)=1,0"])
    _write(folder, "cputrace.csv", ["1548903850.000000,14,0.0001,-1,-1,0,0,-1,-1,1,1,f,0"])
    t = load_trace(folder, use_cache=False)
    starts = {t.name_of(i): int(t.slices.start[i]) for i in range(len(t.slices))}
    assert starts == {"read": 2_500_000_000, "f": 1_000_000_000}
    assert t.meta.epoch_offset_ns == 1548903849 * 10**9
    assert any("moved onto the sofa_time.txt time base" in n for n in t.meta.load_stats.notes)


def test_no_trace_data_is_a_format_error(tmp_path):
    only_time = tmp_path / "t1"
    only_time.mkdir()
    (only_time / "sofa_time.txt").write_text("1.0\n")
    with pytest.raises(TraceFormatError, match="no SOFA trace CSVs"):
        load_trace(only_time, use_cache=False)
    raw = tmp_path / "t2"
    raw.mkdir()
    (raw / "sofa_time.txt").write_text("1.0\n")
    (raw / "mpstat.txt").write_text("time,cpu\n")
    with pytest.raises(TraceFormatError, match="sofa preprocess"):
        load_trace(raw, use_cache=False)
    empty = tmp_path / "t3"
    _write(empty, "cputrace.csv", ["bad,1,1,1,1,1,1,1,1,1,1,x,0"])
    with pytest.raises(TraceFormatError, match="no usable rows"):
        load_trace(empty, use_cache=False)


def test_can_open_sniffs_content(tmp_path):
    assert IMPORTER.can_open(DEMO) >= 0.8
    assert IMPORTER.can_open(DEEPPROF) >= 0.8
    renamed = tmp_path / "whatever.txt"
    shutil.copy(DEEPPROF, renamed)
    assert IMPORTER.can_open(renamed) >= 0.8
    other = tmp_path / "x.csv"
    other.write_text("a,b\n1,2\n")
    assert IMPORTER.can_open(other) == 0
    assert IMPORTER.can_open(tmp_path) == 0
    assert pick_importer(DEMO).name == "sofa"


def test_cancel_stops_loading():
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        load_trace(DEMO, progress=token, use_cache=False)


def test_merge_stacks_splits_on_divergence():
    s, e, n = merge_stacks([["a", "b"], ["a", "c"], ["d"]], np.array([0, 10, 20]),
                           np.array([10, 20, 30]))
    assert sorted(zip(n, s, e)) == [("a", 0, 20), ("b", 0, 10), ("c", 10, 20), ("d", 20, 30)]


def test_cache_round_trip(tmp_path):
    folder = _synthetic(tmp_path / "cached")
    first = load_trace(folder)
    again = load_trace(folder)
    assert len(again.slices) == len(first.slices)
    assert again.meta.load_stats.notes == first.meta.load_stats.notes
    assert again.counters.table.name == first.counters.table.name


def test_strace_names_and_threads(tmp_path):
    folder = tmp_path / "st"
    _write(folder, "strace.csv", [
        '1.000000,-1,0.000200,-1,-1,-1,-1,-1,-1,-1,4330,'
        '"1550311783.488821mmap(NULL,262144,PROT_READ|PROT_WRITE)=0x7f50",0',
        '1.100000,-1,0.002113,-1,-1,-1,-1,-1,-1,4321,4331,"futex(0x7f..,FUTEX_WAIT,0,NULL)=0",0',
        "1.200000,-1,0.000100,-1,-1,-1,-1,-1,-1,4321,4331,???,0",
        "1.300000,-1,0.000100,-1,-1,-1,-1,-1,-1,4321,4331,close(3)=0"])
    t = load_trace(folder, use_cache=False)
    assert t.meta.load_stats.skipped == {"strace.csv: wrong number of columns": 1}
    lanes = {t.name_of(i): (t.lanes.group[t.slices.lane[i]], t.lanes.name[t.slices.lane[i]])
             for i in range(len(t.slices))}
    assert lanes == {"mmap": ("strace", "syscalls, thread 4330"),
                     "futex": ("process 4321", "syscalls, thread 4331"),
                     "???": ("process 4321", "syscalls, thread 4331")}
    calls = [t.args.get(int(a))["call"] for a in t.slices.args]
    assert calls[1] == "futex(0x7f..,FUTEX_WAIT,0,NULL)=0"


def test_unknown_file_name_guessed_from_content(tmp_path):
    gpu = _write(tmp_path / "a", "run7.csv", GPU_ROWS[:3])
    t = load_trace(gpu, use_cache=False)
    assert t.kind_counts() == {"kernel": 1, "memcpy": 2}
    cpu = _write(tmp_path / "b", "samples.csv",
                 ["1.0,14,0.001,-1,-1,0,0,-1,-1,3,4,[cycles:]f+0x1(/bin/a),0"])
    t = load_trace(cpu, use_cache=False)
    assert t.kind_counts() == {"other": 1} and t.lanes.name == ["thread 4"]
