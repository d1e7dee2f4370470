"""Which repeats are a loop over a sequence's positions, on small built traces: the
index each repeat picks must walk along one dimension of one tensor; along the first
dimension only a recurrent cell reads a time-major sequence (a layer called on each row
of a batch is the tiny-op and small-batch readings' loop)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sofa_gui.core.analysis.breakdown import compute_breakdown
from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.findings.sequence_loop import position_loop
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import Kind, LaneKind

US = 1000
STEPS, POSITIONS = 3, 12


def _args(dims, concrete=None) -> bytes:
    out = {"Input Dims": dims}
    if concrete is not None:
        out["Concrete Inputs"] = concrete
    return json.dumps(out).encode()


def _ctx(module: str, dim: int, walk: bool = True):
    """A trace of 3 steps, each a 12-times repeat of an index op picking position t of a
    [12, 4, 8] tensor (along ``dim``) and a call of ``module`` on the picked [4, 8]."""
    b = TraceBuilder("synth", "test")
    cpu = b.lane(("cpu",), "main", LaneKind.CPU, "proc", pid=1, tid=1)
    starts, names, durs, args = [], [], [], []
    shape = [12, 4, 8] if dim == 0 else [4, 12, 8]
    for i in range(STEPS):
        t0 = i * 1000
        for t in range(POSITIONS):
            at = t0 + 100 + 60 * t
            starts += [at, at + 10]
            names += ["aten::select", module]
            durs += [5, 40]
            args += [_args([shape, [], []], ["", str(dim), str(t if walk else 0)]),
                     _args([[4, 8], [4, 16], [48, 8], [48, 16]])]
    b.add_slices(np.asarray(starts) * US, np.asarray(durs) * US, cpu, names,
                 kind=Kind.CPU_OP, args=args)
    trace = b.finish()
    iters = Iterations("annotations", "test", np.arange(STEPS, dtype=np.int64) * 1000 * US,
                       (np.arange(STEPS, dtype=np.int64) * 1000 + 900) * US, 1.0)
    bd = compute_breakdown(trace, iters)
    return make_context(trace, iters, bd)


@pytest.mark.parametrize("dim", [0, 1])
def test_a_cell_called_per_time_step_is_a_loop_over_positions(dim):
    loop = position_loop(_ctx("aten::gru_cell", dim))
    assert loop is not None and loop.module == "aten::gru_cell"
    assert loop.count == POSITIONS and loop.dim == dim


def test_a_layer_called_on_each_row_of_a_batch_is_not():
    assert position_loop(_ctx("aten::linear", 0)) is None
    assert position_loop(_ctx("aten::linear", 1)) is not None  # positions of each row


def test_the_same_index_every_repeat_is_no_walk_over_positions():
    assert position_loop(_ctx("aten::gru_cell", 1, walk=False)) is None
