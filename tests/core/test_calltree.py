"""Call trees on real traces: totals equal the lanes' top-level time in the scope, nodes
partition the slices, bottom-up splits the same time by function, the icicle nests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.analysis import calltree
from sofa_gui.core.analysis.iterations import detect_iterations
from sofa_gui.core.analysis.self_time import parents, self_times
from sofa_gui.core.importers import load_trace
from sofa_gui.core.samples import demo_trace_path

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDING = DATA / "recording-torch-pyspy"


@pytest.fixture(scope="module")
def trace():
    return load_trace(demo_trace_path())


def _top_level_ns(trace, lanes, lo=None, hi=None) -> int:
    s = trace.slices
    par = parents(trace)
    m = np.isin(s.lane, lanes) & (par < 0)
    if lo is not None:
        m &= (s.start >= lo) & (s.start < hi)
    return int(s.dur[m].sum())


@pytest.mark.parametrize("k", [0, 2, 5])
def test_root_total_is_the_main_threads_top_level_time_in_an_iteration(trace, k):
    iters = detect_iterations(trace)
    lanes, label = calltree.pick_lanes(trace, None)
    scope = calltree.scope_of(iters, k)
    tree = calltree.build(trace, lanes, scope, lane_label=label)
    want = _top_level_ns(trace, lanes, iters.starts[k], iters.ends[k])
    assert want > 0 and int(tree.total[0]) == want
    assert sum(int(tree.total[c]) for c in tree.children(0)) == want
    # every node's children fit in it, and self = total - children (nesting is proper here)
    for n in range(len(tree)):
        kids = tree.children(n)
        assert sum(int(tree.total[c]) for c in kids) <= tree.total[n]
    # instances partition the slices of the scope, and a node's totals are its slices'
    s = trace.slices
    for n in tree.children(0)[:5]:
        inst = tree.instances(n)
        assert len(inst) == tree.count[n]
        assert int(s.dur[inst].sum()) == tree.total[n]
        assert set(trace.names[int(i)] for i in s.name[inst]) == {tree.names[n]}
        assert int(self_times(trace, inst).sum()) == tree.self_ns[n]


def test_whole_trace_and_steady_scope(trace):
    iters = detect_iterations(trace)
    lanes, _ = calltree.pick_lanes(trace, None)
    whole = calltree.build(trace, lanes)
    assert int(whole.total[0]) == _top_level_ns(trace, lanes)
    assert int(whole.count.sum() - whole.count[0]) == int(np.isin(trace.slices.lane,
                                                                  lanes).sum())
    steady = calltree.build(trace, lanes, calltree.scope_of(iters, steady=True))
    first = int(iters.steady[0])
    assert int(steady.total[0]) == _top_level_ns(trace, lanes, iters.starts[first],
                                                 iters.ends[-1])


def test_bottom_up_splits_the_same_time_by_function(trace):
    iters = detect_iterations(trace)
    lanes, _ = calltree.pick_lanes(trace, None)
    scope = calltree.scope_of(iters, 2)
    down = calltree.build(trace, lanes, scope)
    up = calltree.build(trace, lanes, scope, bottom_up=True)
    assert up.total[0] == down.total[0]
    funcs = up.children(0)
    assert int(sum(up.self_ns[f] for f in funcs)) == int(down.self_ns.sum())
    # a function's self time is the sum over its call paths in the top-down tree
    by_name: dict[str, int] = {}
    for n in range(1, len(down)):
        by_name[down.names[n]] = by_name.get(down.names[n], 0) + int(down.self_ns[n])
    for f in funcs[:10]:
        assert up.self_ns[f] == by_name[up.names[f]]
        callers = up.children(f)
        assert sum(int(up.self_ns[c]) for c in callers) <= up.self_ns[f]
        inst = up.instances(f)
        assert len(inst) == up.count[f]
    hottest = funcs[0]
    assert up.self_ns[hottest] == max(by_name.values())


def test_all_threads_of_a_rank_and_lane_names(trace):
    lanes, label = calltree.pick_lanes(trace, "rank -1")
    assert len(lanes) > 1 and label == "all threads of rank -1"
    tree = calltree.build(trace, lanes, lane_label=label)
    threads = tree.children(0)
    assert {tree.names[t] for t in threads} <= {trace.lanes.name[int(x)] for x in lanes}
    assert int(tree.total[0]) == _top_level_ns(trace, lanes)
    assert int(sum(tree.total[t] for t in threads)) == tree.total[0]
    name = trace.lanes.name[int(lanes[0])]
    assert calltree.pick_lanes(trace, name)[1] == name
    with pytest.raises(ValueError, match="matches several"):
        calltree.pick_lanes(trace, "thread")


def test_icicle_frames_nest_inside_their_parents(trace):
    lanes, _ = calltree.pick_lanes(trace, None)
    for bottom_up in (False, True):
        tree = calltree.build(trace, lanes, bottom_up=bottom_up)
        nodes, x, w, level = calltree.icicle(tree)
        at = {int(n): (int(a), int(b)) for n, a, b in zip(nodes, x, w)}
        assert at[0] == (0, int(tree.total[0]))
        for n, (a, b) in at.items():
            p = int(tree.parent[n])
            if p >= 0:
                pa, pw = at[p]
                assert pa <= a and a + b <= pa + pw
        assert (level == tree.level[nodes]).all()


def test_py_spy_stacks_join_the_tree():
    """A recording with py-spy: the sampled Python stacks nest into a tree of their own
    lane (frames under frames), and text output lists it."""
    trace = load_trace(RECORDING)
    sampled = [i for i, n in enumerate(trace.lanes.name) if "py-spy" in n.lower()]
    if not sampled:
        pytest.skip("recording has no py-spy lane")
    tree = calltree.build(trace, np.array(sampled[:1]))
    assert len(tree) > 3 and int(tree.level.max()) >= 3
    lines = calltree.tree_text(tree, depth=3)
    assert lines[0].startswith("Call tree (top-down), whole trace")
