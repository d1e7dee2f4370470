"""HostOps.busiest_lane picks what ``max`` over every lane picked, in one pruned pass."""

from __future__ import annotations

import numpy as np
import pytest

from sofa_gui.core.analysis.iterations import stream
from sofa_gui.core.analysis.iterations.stream import HostOps
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.nesting import assign_depths
from sofa_gui.core.trace import Kind, LaneKind


def _random_trace(rng: np.random.Generator, lanes: int):
    b = TraceBuilder("random", "test")
    for i in range(lanes):
        lane = b.lane(f"t{i}", "proc", LaneKind.CPU)
        n = int(rng.integers(0, 12))
        start = np.sort(rng.integers(0, 1000, n))
        dur = rng.integers(1, 300, n)
        b.add_slices(start, dur, lane, ["op"] * n, kind=int(Kind.CPU_OP))
    return b.finish()


def _brute(ops: HostOps, priority, min_top: int) -> int:
    lanes = [ln for ln in ops.lanes() if len(ops.top_level(ln)) >= min_top]
    if not lanes:
        return -1
    return max(lanes, key=lambda ln: (priority[ln], len(ops.top_level(ln))))


@pytest.mark.parametrize("seed", range(30))
def test_busiest_lane_matches_the_brute_force_choice(seed):
    rng = np.random.default_rng(seed)
    trace = _random_trace(rng, int(rng.integers(1, 25)))
    priority = rng.integers(0, 3, len(trace.lanes)) if seed % 2 else np.zeros(len(trace.lanes))
    for min_top in (1, 2):
        ops = HostOps(trace)
        assert ops.busiest_lane(priority, min_top) == _brute(HostOps(trace), priority, min_top)


def _per_lane_top(trace, ops: HostOps, lane: int) -> np.ndarray:
    """The top level as it was computed lane by lane (an independent reference)."""
    s = trace.slices
    idx = np.flatnonzero((s.lane == lane) & np.isin(np.arange(len(s)), ops._idx))
    if not len(idx):
        return idx
    depth, _ = assign_depths(s.start[idx], s.dur[idx], np.zeros(len(idx), np.int32), 1)
    counts = np.bincount(depth)
    return idx[depth == int(np.flatnonzero(counts >= 0.25 * counts.max())[0])]


@pytest.mark.parametrize("seed", range(20))
def test_top_level_of_every_lane_at_once_equals_lane_by_lane(seed):
    rng = np.random.default_rng(100 + seed)
    trace = _random_trace(rng, int(rng.integers(1, 40)))
    ops = HostOps(trace)
    for lane in range(len(trace.lanes)):
        assert ops.top_level(lane).tolist() == _per_lane_top(trace, ops, lane).tolist()


def test_many_one_op_threads_need_no_per_lane_nesting(monkeypatch):
    # 100k one-op threads: busiest_lane nested each lane on its own (20k: 18 s in the CLI)
    b = TraceBuilder("threads", "test")
    n = 30_000
    lanes = [b.lane(f"t{i}", "p", LaneKind.CPU) for i in range(n)]
    b.add_slices(np.arange(n) * 10, np.full(n, 5), lanes, ["op"] * n, kind=int(Kind.CPU_OP))
    trace = b.finish()
    calls = []
    real = stream.assign_depths
    monkeypatch.setattr(stream, "assign_depths", lambda *a: calls.append(1) or real(*a))
    ops = HostOps(trace)
    assert ops.busiest_lane(min_top=2) == -1
    assert ops.busiest_lane(min_top=1) == 0
    assert len(calls) == 1
