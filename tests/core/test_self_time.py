"""Exclusive time: one definition for the Statistics table and the findings' causes."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from sofa_gui.core.analysis.findings.causes import self_times as cause_self
from sofa_gui.core.analysis.self_time import self_times
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import Kind, LaneKind

SAMPLE = (Path(__file__).parents[2] / "resources" / "samples"
          / "resnet50_num_workers_0.pt.trace.json.gz")


def _trace():
    """parent 0-100 with children 10-20 and 60-90 (grandchild 65-70); a second parent
    200-300 whose child 250-300 ends exactly with it."""
    b = TraceBuilder("synth", "test")
    cpu = b.lane(("cpu", 1, 1), "main", LaneKind.CPU, "proc", pid=1, tid=1)
    b.add_slices([0, 10, 60, 65, 200, 250], [100, 10, 30, 5, 100, 50], cpu,
                 ["p", "a", "b", "c", "q", "d"], kind=Kind.CPU_OP)
    return b.finish()


def test_known_answer():
    t = _trace()
    idx = np.arange(len(t.slices.start))
    names = [t.names[i] for i in t.slices.name[idx]]
    got = dict(zip(names, self_times(t, idx).tolist()))
    assert got == {"p": 60, "a": 10, "b": 25, "c": 5, "q": 50, "d": 50}


def test_causes_and_statistics_agree_on_a_real_trace():
    t = load_trace(SAMPLE, use_cache=False)
    lane = int(np.bincount(t.slices.lane).argmax())
    idx = np.flatnonzero(t.slices.lane == lane)
    ctx = SimpleNamespace(trace=t)
    assert (cause_self(ctx, idx) == self_times(t, idx)).all()
    assert (self_times(t, idx) <= t.slices.dur[idx]).all()


def _reference(t, idx):
    """The definition, slice by slice: duration minus the clipped part of each direct
    child (the last slice one row up on the lane starting at or before it)."""
    s = t.slices
    out = []
    for j in idx.tolist():
        row = np.flatnonzero(s.lane == s.lane[j])
        up = row[s.depth[row] == s.depth[j]]
        spent = 0
        kids = row[(s.depth[row] == s.depth[j] + 1) & (s.start[row] >= s.start[j])
                   & (s.start[row] <= s.end[j])]  # kids starting later overlap 0 ns
        for k in kids.tolist():
            before = up[s.start[up] <= s.start[k]]
            if len(before) and before[np.lexsort((before, s.start[before]))][-1] == j:
                spent += max(min(s.end[k], s.end[j]) - s.start[k], 0)
        out.append(max(int(s.dur[j]) - spent, 0))
    return np.array(out, np.int64)


def test_every_path_matches_the_definition():
    """One lane (the depth radix sort), several lanes (the lexsort), candidates given
    out of order, and slices asked that are not among the candidates."""
    t = load_trace(SAMPLE, use_cache=False)
    s = t.slices
    rng = np.random.default_rng(3)
    busy = np.argsort(np.bincount(s.lane))[::-1][:3]
    for lanes in (busy[:1], busy):
        on = np.flatnonzero(np.isin(s.lane, lanes))
        idx = np.sort(rng.choice(on, 60, replace=False))
        want = _reference(t, idx)
        assert (self_times(t, idx) == want).all()
        assert (self_times(t, idx, cand=on) == want).all()
        assert (self_times(t, idx, cand=rng.permutation(on)) == want).all()
    other = np.flatnonzero(~np.isin(s.lane, busy[:1]))[:5]
    mixed = np.concatenate([idx[:5], other])
    got = self_times(t, mixed, cand=np.flatnonzero(s.lane == busy[0]))
    assert (got[5:] == s.dur[other]).all()  # no candidate children: their whole duration


def test_a_child_starting_with_its_parent_and_one_overrunning_it():
    b = TraceBuilder("synth", "test")
    cpu = b.lane(("cpu", 1, 1), "main", LaneKind.CPU, "proc", pid=1, tid=1)
    b.add_slices([0, 0, 40], [100, 30, 80], cpu, ["p", "a", "b"], kind=Kind.CPU_OP)
    t = b.finish()
    idx = np.arange(len(t.slices.start))
    got = dict(zip([t.names[i] for i in t.slices.name[idx]], self_times(t, idx).tolist()))
    assert got["p"] == 10  # a (30) from the same start, b clipped at 100 (60)
    assert got["a"] == 30 and got["b"] == 80
