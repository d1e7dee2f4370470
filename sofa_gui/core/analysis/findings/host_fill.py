"""The Python numbers a tensor is made from: copied in one by one, for every input a
batched call takes.

``torch.tensor(rows)`` of a Python list (``torch.as_tensor`` of one too) records an
``aten::empty`` for the new tensor and then ``aten::to`` and ``aten::lift_fresh``; between
the two, untraced, it copies every number of the list into the tensor (converting each
Python float).  That time grows with the numbers, not with the calls: a request's
``torch.tensor([features])`` of 32 floats spends 3.3-3.9 µs there as captured (the
recorder's own gap between two events is 0.4 µs of it), and one ``torch.tensor`` of 128
such rows, the batched server's input, takes 450-490 µs on the idle machine where the
whole batched step takes 0.56 ms: 80% of what batching leaves.  Read as a fixed cost
paid once, that copy is missing from the step after the fix, and a traced scorer's 128
requests batched read 57x and 39x where 7.4x is measured.

So each tensor made from host values in a unit adds its copy, the gap after its
``aten::empty`` less the recorder's gap between two events (the profiler's cost per event
over :data:`.recorder_cost.COST_PER_GAP`), for every further input.  A tensor made from a
numpy array (``torch.tensor(array)``) records its copy as ``aten::copy_`` instead, whose
elements the batching estimate counts already, and shows no such gap.
"""

from __future__ import annotations

import re

import numpy as np

from .context import Ctx
from .recorder_cost import COST_PER_GAP

#: What follows a tensor's ``aten::empty`` once ``torch.tensor`` has copied a list into it.
FILLED = re.compile(r"^aten::(to|lift_fresh)$")


def host_fill_ns(ctx: Ctx, ops: np.ndarray, per_event: float) -> float:
    """ns ``ops`` (framework ops, sorted by start) spend copying Python numbers into the
    tensors made from them: per ``aten::empty`` followed at its depth by ``aten::to`` or
    ``aten::lift_fresh``, the time between the two less the recorder's own gap between
    two events (``per_event``, the profiler's cost per event, over
    :data:`COST_PER_GAP`)."""
    if len(ops) < 2:
        return 0.0
    s = ctx.trace.slices
    a, b = ops[:-1], ops[1:]
    hit = (np.isin(s.name[a], ctx.trace.name_ids(lambda n: n == "aten::empty"))
           & np.isin(s.name[b], ctx.trace.name_ids(FILLED.match))
           & (s.depth[a] == s.depth[b]))
    gap = (s.start[b[hit]] - s.end[a[hit]]).astype(np.float64) - per_event / COST_PER_GAP
    return float(np.clip(gap, 0.0, None).sum())
