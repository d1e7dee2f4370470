import numpy as np

from sofa_gui.core.builder import TraceBuilder, assign_depths
from sofa_gui.core.trace import CopyKind, Kind, LaneKind


def _toy():
    b = TraceBuilder("toy", "test")
    cpu = b.lane(("cpu", 1, 1), "thread 1", LaneKind.CPU, "process 1", pid=1, tid=1)
    gpu = b.lane(("gpu", 0, 7), "stream 7", LaneKind.GPU, "GPU 0", device=0, stream=7)
    rows_cpu = b.add_slices([0, 10, 12], [100, 20, 5], cpu, ["step", "cudaLaunchKernel", "x"],
                            kind=[Kind.ANNOTATION, Kind.RUNTIME, Kind.CPU_OP],
                            correlation=[-1, 5, -1])
    rows_gpu = b.add_slices([40, 30], [10, 5], gpu, ["gemm", "memcpy"],
                            kind=[Kind.KERNEL, Kind.MEMCPY], correlation=[5, -1],
                            copy_kind=[0, CopyKind.H2D], bytes=[-1, 4096],
                            args=[b'{"grid": [1,1,1]}', None])
    return b, rows_cpu, rows_gpu


def test_builder_sorts_nests_and_correlates():
    b, _, _ = _toy()
    t = b.finish()
    assert list(t.slices.start) == [0, 10, 12, 30, 40]
    assert list(t.slices.depth) == [0, 1, 2, 0, 0]
    assert t.lanes.depth.tolist() == [3, 1]
    launch = [t.name_of(i) for i in t.flows.src]
    kernel = [t.name_of(i) for i in t.flows.dst]
    assert launch == ["cudaLaunchKernel"] and kernel == ["gemm"]
    gemm = int(np.flatnonzero(t.slices.name == t.names.index("gemm"))[0])
    assert t.args.get(int(t.slices.args[gemm])) == {"grid": [1, 1, 1]}
    assert t.kind_counts() == {"cpu_op": 1, "runtime": 1, "kernel": 1, "memcpy": 1,
                               "annotation": 1}
    assert t.meta.load_stats.loaded == 5


def test_explicit_flows_follow_sorting():
    b, rows_cpu, rows_gpu = _toy()
    b.add_flows([rows_cpu[1]], [rows_gpu[0]], kind=0)
    t = b.finish()
    assert t.name_of(int(t.flows.src[0])) == "cudaLaunchKernel"
    assert t.name_of(int(t.flows.dst[0])) == "gemm"


def test_partial_overlaps_never_share_a_row():
    start = np.array([0, 5, 12])
    dur = np.array([10, 10, 8])
    depth, lane_depth = assign_depths(start, dur, np.zeros(3, np.int32), 1)
    assert depth.tolist() == [0, 1, 0]
    assert lane_depth.tolist() == [2]


def test_zero_length_slices_nest_without_fallback(monkeypatch):
    import sofa_gui.core.nesting as nesting

    def no_fallback(s, e):
        raise AssertionError("greedy fallback used")

    monkeypatch.setattr(nesting, "_greedy_depth", no_fallback)
    start = np.array([10, 10, 12, 12, 25])
    dur = np.array([10, 0, 3, 0, 5])
    depth, lane_depth = assign_depths(start, dur, np.zeros(5, np.int32), 1)
    assert depth.tolist() == [0, 1, 1, 2, 0]
    assert lane_depth.tolist() == [3]


def test_adjacent_children_share_a_row():
    start = np.array([0, 0, 10, 20])
    dur = np.array([30, 10, 10, 10])
    depth, _ = assign_depths(start, dur, np.zeros(4, np.int32), 1)
    assert depth.tolist() == [0, 1, 1, 1]


def test_finish_honours_a_cancel_between_phases():
    import pytest

    from sofa_gui.core.progress import Cancelled, CancelToken

    b, _, _ = _toy()
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        b.finish(progress=token)


def test_memo_builds_once_and_copies_do_not_inherit_it():
    import dataclasses
    t = _toy()[0].finish()
    calls = []
    assert t.memo("k", lambda: calls.append(1) or 42) == 42
    assert t.memo("k", lambda: calls.append(1) or 43) == 42
    assert calls == [1]
    other = dataclasses.replace(t, names=list(t.names))
    assert "k" not in other.derived
