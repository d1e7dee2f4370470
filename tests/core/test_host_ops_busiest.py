"""HostOps.busiest_lane picks what ``max`` over every lane picked, in one pruned pass."""

from __future__ import annotations

import numpy as np
import pytest

from sofa_gui.core.analysis.iterations.stream import HostOps
from sofa_gui.core.builder import TraceBuilder
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
