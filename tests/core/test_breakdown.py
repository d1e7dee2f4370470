"""Breakdown: known answers on synthetic traces, invariants as property tests, real traces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofa_gui.core.analysis.breakdown import compute_breakdown
from sofa_gui.core.analysis.device_side import (
    DEVICE_CATEGORIES,
    LAUNCH_GAP_NS,
    SYNC_SLACK_NS,
)
from sofa_gui.core.analysis.host_side import HOST_CATEGORIES
from sofa_gui.core.analysis.intervals import clean_windows, measure_in, paint, union
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import CopyKind, Kind, LaneKind

US = 1000
DL_NAME = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _iters(starts, ends, labels=()):
    return Iterations("annotations", "test", np.asarray(starts, np.int64),
                      np.asarray(ends, np.int64), 1.0, labels=list(labels))


def _training_trace(n=3, period=1000 * US):
    """Each iteration: DataLoader 0-400 µs, conv 400-500 (launch 410-420), H2D 405-415,
    gemm 420-720, sync 800-850, all-reduce 860-880 (relative µs)."""
    b = TraceBuilder("synth", "test")
    cpu = b.lane(("cpu", 1, 1), "main", LaneKind.CPU, "proc", pid=1, tid=1, rank=0)
    gpu = b.lane(("gpu", 0, 7), "stream 7", LaneKind.GPU, "GPU 0", device=0, stream=7, rank=0)
    for i in range(n):
        t = i * period
        b.add_slices([t], [period], cpu, [f"ProfilerStep#{i}"], kind=Kind.ANNOTATION)
        b.add_slices([t, t + 400 * US, t + 410 * US, t + 800 * US],
                     [400 * US, 100 * US, 10 * US, 50 * US], cpu,
                     [DL_NAME, "aten::conv2d", "cudaLaunchKernel", "cudaDeviceSynchronize"],
                     kind=[Kind.CPU_OP, Kind.CPU_OP, Kind.RUNTIME, Kind.RUNTIME],
                     correlation=[-1, -1, i + 1, -1])
        b.add_slices([t + 405 * US, t + 420 * US, t + 860 * US], [10 * US, 300 * US, 20 * US],
                     gpu, ["Memcpy HtoD (Pageable -> Device)", "gemm", "ncclAllReduce"],
                     kind=[Kind.MEMCPY, Kind.KERNEL, Kind.COMMUNICATION], device=0,
                     copy_kind=[CopyKind.H2D, 0, 0], bytes=[1_000_000, -1, -1],
                     correlation=[-1, i + 1, -1])
    starts = np.arange(n) * period
    return b.finish(), _iters(starts, starts + period, [f"ProfilerStep#{i}" for i in range(n)])


def test_known_answer_device_and_host():
    trace, iters = _training_trace()
    bd = compute_breakdown(trace, iters)
    dev = dict(zip(DEVICE_CATEGORIES, bd.device.times[1].tolist()))
    assert dev == {
        "compute": 300 * US, "communication": 20 * US, "memcpy_h2d": 10 * US, "memcpy_d2h": 0,
        "memcpy_d2d": 0, "memcpy_p2p": 0, "memcpy_other": 0, "memset": 0,
        "idle_input": 400 * US,  # DataLoader on the host, nothing queued
        "idle_copy": 0,
        "idle_sync": 60 * US,  # 800..850 blocked in the sync, 850..860 refilling after it
        "idle_launch": 10 * US,  # 400..405 and 415..420
        "idle_host": 0,
        "idle_other": 200 * US,  # 720..800 and 880..1000: the host does nothing traced
    }
    host = dict(zip(HOST_CATEGORIES, bd.host.times[1].tolist()))
    assert host == {"data_loading": 400 * US, "forward": 90 * US, "backward": 0,
                    "optimizer": 0, "communication": 0, "memcpy": 0, "runtime": 10 * US,
                    "sync": 50 * US,
                    "python": 0, "other": 450 * US}
    c = bd.device.copies
    assert c.bytes[:, 0].tolist() == [1_000_000] * 3
    assert c.pageable_bytes[:, 0].sum() == 3_000_000 and c.pinned_bytes.sum() == 0
    assert c.bandwidth_gbps("h2d") == pytest.approx(100.0)  # 1 MB in 10 µs
    assert bd.device.bytes[1, DEVICE_CATEGORIES.index("memcpy_h2d")] == 1_000_000
    assert bd.device.comm_total.tolist() == [20 * US] * 3
    assert bd.device.comm_overlap.tolist() == [0] * 3
    assert bd.dominant_category(0) == "idle_input"
    assert bd.dominant_category(0, "host") == "other"
    assert bd.iteration_breakdown(bd.median_iteration, "host")["data_loading"] == 400 * US


def test_json_items_and_dict():
    trace, iters = _training_trace()
    bd = compute_breakdown(trace, iters)
    items = iters.to_dict()["items"]
    bd.annotate_items(items)
    assert items[0]["breakdown"]["idle_input"] == 400.0
    assert items[0]["breakdown"]["host_data_loading"] == 400.0
    assert sum(v for k, v in items[0]["breakdown"].items() if not k.startswith("host_")) == 1000.0
    assert items[0]["dominant"] == "idle_input"
    assert items[0]["bytes"] == {"memcpy_h2d": 1_000_000}
    d = bd.to_dict()
    assert d["scope"] == "iterations"
    assert d["devices"][0]["copies"]["h2d"]["bandwidth_gbps"] == 100.0
    assert d["devices"][0]["communication"]["total_us"] == 60.0
    assert d["hosts"][0]["share"]["data_loading"] == 0.4


def test_overlap_priority_compute_hides_communication_and_copies():
    b = TraceBuilder("synth", "test")
    s1 = b.lane(("gpu", 0, 1), "s1", LaneKind.GPU, device=0, stream=1)
    s2 = b.lane(("gpu", 0, 2), "s2", LaneKind.GPU, device=0, stream=2)
    b.add_slices([0], [100], s1, ["gemm"], kind=Kind.KERNEL, device=0)
    b.add_slices([50, 120], [100, 30], s2, ["ncclAllReduce", "Memcpy DtoH"],
                 kind=[Kind.COMMUNICATION, Kind.MEMCPY], device=0,
                 copy_kind=[0, CopyKind.D2H])
    bd = compute_breakdown(b.finish(), _iters([0], [200]))
    row = dict(zip(DEVICE_CATEGORIES, bd.device.times[0].tolist()))
    assert row["compute"] == 100 and row["communication"] == 50 and row["memcpy_d2h"] == 0
    assert bd.device.comm_total[0] == 100 and bd.device.comm_overlap[0] == 50
    assert sum(row.values()) == 200


def test_autograd_thread_fills_main_thread_backward():
    b = TraceBuilder("synth", "test")
    main = b.lane(("cpu", 1, 1), "main", LaneKind.CPU, pid=1, tid=1)
    bwd = b.lane(("cpu", 1, 2), "autograd", LaneKind.CPU, pid=1, tid=2)
    b.add_slices([0, 10, 200], [1000, 80, 50], main,
                 ["ProfilerStep#1", "aten::linear", "Optimizer.step#SGD.step"],
                 kind=[Kind.ANNOTATION, Kind.CPU_OP, Kind.CPU_OP])
    b.add_slices([100, 300], [90, 20], bwd, ["AddmmBackward0", "aten::mm"],
                 kind=Kind.CPU_OP)
    bd = compute_breakdown(b.finish(), _iters([0], [1000]))
    host = dict(zip(HOST_CATEGORIES, bd.host.times[0].tolist()))
    assert bd.host.lane == main
    assert host["forward"] == 80 and host["optimizer"] == 50
    assert host["backward"] == 90  # only the autograd thread's *Backward op
    assert sum(host.values()) == 1000
    assert bd.device is None and bd.dominant_category(0) == "other"


def test_no_iterations_whole_trace_span():
    trace, _ = _training_trace(n=2)
    bd = compute_breakdown(trace, Iterations.none("test", "no repeating pattern"))
    assert bd.whole_trace and len(bd) == 1
    assert "whole trace" in bd.note and "no repeating pattern" in bd.note
    assert int(bd.device.times.sum()) == trace.duration_ns
    items: list[dict] = []
    bd.annotate_items(items)
    assert bd.to_dict()["scope"] == "whole_trace"


def test_counters_summarised_per_iteration():
    b = TraceBuilder("synth", "test")
    lane = b.lane(("ctr",), "GPU util", LaneKind.COUNTER)
    b.add_counter("gpu_util", "%", lane, [0, 50, 100, 150, 250], [10, 30, 50, 70, 99])
    bd = compute_breakdown(b.finish(), _iters([0, 100, 200], [100, 200, 300]))
    (c,) = bd.counters
    assert c.mean[:2].tolist() == [20.0, 60.0] and c.max[0] == 30 and c.min[1] == 50
    assert c.mean[2] == 99
    assert c.to_dict()["mean"] == [20.0, 60.0, 99.0]


def test_multi_rank_uses_each_ranks_own_steps_and_finds_straggler():
    b = TraceBuilder("synth", "test")
    for rank, offset, work in ((0, 0, 300), (1, 10_000, 600)):
        cpu = b.lane(("cpu", rank), f"main r{rank}", LaneKind.CPU, pid=rank, tid=1, rank=rank)
        gpu = b.lane(("gpu", rank), f"stream r{rank}", LaneKind.GPU, device=0, stream=7,
                     rank=rank)
        for i in range(2):
            t = offset + i * 1000
            b.add_slices([t], [1000], cpu, [f"ProfilerStep#{i}"], kind=Kind.ANNOTATION)
            b.add_slices([t, t + work], [work, 1000 - work - 100], gpu, ["gemm", "ncclAllReduce"],
                         kind=[Kind.KERNEL, Kind.COMMUNICATION], device=0)
    trace = b.finish()
    bd = compute_breakdown(trace, _iters([0, 1000], [1000, 2000], ["ProfilerStep#0",
                                                                   "ProfilerStep#1"]))
    assert len(bd.devices) == 2
    r1 = next(d for d in bd.devices if d.rank == 1)
    assert r1.starts.tolist() == [10_000, 11_000]  # rank 1's own step annotations
    assert r1.column("compute").tolist() == [600, 600]
    assert bd.ranks.straggler.tolist() == [1, 1]
    assert bd.ranks.lag.tolist() == [150, 150]  # 600 vs median of (300, 600)
    assert bd.to_dict()["ranks"]["straggler"] == [1, 1]


# -- property tests against a dense per-µs oracle ---------------------------------------
_DEV_KINDS = [(Kind.KERNEL, 0), (Kind.COMMUNICATION, 0), (Kind.MEMCPY, CopyKind.H2D),
              (Kind.MEMCPY, CopyKind.D2H), (Kind.MEMCPY, CopyKind.D2D),
              (Kind.MEMCPY, CopyKind.P2P), (Kind.MEMCPY, CopyKind.OTHER), (Kind.MEMSET, 0)]
_T = 400  # µs of timeline

_span = st.tuples(st.integers(0, _T - 1), st.integers(1, 120))
_dev_slice = st.tuples(_span, st.integers(0, len(_DEV_KINDS) - 1), st.integers(0, 2))


@st.composite
def _scenario(draw):
    dev = draw(st.lists(_dev_slice, max_size=25))
    host = {role: draw(st.lists(_span, max_size=3)) for role in _HOST_ROLES}
    cuts = sorted(set(draw(st.lists(st.integers(0, _T), min_size=2, max_size=6))))
    if len(cuts) < 2:
        cuts = [0, _T]
    holes = draw(st.booleans())
    return dev, host, cuts, holes


# host role -> (slice name, kind) on the main thread
_HOST_ROLES = {"dl": (DL_NAME, Kind.CPU_OP), "copy": ("cudaMemcpyAsync", Kind.RUNTIME),
               "sync": ("cudaStreamSynchronize", Kind.RUNTIME), "work": ("aten::add", Kind.CPU_OP)}


def _build(dev, host):
    b = TraceBuilder("prop", "test")
    cpu = b.lane(("cpu",), "main", LaneKind.CPU, pid=1, tid=1)
    streams = [b.lane(("gpu", k), f"s{k}", LaneKind.GPU, device=0, stream=k) for k in range(3)]
    for (s, d), k, stream in dev:
        kind, ck = _DEV_KINDS[k]
        b.add_slices([s * US], [d * US], streams[stream], ["x"], kind=kind, device=0,
                     copy_kind=int(ck))
    for role, spans in host.items():
        name, kind = _HOST_ROLES[role]
        for s, d in spans:
            b.add_slices([s * US], [d * US], cpu, [name], kind=kind)
    return b.finish()


def _oracle(dev, host, lo, hi):
    """Per-µs category index (DEVICE_CATEGORIES) over [lo, hi), painted cell by cell."""
    n = _T + 200
    free = 99
    owner = np.full(n, free)

    def fill(spans, value):
        for s, d in spans:
            seg = owner[s:s + d]
            seg[seg == free] = value

    for k in range(8):
        fill([sd for sd, kk, _ in dev if kk == k], k)
    fill(host["dl"], 8)
    fill(host["copy"], 9)
    fill(host["sync"], 10)
    work = np.zeros(n, bool)
    for s, d in host["work"]:
        work[s:s + d] = True
    owner[:lo] = -1  # outside the analyzed span
    owner[hi:] = -1
    sync_ends = [(s + d) * US for s, d in host["sync"]]
    c = lo
    while c < hi:
        if owner[c] != free:
            c += 1
            continue
        e = c
        while e < hi and owner[e] == free:
            e += 1
        g0, g1 = c * US, e * US
        if any(g0 - SYNC_SLACK_NS <= t <= g1 for t in sync_ends):
            owner[c:e] = 10
        elif g1 - g0 <= LAUNCH_GAP_NS:
            owner[c:e] = 11
        else:
            owner[c:e] = np.where(work[c:e], 12, 13)
        c = e
    return owner


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_device_breakdown_matches_dense_oracle(sc):
    dev, host, cuts, holes = sc
    trace = _build(dev, host)
    starts, ends = np.array(cuts[:-1]) * US, np.array(cuts[1:]) * US
    if holes:  # iterations need not tile the timeline
        ends = np.maximum(starts, ends - 7 * US)
    bd = compute_breakdown(trace, _iters(starts, ends))
    if not dev:
        assert bd.device is None
        return
    owner = _oracle(dev, host, int(starts[0]) // US, int(ends[-1]) // US)
    times = bd.device.times
    k = len(DEVICE_CATEGORIES)
    assert (times >= 0).all()
    for i, (s, e) in enumerate(zip(starts // US, ends // US)):
        want = np.bincount(owner[s:e], minlength=k)[:k] * US
        assert times[i].tolist() == want.tolist()
        assert abs(int(times[i].sum()) - int((e - s) * US)) <= US  # sums to wall within 1 µs
        assert 0 <= bd.device.comm_overlap[i] <= bd.device.comm_total[i]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_span, st.integers(0, 5)), max_size=20),
       st.lists(st.integers(0, _T), min_size=2, max_size=5))
def test_host_breakdown_sums_to_wall(host_slices, cuts):
    names = [DL_NAME, "cudaStreamSynchronize", "cudaLaunchKernel", "Optimizer.step#SGD.step",
             "MulBackward0", "aten::add"]
    kinds = [Kind.CPU_OP, Kind.RUNTIME, Kind.RUNTIME, Kind.CPU_OP, Kind.CPU_OP, Kind.CPU_OP]
    b = TraceBuilder("prop", "test")
    cpu = b.lane(("cpu",), "main", LaneKind.CPU, pid=1, tid=1)
    b.add_slices([0], [1], cpu, ["aten::empty"], kind=Kind.CPU_OP)
    for (s, d), k in host_slices:
        b.add_slices([s], [d], cpu, [names[k]], kind=kinds[k])
    cuts = sorted(set(cuts)) if len(set(cuts)) > 1 else [0, _T]
    bd = compute_breakdown(b.finish(), _iters(cuts[:-1], cuts[1:]))
    t = bd.host.times
    assert (t >= 0).all()
    assert t.sum(axis=1).tolist() == np.diff(cuts).tolist()
    # data loading wins every overlap: it holds the union of DataLoader spans, and beyond
    # them at most the time between two fetches of one iteration (a loader's restart)
    us_, ue = union([s for (s, d), k in host_slices if k == 0],
                    [s + d for (s, d), k in host_slices if k == 0])
    ws, we = np.array(cuts[:-1]), np.array(cuts[1:])
    want = measure_in(us_, ue, ws, we)
    got = t[:, HOST_CATEGORIES.index("data_loading")]
    assert (got >= want).all()
    window = np.searchsorted(ws, us_, side="right") - 1
    same = (window[:-1] == window[1:]) & (window[:-1] >= 0) & (us_[1:] < we[window[1:]])
    between = measure_in(ue[:-1][same], us_[1:][same], ws, we)
    assert (got <= want + between).all()


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 60)), max_size=30))
def test_union_is_disjoint_and_covers_exactly(spans):
    s = np.array([a for a, _ in spans], np.int64)
    e = s + np.array([d for _, d in spans], np.int64)
    us_, ue = union(s, e)
    assert (ue > us_).all() and (us_[1:] > ue[:-1]).all()
    dense = np.zeros(400, bool)
    for a, b in zip(s, e):
        dense[a:b] = True
    assert int((ue - us_).sum()) == int(dense.sum())
    ws, we = clean_windows([0, 100, 250], [120, 200, 400])
    assert measure_in(us_, ue, ws, we).tolist() == [int(dense[a:b].sum()) for a, b in
                                                      zip(ws, we)]


def test_paint_a_million_slices():
    """The vectorised path is exact at scale (speed: benchmarks/bench_breakdown.py)."""
    rng = np.random.default_rng(1)
    n = 1_000_000
    s = np.cumsum(rng.integers(1, 50, n))
    e = s + rng.integers(1, 80, n)
    layer = rng.integers(0, 3, n)
    ws, we = clean_windows(np.linspace(0, e.max(), 11)[:-1].astype(np.int64),
                           np.linspace(0, e.max(), 11)[1:].astype(np.int64))
    p = paint([(s[layer == k], e[layer == k]) for k in range(3)], ws, we)
    assert p.per_window.sum(axis=1).tolist() == (we - ws).tolist()
    u0 = union(s[layer == 0], e[layer == 0])
    assert p.per_window[:, 0].tolist() == measure_in(*u0, ws, we).tolist()


# -- real traces ----------------------------------------------------------------------------
def _real(rel):
    from tracedata import shared_trace

    from sofa_gui.core.analysis.iterations import detect_iterations
    from sofa_gui.core.importers import load_trace

    trace = load_trace(shared_trace(rel))
    iters = detect_iterations(trace)
    return trace, iters, compute_breakdown(trace, iters)


RESNET0 = "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NCCL = "holistic-trace-analysis/nccl_parser_config/nccl_data.json.gz"
NEGQ = "holistic-trace-analysis/negative_queue_length_values_check/rank0.json.gz"


@pytest.mark.parametrize("rel", [RESNET0, NCCL])
def test_real_rows_sum_to_wall_without_negatives(rel):
    trace, iters, bd = _real(rel)
    assert len(bd) == len(iters) > 0 and not bd.whole_trace
    for side in [*bd.devices, *bd.hosts]:
        assert (side.times >= 0).all()
        wall = side.ends - side.starts
        assert np.abs(side.times.sum(axis=1) - wall).max() <= US


def _json_events(path):
    import gzip
    import json

    with gzip.open(path) as fh:
        return json.load(fh)["traceEvents"]


def _merge(spans):
    """Plain-Python union of (start, end) pairs: an independent check of intervals.py."""
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _clip_len(spans, lo, hi):
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in spans)


def _overlap_len(a, b, lo, hi):
    i = j = 0
    total = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0], lo), min(a[i][1], b[j][1], hi)
        total += max(0, e - s)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@pytest.mark.parametrize("rel", [NCCL, NEGQ])
def test_real_nccl_communication_and_overlap_match_independent_count(rel):
    from tracedata import shared_trace

    trace, iters, bd = _real(rel)
    events = _json_events(shared_trace(rel))
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    ns = [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), "nccl" in e["name"].lower())
          for e in kernels]
    comm = _merge([(s, e) for s, e, c in ns if c])
    comp = _merge([(s, e) for s, e, c in ns if not c])
    d = bd.device
    assert d is not None and d.comm_total.sum() > 0 and d.comm_overlap.sum() > 0
    for i, (lo, hi) in enumerate(zip(d.starts.tolist(), d.ends.tolist())):
        assert abs(int(d.comm_total[i]) - _clip_len(comm, lo, hi)) <= US
        assert abs(int(d.comm_overlap[i]) - _overlap_len(comm, comp, lo, hi)) <= US
        exposed = _clip_len(comm, lo, hi) - _overlap_len(comm, comp, lo, hi)
        assert abs(int(d.column("communication")[i]) - exposed) <= US


def test_host_bytes_follow_launch_flows():
    b = TraceBuilder("synth", "test")
    cpu = b.lane(("cpu",), "main", LaneKind.CPU, pid=1, tid=1)
    gpu = b.lane(("gpu",), "s7", LaneKind.GPU, device=0, stream=7)
    b.add_slices([0, 100], [50, 50], cpu, ["cudaMemcpyAsync", "cudaMemcpyAsync"],
                 kind=Kind.RUNTIME, correlation=[1, 2])
    b.add_slices([40, 140], [10, 10], gpu, ["Memcpy HtoD", "Memcpy DtoH"], kind=Kind.MEMCPY,
                 device=0, copy_kind=[CopyKind.H2D, CopyKind.D2H], bytes=[4096, 8],
                 correlation=[1, 2])
    bd = compute_breakdown(b.finish(), _iters([0], [200]))
    row = dict(zip(HOST_CATEGORIES, bd.bytes("host")[0].tolist()))
    assert row["memcpy"] == 4096  # staged host-to-device copy
    assert row["sync"] == 8  # the device-to-host read-back is a sync
    assert bd.host.column("sync")[0] == 50 and bd.host.column("memcpy")[0] == 50
    dev = dict(zip(DEVICE_CATEGORIES, bd.bytes("device")[0].tolist()))
    assert dev["memcpy_h2d"] == 4096 and dev["memcpy_d2h"] == 8


# -- main thread: traced ops beat sampled stacks ----------------------------------------------
def _two_lane_trace(traced_kind):
    """One process: a traced thread (3 slices of ``traced_kind``) and a py-spy-style lane
    of 50 sampled Python frames, marked in ``meta.extra`` but not by name."""
    b = TraceBuilder("synth", "test")
    traced = b.lane(("cpu", 1, 1), "thread 1", LaneKind.CPU, "proc", pid=1, tid=1)
    sampled = b.lane(("spl", 1, 2), "MainThread 0x7f", LaneKind.CPU, "samples", pid=1, tid=2)
    b.meta.extra["sampled_lanes"] = [sampled]
    b.add_slices([0, 300, 600], [200, 200, 200], traced, ["aten::mm", "x", "y"],
                 kind=traced_kind)
    b.add_slices(np.arange(50) * 20, [15] * 50, sampled, ["train (t.py:3)"] * 50,
                 kind=Kind.PYTHON)
    return b.finish(), traced, sampled


def test_main_thread_prefers_traced_ops_over_sampled_stacks():
    trace, traced, sampled = _two_lane_trace(Kind.CPU_OP)
    bd = compute_breakdown(trace, _iters([0], [1000]))
    assert bd.host.lane == traced
    assert sampled not in bd.host.helper_lanes  # samples never fill the main thread's gaps
    assert bd.host.column("forward")[0] == 600


def test_sampled_lane_is_main_thread_when_nothing_is_traced():
    trace, traced, sampled = _two_lane_trace(Kind.OTHER)
    bd = compute_breakdown(trace, _iters([0], [1000]))
    assert bd.host.lane == sampled


def test_recording_with_kineto_and_pyspy_picks_the_kineto_thread(data_dir):
    from sofa_gui.core.analysis.iterations import detect_iterations
    from sofa_gui.core.importers import load_trace

    trace = load_trace(data_dir / "recording-torch-pyspy")
    (pyspy,) = trace.meta.extra["sampled_lanes"]
    assert trace.lanes.name[pyspy].startswith("py-spy")
    s = trace.slices
    assert (s.kind[s.lane == pyspy] == int(Kind.PYTHON)).all()
    # the py-spy lane has more framework-like slices than the traced thread ...
    assert (s.lane == pyspy).sum() > (s.lane == s.lane[s.kind == int(Kind.CPU_OP)][0]).sum()
    bd = compute_breakdown(trace, detect_iterations(trace))
    main = bd.host.lane
    # ... yet the main thread is the Kineto thread with the traced ops
    assert main != pyspy and pyspy not in bd.host.helper_lanes
    assert (s.kind[s.lane == main] == int(Kind.CPU_OP)).sum() > 1000
    assert bd.host.column("forward").sum() + bd.host.column("backward").sum() > 0


# -- multi-rank on real data: an independent count from the JSON files ----------------------
def _rank_file_counts(path):
    """Per step of one rank file, from plain json: window, busy, communication, overlap (ns)."""
    ev = _json_events(path)
    def ns(e):  # epoch µs * 1000 exceeds float precision: scale the integer part exactly
        start = int(e["ts"]) * 1000 + round((e["ts"] - int(e["ts"])) * 1000)
        return start, start + round(e["dur"] * 1000)

    wins = sorted(list(ns(e)) for e in ev
                  if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#"))
    for a, b in zip(wins, wins[1:]):
        a[1] = min(a[1], b[0])
    dev = [(*ns(e), e["cat"], e["name"]) for e in ev if e.get("ph") == "X"
           and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    comm = _merge([(s, e) for s, e, c, n in dev if c == "kernel" and "nccl" in n.lower()])
    comp = _merge([(s, e) for s, e, c, n in dev if c == "kernel" and "nccl" not in n.lower()])
    work = _merge([(s, e) for s, e, c, n in dev])
    out = []
    for lo, hi in wins:
        c, ov = _clip_len(comm, lo, hi), _overlap_len(comm, comp, lo, hi)
        # own work: device busy minus exposed communication
        out.append({"dur": hi - lo, "comm": c, "overlap": ov,
                    "busy": _clip_len(work, lo, hi) - (c - ov)})
    return out


def test_real_two_ranks_per_rank_times_straggler_and_overlap(data_dir):
    from sofa_gui.core.analysis.iterations import detect_iterations
    from sofa_gui.core.importers import load_trace

    trace = load_trace(data_dir / "ranks")
    bd = compute_breakdown(trace, detect_iterations(trace))
    r = bd.ranks
    assert r.ranks == [0, 1] and r.durations.shape == (2, 2)
    want = [_rank_file_counts(data_dir / "ranks" / f"sampled_rank-{k}.json.gz") for k in (0, 1)]
    for k in (0, 1):
        for i in (0, 1):
            w = want[k][i]
            assert abs(int(r.durations[k, i]) - w["dur"]) <= US
            assert abs(int(r.comm_total[k, i]) - w["comm"]) <= US
            assert abs(int(r.comm_overlap[k, i]) - w["overlap"]) <= US
            assert abs(int(r.busy[k, i]) - w["busy"]) <= US
    busy = np.array([[w["busy"] for w in want[k]] for k in (0, 1)])
    assert r.straggler.tolist() == np.argmax(busy, axis=0).tolist()
    assert r.straggler.tolist() == [1, 1]  # rank 1 works ~30 ms more per step
    assert 0 < r.overlap_fraction()[0] < r.overlap_fraction()[1] < 0.5
    d = bd.to_dict()["ranks"]
    assert d["iteration_us"]["1"] == [want[1][i]["dur"] / 1000 for i in (0, 1)]
    assert d["communication_overlap_us"]["0"][0] == pytest.approx(want[0][0]["overlap"] / 1000,
                                                                  abs=1)
    assert d["overlap_fraction"]["1"] == round(float(r.overlap_fraction()[1]), 4)
    assert d["straggler"] == [1, 1] and len(d["slowest_iteration_rank"]) == 2
