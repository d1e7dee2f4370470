"""The backward of a recurrent layer run over a whole sequence: tiny ops that are its math.

PyTorch's ``nn.GRU`` / ``nn.LSTM`` / ``nn.RNN`` on the CPU is one op (``aten::gru``)
whose forward runs the cell's small ops once per time step inside it; its backward is
not one op: autograd evaluates each time step's nodes (``AddmmBackward0``,
``SigmoidBackward0``, ``UnsafeSplitBackward0``, ...) one at a time at the top level,
a few microseconds each on a small hidden state.  They are tiny ops, but not a loop
that one op on stacked inputs replaces: each time step needs the previous one's hidden
state, and the layer already takes the whole batch and sequence in one call.  They are
the recurrence's own compute, so ``op_overhead_bound`` does not count them.

An evaluated node is the layer's when its ``Sequence number`` is that of an op recorded
inside the layer's forward call (autograd numbers a node by the forward op that made
it).  The layer runs over the sequence when its call is not itself a tiny op and a step
calls it at most :data:`MAX_CALLS` times (a model's layers); a layer called per item or
per time step (a name's letters one call each, a loop over a batch's samples) is the
loop that batching removes, and its backward stays counted.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from ..grad_facts import EVALUATE
from .context import Ctx
from .work import TINY_NS, name_medians, slice_args, starts_inside

#: PyTorch's recurrent layers over a sequence (one op a call).
RECURRENT = re.compile(r"^aten::(lstm|gru|rnn_tanh|rnn_relu)$")
#: At most this many calls of the layers a step: a model's layers, not a loop of calls.
MAX_CALLS = 4


def _sequence_number(ctx: Ctx, j: int):
    return slice_args(ctx, j).get("Sequence number")


def recurrence_backward(ctx: Ctx, host, ops: np.ndarray) -> np.ndarray:
    """Per op of ``ops`` (outermost ops of ``host``'s lane): a backward node of a
    recurrent layer that runs over its whole sequence in one call."""
    out = np.zeros(len(ops), bool)
    trace, s = ctx.trace, ctx.trace.slices
    mine = trace.lane_slices(host.lane)
    mine = mine[s.kind[mine] == int(Kind.CPU_OP)]
    layers = mine[np.isin(s.name[mine], trace.name_ids(RECURRENT.match))]
    if not len(layers) or not len(ops):
        return out
    layers = layers[name_medians(s.name[layers], s.dur[layers]) > TINY_NS]
    steady = ctx.in_steady(s.start[layers], host.starts, host.ends)
    if not steady.any() or steady.sum() > MAX_CALLS * max(ctx.ph.n_steady, 1):
        return out
    inner = mine[starts_inside(ctx, layers, mine) & ~np.isin(mine, layers)]
    numbers = {_sequence_number(ctx, int(j)) for j in inner.tolist()} - {None}
    evaluated = np.isin(s.name[ops], trace.name_ids(EVALUATE.match))
    for k in np.flatnonzero(evaluated).tolist():
        out[k] = _sequence_number(ctx, int(ops[k])) in numbers
    return out
