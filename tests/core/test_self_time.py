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
