"""A loader started again inside the loop (a new epoch's ``iter(loader)`` starting worker
processes): its time is input, keeping the workers is the fix, and the steps it slows are
not periodic extra work; a step that fetches from a second loader with work between the
fetches (an evaluation) is."""

from __future__ import annotations

import numpy as np
import pytest

from sofa_gui.core.analysis.breakdown import compute_breakdown
from sofa_gui.core.analysis.findings import find_bottlenecks
from sofa_gui.core.analysis.loader_restarts import restarts
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.analysis.verdict import compute_verdict
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import Kind, LaneKind

MS = 1_000_000
NEXT = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


class Loop:
    """A CPU-only training loop on one thread, built step by step (times in ms)."""

    def __init__(self):
        self.b = TraceBuilder("synth", "test")
        self.cpu = self.b.lane(("cpu",), "main", LaneKind.CPU, "proc", pid=1, tid=1)
        self.t, self.starts, self.ends = 0.0, [], []

    def op(self, d: float, name: str) -> None:
        self.b.add_slices([int(self.t * MS)], [int(d * MS)], self.cpu, [name],
                          kind=Kind.CPU_OP if name.startswith("aten::") else Kind.ANNOTATION)
        self.t += d

    def untraced(self, d: float) -> None:
        self.t += d

    def step(self, body) -> None:
        self.starts.append(int(self.t * MS))
        body()
        self.ends.append(int(self.t * MS))

    def train(self) -> None:
        self.op(8.0, "aten::conv2d")
        self.op(0.5, "Optimizer.step#SGD.step")

    def analyze(self):
        trace = self.b.finish()
        iters = Iterations("annotations", "test", np.asarray(self.starts, np.int64),
                           np.asarray(self.ends, np.int64), 1.0)
        bd = compute_breakdown(trace, iters)
        findings = find_bottlenecks(trace, iters, bd)
        return trace, bd, {f.id: f for f in findings}, compute_verdict(bd, findings)


def epochs_loop(restart_ms: float) -> Loop:
    """12 steps of 4-step epochs: each epoch's first step (every 4th from the third) ends
    the old iterator (its fetch shuts the workers down), builds a new one (untraced but for
    the iterator's seed and its sampler's ops) and waits for its first batch."""
    lp = Loop()
    for i in range(12):
        def body(first=i % 4 == 2):
            if first:  # the iterator's own ops: its seed, its sampler's permutation
                lp.op(restart_ms / 4, NEXT)
                for op in ("aten::random_", "aten::random_", "aten::randperm",
                           "aten::randperm"):
                    lp.untraced(restart_ms / 8)
                    lp.op(0.05, op)
                lp.op(restart_ms / 4, NEXT)
            else:
                lp.op(0.5, NEXT)
            lp.train()
        lp.step(body)
    return lp


def test_a_restarted_loader_is_input_with_keeping_its_workers_as_the_fix():
    trace, bd, found, verdict = epochs_loop(60.0).analyze()
    back = restarts(trace, bd.host.lane, bd.host.starts, bd.host.ends)
    assert back.window.tolist() == [2, 6, 10] and back.fetch_ns == pytest.approx(0.5 * MS)
    # the untraced construction between the two fetches is the loader's, not "other"
    assert bd.host.column("data_loading")[6] == pytest.approx(60.0 * MS, rel=0.01)
    assert verdict.bound == "input"
    assert "periodic_extra" not in found
    f = found["input_pipeline_bound"]
    keep = next(x for x in f.fixes if x.name == "persistent workers")
    assert "persistent_workers=True" in keep.text
    wall = sum(e - s for s, e in zip(bd.host.starts, bd.host.ends))
    saved = 3 * (60.2 - 0.5) * MS  # each restart less the one fetch a kept loader makes
    assert keep.estimate == pytest.approx(wall / (wall - saved), rel=0.02)
    assert f.estimated_by == "persistent workers"
    assert "started again inside the loop" in f.summary


def test_a_cheap_epoch_boundary_promises_little():
    _, _, found, _ = epochs_loop(1.0).analyze()
    f = found.get("input_pipeline_bound")
    keep = next((x for x in f.fixes if x.name == "persistent workers"), None) if f else None
    assert keep is None or keep.estimate < 1.05


def test_an_evaluation_over_its_own_loader_is_periodic_work_not_a_restart():
    lp = Loop()
    for i in range(12):
        def body(evaluate=i % 4 == 3):
            lp.op(0.5, NEXT)
            lp.train()
            if evaluate:  # a validation pass: fetches with the model's work between them
                for _ in range(4):
                    lp.op(0.5, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
                    lp.op(6.0, "aten::linear")
        lp.step(body)
    trace, bd, found, _ = lp.analyze()
    assert len(restarts(trace, bd.host.lane, bd.host.starts, bd.host.ends)) == 0
    assert "periodic_extra" in found
    f = found.get("input_pipeline_bound")
    if f is not None:
        assert all(x.name != "persistent workers" for x in f.fixes)


def test_two_fetches_with_another_thread_working_between_them_are_no_restart():
    # a step function whose ops run on a runtime pool thread between two fetches (the
    # loop's thread has nothing of its own there): the step's work, not the loader's
    lp = Loop()
    pool = lp.b.lane(("pool",), "pool", LaneKind.CPU, "proc", pid=1, tid=2)
    for _ in range(8):
        def body():
            lp.op(0.5, NEXT)
            lp.b.add_slices([int(lp.t * MS)], [int(8 * MS)], pool, ["aten::addmm"],
                            kind=Kind.CPU_OP)
            lp.untraced(8.0)
            lp.op(0.5, NEXT)
            lp.train()
        lp.step(body)
    trace, bd, _, _ = lp.analyze()
    assert len(restarts(trace, bd.host.lane, bd.host.starts, bd.host.ends)) == 0
    assert bd.host.column("data_loading")[3] == pytest.approx(1.0 * MS)
