"""Chrome Trace Event / Kineto importer: real traces against plain-json counts, then edge cases."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from kineto_truth import truth
from tracedata import DATA, shared_trace

from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace, pick_importer
from sofa_gui.core.importers.chrome import decode as chrome_decode
from sofa_gui.core.importers.chrome.trace import IMPORTER
from sofa_gui.core.progress import Cancelled, CancelToken, NullProgress
from sofa_gui.core.trace import DEVICE_KINDS, CopyKind, Kind, LaneKind

MINITOY = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
ALEXNET = DATA / "kineto" / "benchmark_result_2869224_1695835535_trace.json.gz"
SHARED = {
    "resnet50_legacy": "kineto-tb-plugin/resnet50_num_workers_0/"
                       "worker0.1623143089861.pt.trace.json.gz",
    "ns_resolution": "holistic-trace-analysis/ns_resolution_trace/"
                     "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "b200_no_metadata": "tracelens/b200/eager_trace.json.gz",
    "control_2022": "holistic-trace-analysis/trace_diff/control/control.json.gz",
}

_cache: dict = {}


def _load(key: str):
    """(trace, truth) for a real trace, loaded once per test session."""
    if key not in _cache:
        path = {"minitoy": MINITOY, "alexnet": ALEXNET}.get(key) or shared_trace(SHARED[key])
        _cache[key] = (IMPORTER.load(path, NullProgress()), truth(path))
    return _cache[key]


REAL = ["minitoy", "alexnet", *SHARED]


# -- real traces ---------------------------------------------------------------------------
@pytest.mark.parametrize("key", REAL)
def test_slice_counts_per_kind_match_plain_json(key):
    trace, t = _load(key)
    assert trace.kind_counts() == dict(t.kinds)
    assert len(trace.slices) == t.slices


@pytest.mark.parametrize("key", REAL)
def test_every_event_is_loaded_or_skipped(key):
    trace, t = _load(key)
    rep = trace.meta.load_stats
    assert rep.read == len(t.events)
    assert rep.loaded + rep.skipped_total == rep.read
    assert rep.skipped.get("flow event without a start (s)", 0) == t.f_without_s
    assert rep.skipped.get("flow start (s) without a step or end", 0) == t.s_without_f


@pytest.mark.parametrize("key", REAL)
def test_times_are_the_files_ts_in_ns_and_durations_non_negative(key):
    trace, t = _load(key)
    assert sorted(trace.slices.start.tolist()) == sorted(t.x_starts_ns)
    assert (trace.slices.dur >= 0).all()


@pytest.mark.parametrize("key", REAL)
def test_lanes_per_thread_stream_and_device_annotations(key):
    trace, t = _load(key)
    lanes = trace.lanes
    gpu_streams = [i for i in range(len(lanes)) if lanes.kind[i] == LaneKind.GPU
                   and lanes.name[i] != "GPU annotations"]
    ann = [i for i in range(len(lanes)) if lanes.name[i] == "GPU annotations"]
    cpu = [i for i in range(len(lanes)) if lanes.kind[i] == LaneKind.CPU
           and lanes.name[i] != "global instant events"]
    assert len(gpu_streams) == len(t.gpu_lanes)
    assert len(ann) == len(t.annotation_pids)
    assert len(cpu) == len(t.cpu_lanes)
    for i in gpu_streams + ann:
        assert lanes.group[i].endswith(f"GPU {lanes.device[i]}")
    # GPU work sits on GPU lanes only, host work on CPU lanes only
    on_gpu = lanes.kind[trace.slices.lane] == LaneKind.GPU
    assert on_gpu[np.isin(trace.slices.kind, [int(k) for k in DEVICE_KINDS])].all()
    assert not on_gpu[trace.slices.kind == Kind.CPU_OP].any()


@pytest.mark.parametrize("key", REAL)
def test_launch_flows_link_runtime_to_gpu_work_with_equal_correlation(key):
    trace, t = _load(key)
    s, f = trace.slices, trace.flows
    launch = f.kind == 0
    src, dst = f.src[launch], f.dst[launch]
    assert launch.sum() >= t.launch_pairs
    assert (s.kind[src] == Kind.RUNTIME).all()
    assert np.isin(s.kind[dst], [int(k) for k in (*DEVICE_KINDS, Kind.SYNC)]).all()
    assert (s.correlation[src] == s.correlation[dst]).all()
    assert (s.correlation[src] >= 0).all()


def test_flow_counts_follow_the_files_flow_events():
    trace, t = _load("minitoy")
    kinds = trace.flows.kind.tolist()
    assert kinds.count(0) == 16 and kinds.count(1) == 4  # 16 ac2g pairs, 4 fwdbwd pairs
    assert t.launch_pairs == 16


def test_legacy_2021_schema_string_tids_memory_counters_and_steps():
    trace, t = _load("resnet50_legacy")
    assert trace.meta.format == "kineto"
    assert trace.meta.extra["kineto_schema"] == "2021"
    names = trace.lanes.name
    assert "stream 7" in names  # from tid "stream 7"
    # tid "25738" (X events) and 25738 (instants) are one thread
    assert names.count("thread 25738 (python)") == 1
    assert len(trace.slices) and (trace.slices.kind == Kind.ANNOTATION).sum() == t.steps == 6
    series = dict(zip(trace.counters.table.name, range(len(trace.counters.table.name))))
    gpu = series["GPU 0 memory allocated"]
    cpu = series["CPU memory allocated"]
    assert len(trace.counters.samples(gpu)[0]) == t.memory[(1, 0)]
    assert len(trace.counters.samples(cpu)[0]) == t.memory[(0, -1)]
    gpu_lane = trace.counters.table.lane[gpu]
    assert trace.lanes.group[gpu_lane] == "GPU 0"
    assert any("running sum" in n for n in trace.meta.load_stats.notes)
    memcpy = trace.slices.kind == Kind.MEMCPY
    assert set(trace.slices.copy_kind[memcpy].tolist()) <= {int(CopyKind.H2D), int(CopyKind.D2H)}
    assert (trace.slices.bytes[memcpy] > 0).all()
    assert trace.meta.epoch_offset_ns == 0  # integer epoch-µs timestamps


def test_2022_schema_async_cpu_to_gpu_flows_and_rank():
    trace, _ = _load("control_2022")
    assert trace.meta.extra["kineto_schema"] == "2022"
    assert (trace.flows.kind == 0).sum() == 9450
    assert trace.meta.ranks == [3] and trace.meta.world_size == 8
    assert {trace.lanes.group[i].split(" · ")[0] for i in range(len(trace.lanes))} == {"rank 3"}


def test_current_schema_device_properties_and_base_time():
    trace, _ = _load("minitoy")
    assert trace.meta.extra["kineto_schema"] == "current"
    assert trace.meta.devices[0]["name"] == "AMD Radeon Graphics"
    assert trace.meta.epoch_offset_ns == 1735632360000000000
    gpu = [i for i in range(len(trace.lanes)) if trace.lanes.kind[i] == LaneKind.GPU]
    assert {trace.lanes.group[i] for i in gpu} == {"GPU 2"}
    assert trace.meta.extra["display_time_unit"] == "ms"


def test_ns_resolution_fractional_epoch_ts_kept_to_the_ns():
    trace, t = _load("ns_resolution")
    assert trace.meta.extra["display_time_unit"] == "ns"
    # float64 cannot hold 1712195495519695.812 µs to the ns; the importer must
    assert sorted(trace.slices.start.tolist()) == sorted(t.x_starts_ns)
    assert any(v % 1000 for v in t.x_starts_ns[:100])


def test_no_metadata_events_still_names_lanes():
    trace, t = _load("b200_no_metadata")
    assert t.metadata == 0
    names = set(trace.lanes.name)
    assert {"thread 6583", "stream 7", "GPU annotations"} <= names
    assert (trace.slices.kind == Kind.COMMUNICATION).sum() == t.kinds["communication"] > 0


def test_sync_events_and_no_profiler_step():
    trace, t = _load("alexnet")
    assert t.steps == 0
    assert (trace.slices.kind == Kind.SYNC).sum() == t.kinds["sync"] == 41
    assert trace.meta.ranks == [0]


def test_args_are_kept_per_event():
    trace, t = _load("minitoy")
    kernels = np.flatnonzero(trace.slices.kind == Kind.KERNEL)
    args = trace.args.get(int(trace.slices.args[kernels[0]]))
    assert args["correlation"] == trace.slices.correlation[kernels[0]]
    assert args["device"] == 2


# -- small hand-written traces ------------------------------------------------------------
def _write(tmp_path: Path, doc, name="t.json", gz=False) -> Path:
    text = doc if isinstance(doc, (str, bytes)) else json.dumps(doc)
    data = text.encode() if isinstance(text, str) else text
    p = tmp_path / name
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def _ev(ph="X", name="op", ts=1.0, dur=1.0, pid=1, tid=1, cat="cpu_op", **kw):
    e = {"ph": ph, "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts}
    if ph == "X":
        e["dur"] = dur
    e.update(kw)
    return e


def _load_doc(tmp_path, doc, **kw):
    return IMPORTER.load(_write(tmp_path, doc, **kw), NullProgress())


def test_array_form_with_and_without_closing_bracket(tmp_path):
    events = [_ev(ts=1), _ev(ts=2, name="b")]
    full = _load_doc(tmp_path, events)
    assert len(full.slices) == 2 and full.meta.format == "kineto"
    text = json.dumps(events)[:-1] + ",\n"
    open_ended = _load_doc(tmp_path, text, name="open.json")
    assert len(open_ended.slices) == 2
    assert any("closing ']'" in n for n in open_ended.meta.load_stats.notes)


def test_begin_end_pairs_nest_per_thread_and_unmatched_are_counted(tmp_path):
    events = [
        _ev("B", "outer", ts=10), _ev("B", "inner", ts=12), _ev("E", "", ts=15),
        _ev("E", "", ts=20, args={"result": 1}),
        _ev("E", "stray", ts=30), _ev("B", "never closed", ts=40),
        _ev("B", "other thread", ts=11, tid=2), _ev("E", "", ts=13, tid=2),
    ]
    t = _load_doc(tmp_path, events)
    got = {t.name_of(i): (int(t.slices.start[i]), int(t.slices.dur[i]), int(t.slices.depth[i]))
           for i in range(len(t.slices))}
    assert got == {"outer": (10000, 10000, 0), "inner": (12000, 3000, 1),
                   "other thread": (11000, 2000, 0)}
    rep = t.meta.load_stats
    assert rep.skipped["E event without matching B"] == 1
    assert rep.skipped["B event without matching E"] == 1
    assert rep.loaded == 6
    outer = [i for i in range(len(t.slices)) if t.name_of(i) == "outer"][0]
    assert t.args.get(int(t.slices.args[outer])) == {"result": 1}


def test_instants_are_zero_length_slices_and_global_ones_get_a_lane(tmp_path):
    events = [_ev("i", "mark", ts=5, s="t"), _ev("I", "old style", ts=6),
              _ev("i", "everywhere", ts=7, s="g", pid="", tid=""), _ev(ts=1, dur=10)]
    t = _load_doc(tmp_path, events)
    inst = {t.name_of(i): int(t.slices.dur[i]) for i in range(len(t.slices))}
    assert inst["mark"] == inst["old style"] == inst["everywhere"] == 0
    g = [i for i in range(len(t.slices)) if t.name_of(i) == "everywhere"][0]
    assert t.lanes.name[t.slices.lane[g]] == "global instant events"


def test_counter_events_one_lane_per_pid_and_name_one_series_per_key(tmp_path):
    events = [
        {"ph": "C", "name": "mem", "pid": 1, "ts": 1, "args": {"used": 10, "free": 90}},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 2, "args": {"used": 20, "free": 80}},
        {"ph": "C", "name": "mem", "pid": 2, "ts": 1, "args": {"used": 5}},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 3, "args": {"note": "text only"}},
        _ev(ts=1),
    ]
    t = _load_doc(tmp_path, events)
    table = t.counters.table
    assert sorted(table.name) == ["mem", "mem · free", "mem · used"]
    lanes = {int(x) for x in table.lane}
    assert len(lanes) == 2 and all(t.lanes.kind[i] == LaneKind.COUNTER for i in lanes)
    used = table.name.index("mem · used")
    times, values = t.counters.samples(used)
    assert times.tolist() == [1000, 2000] and values.tolist() == [10, 20]
    assert t.meta.load_stats.skipped["counter event without numeric values"] == 1


def test_metadata_names_and_sort_indexes_order_lanes(tmp_path):
    events = [
        _ev(pid=10, tid=1), _ev(pid=20, tid=2), _ev(pid=20, tid=3),
        {"ph": "M", "name": "process_name", "pid": 20, "args": {"name": "trainer"}},
        {"ph": "M", "name": "process_sort_index", "pid": 20, "args": {"sort_index": -1}},
        {"ph": "M", "name": "thread_name", "pid": 20, "tid": 3, "args": {"name": "main"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 20, "tid": 3,
         "args": {"sort_index": 0}},
        {"ph": "M", "name": "thread_sort_index", "pid": 20, "tid": 2,
         "args": {"sort_index": 5}},
        {"ph": "M", "name": "process_uptime_seconds", "pid": 20, "args": {"uptime": 3}},
    ]
    t = _load_doc(tmp_path, events)
    order = [t.lanes.name[i] for i in t.lanes.display_order()]
    assert order == ["main", "thread 2", "thread 1"]
    assert t.lanes.group[t.lanes.name.index("main")] == "process trainer (20)"
    assert t.meta.load_stats.skipped["unused metadata event 'process_uptime_seconds'"] == 1


def test_flow_chains_and_bind_id_flows(tmp_path):
    events = [
        _ev(name="a", ts=0, dur=10, tid=1), _ev(name="b", ts=20, dur=10, tid=2),
        _ev(name="c", ts=40, dur=10, tid=3),
        {"ph": "s", "id": 7, "cat": "user", "name": "f", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "t", "id": 7, "cat": "user", "name": "f", "pid": 1, "tid": 2, "ts": 25},
        {"ph": "f", "id": 7, "cat": "user", "name": "f", "pid": 1, "tid": 3, "ts": 40},
        {"ph": "f", "id": 8, "cat": "user", "name": "f", "pid": 1, "tid": 3, "ts": 41,
         "bp": "e"},
        _ev(name="x", ts=100, dur=5, tid=4, bind_id=3, flow_out=True),
        _ev(name="y", ts=110, dur=5, tid=5, bind_id=3, flow_in=True),
    ]
    t = _load_doc(tmp_path, events)
    pairs = {(t.name_of(int(a)), t.name_of(int(b))) for a, b in zip(t.flows.src, t.flows.dst)}
    assert pairs == {("a", "b"), ("b", "c"), ("x", "y")}
    assert set(t.flows.kind.tolist()) == {1}
    assert t.meta.load_stats.skipped["flow event without a start (s)"] == 1


def test_correlation_gives_launch_flows_when_the_file_has_none(tmp_path):
    events = [
        _ev(name="cudaLaunchKernel", cat="cuda_runtime", ts=1, dur=2, args={"correlation": 9}),
        _ev(name="gemm", cat="kernel", ts=5, dur=3, pid=0, tid=7,
            args={"correlation": 9, "device": 0, "stream": 7}),
        _ev(name="fwd", ts=0, dur=1, tid=1),
        {"ph": "s", "id": 1, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "f", "id": 1, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 1,
         "bp": "e"},
    ]
    t = _load_doc(tmp_path, events)
    launch = t.flows.kind == 0
    assert launch.sum() == 1
    assert t.name_of(int(t.flows.src[launch][0])) == "cudaLaunchKernel"
    assert t.name_of(int(t.flows.dst[launch][0])) == "gemm"
    gemm = int(t.flows.dst[launch][0])
    assert t.slices.device[gemm] == 0 and t.slices.stream[gemm] == 7


def test_bad_events_are_skipped_with_reasons(tmp_path):
    text = json.dumps({"traceEvents": [
        _ev(ts=1), {"ph": "X", "name": "no ts", "pid": 1, "tid": 1, "dur": 1},
        _ev(ts=2, dur=-5, name="neg"), {"ph": "X", "name": "no dur", "ts": 3, "pid": 1},
        _ev("Q", ts=4), _ev("b", ts=4, id=1), 17, _ev(ts="12", name="string ts"),
        _ev(ts="soon", name="bad ts"), {"ph": "X", "name": "nan", "ts": 5, "dur": 777.5},
        {"ph": "X", "name": "inf", "ts": 5, "dur": 888.5},
    ]})
    text = text.replace("777.5", "NaN").replace("888.5", "Infinity")
    t = _load_doc(tmp_path, text)
    rep = t.meta.load_stats
    assert rep.read == 11
    assert {t.name_of(i) for i in range(len(t.slices))} == {"op", "string ts"}
    assert rep.skipped["missing ts"] == 1
    assert rep.skipped["negative dur"] == 1
    assert rep.skipped["X event without dur"] == 2  # NaN counts as no dur
    assert rep.skipped["dur out of range"] == 1
    assert rep.skipped["unsupported phase 'Q'"] == 1
    assert rep.skipped["unsupported phase 'b'"] == 1
    assert rep.skipped["array item is not an event object"] == 1
    assert rep.skipped["ts is not a number"] == 1
    assert rep.loaded + rep.skipped_total == rep.read


def test_string_pids_and_tids_become_lanes_with_their_text(tmp_path):
    events = [_ev(pid="Spans", tid="PyTorch Profiler", cat="Trace", ts=1),
              _ev(name="k", cat="kernel", pid=0, tid="stream 9", ts=2),
              _ev(tid="42", ts=3), _ev(tid=42, ts=4)]
    t = _load_doc(tmp_path, events)
    assert sorted(t.lanes.name) == ["PyTorch Profiler", "stream 9", "thread 42"]
    k = [i for i in range(len(t.slices)) if t.name_of(i) == "k"][0]
    assert t.slices.stream[k] == 9


def test_fractional_epoch_ts_exact_to_the_ns(tmp_path):
    text = ('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, '
            '"ts": 1712195495519695.812, "dur": 0.125}]}')
    t = _load_doc(tmp_path, text)
    assert int(t.slices.start[0]) == 1712195495519695812
    assert int(t.slices.dur[0]) == 125


def test_keys_after_the_events_are_read(tmp_path):
    text = ('{"schemaVersion": 1, "traceEvents": [' + json.dumps(_ev()) + '], '
            '"displayTimeUnit": "ns", "baseTimeNanoseconds": 1700000000000000000, '
            '"distributedInfo": {"rank": 5, "world_size": 8}}')
    t = _load_doc(tmp_path, text)
    assert t.meta.extra["display_time_unit"] == "ns"
    assert t.meta.epoch_offset_ns == 1700000000000000000
    assert t.meta.ranks == [5] and t.meta.world_size == 8
    assert t.lanes.group[0].startswith("rank 5 · ")


def test_memory_events_with_totals_become_a_counter_per_device(tmp_path):
    events = [_ev(ts=1)] + [
        {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2 + k,
         "args": {"Device Type": 1, "Device Id": 0, "Bytes": 100, "Total Allocated": 100 * k}}
        for k in range(1, 4)]
    events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 9,
                   "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1e300,
                            "Total Allocated": "lots"}})
    t = _load_doc(tmp_path, events)
    assert len(t.slices) == 1
    assert t.counters.table.name == ["GPU 0 memory allocated"]
    assert t.counters.value.tolist() == [100, 200, 300]
    assert t.meta.load_stats.skipped["memory event without byte counts"] == 1


@pytest.mark.parametrize("chunk", [64, 300, 4096])
def test_piece_cuts_inside_strings_and_nested_args_do_not_change_the_result(
        tmp_path, monkeypatch, chunk):
    tricky = ['}, {"ph": "X"', '}, {', 'a\\"}, {\\"b', "ü}, {ß"]
    events = [_ev(name=tricky[k % 4], ts=k, dur=0.5,
                  args={"list": [{"x": 1}, {"y": tricky[k % 4]}], "n": k})
              for k in range(200)]
    path = _write(tmp_path, {"traceEvents": events, "traceName": "x"})
    monkeypatch.setattr(chrome_decode, "CHUNK", chunk)
    monkeypatch.setattr(chrome_decode, "BLOCK", 1024)
    t = IMPORTER.load(path, NullProgress())
    assert len(t.slices) == 200
    got = sorted((int(t.slices.start[i]), t.name_of(i), t.args.get(int(t.slices.args[i]))["n"])
                 for i in range(200))
    want = sorted((k * 1000, tricky[k % 4], k) for k in range(200))
    assert got == want


def test_progress_is_reported_and_cancel_stops_the_load(tmp_path, monkeypatch):
    path = _write(tmp_path, [_ev(ts=k) for k in range(3000)])
    monkeypatch.setattr(chrome_decode, "CHUNK", 2000)
    seen = []
    IMPORTER.load(path, CancelToken(lambda f, m: seen.append(f)))
    assert seen[-1] == 1.0 and len(seen) > 10
    assert seen == sorted(seen)
    token = CancelToken(lambda f, m: token.cancel() if f > 0.3 else None)
    with pytest.raises(Cancelled):
        IMPORTER.load(path, token)


# -- sniffing and bad files --------------------------------------------------------------
def test_can_open_sniffs_content_not_only_the_suffix(tmp_path):
    trace = _write(tmp_path, {"traceEvents": [_ev()]}, name="trace.bin", gz=True)
    array = _write(tmp_path, [_ev()], name="events.txt")
    other_json = _write(tmp_path, {"a": 1}, name="config.json")
    text = _write(tmp_path, "hello", name="notes.txt")
    assert IMPORTER.can_open(trace) >= 0.9
    assert IMPORTER.can_open(array) >= 0.9
    assert 0 < IMPORTER.can_open(other_json) < 0.5
    assert IMPORTER.can_open(text) == 0
    assert IMPORTER.can_open(tmp_path) == 0
    assert pick_importer(trace).name == "chrome"


@pytest.mark.parametrize("case, reason", [
    ("truncated_gzip", "truncated gzip"),
    ("corrupt_gzip", "corrupt gzip"),
    ("truncated_json", "truncated JSON"),
    ("not_json", "not JSON"),
    ("no_trace_events", "no \"traceEvents\""),
    ("events_not_array", "not an array"),
    ("wrong_top_level", "wrong shape"),
    ("garbage_inside", "invalid JSON"),
])
def test_bad_files_raise_a_format_error_with_a_reason(tmp_path, case, reason):
    good = json.dumps({"traceEvents": [_ev(ts=k) for k in range(2000)]}).encode()
    data = {
        "truncated_gzip": gzip.compress(good)[:-4000],
        "corrupt_gzip": gzip.compress(good)[:200] + b"\x00" * 50 + gzip.compress(good)[250:],
        "truncated_json": good[: len(good) // 2],
        "not_json": b"this is a text file",
        "no_trace_events": b'{"a": 1, "b": [1, 2]}',
        "events_not_array": b'{"traceEvents": {"a": 1}}',
        "wrong_top_level": b'"just a string"',
        "garbage_inside": good[:5000] + b"@@@" + good[5003:],
    }[case]
    path = tmp_path / ("t.json.gz" if "gzip" in case else "t.json")
    path.write_bytes(data)
    with pytest.raises(TraceFormatError) as err:
        load_trace(path, use_cache=False)
    assert reason in err.value.reason
    assert err.value.path == str(path)
    assert "\n" not in err.value.reason


def test_empty_events_array_loads_an_empty_trace(tmp_path):
    t = _load_doc(tmp_path, {"traceEvents": []})
    assert len(t.slices) == 0 and t.meta.load_stats.read == 0
