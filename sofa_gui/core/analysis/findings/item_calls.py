"""A Python loop over items that calls one compiled program per item and reads each call's
result before the next call (an ensemble trained member by member, each member's loss read
with ``float``): each call pays its fixed cost and each read waits for its call's program.
Batching the items into one call (``jax.vmap`` over them stacked) removes the calls and
the reads together; a read of all the results after the loop keeps every call.

The trace shows such a loop from two sides, read here by one rule (:func:`each_item`):

* from its calls (:attr:`.call_overhead.CompiledCallCosts.per_item`): nearly all of a
  step's compiled calls are of one program and nearly each is waited for past its return
  (its result read), :data:`MIN_ITEMS` or more a step.  ``call_overhead_bound`` measures
  their fixed cost, the waits among it;
* from its reads (:func:`one_program_loops`): a run of reads with a call of one jitted
  program between nearly each pair, so the reads are no read loop of their own
  (:mod:`.read_rules`).
"""

from __future__ import annotations

import numpy as np

from .context import Ctx

#: A jitted function's call on JAX's C++ fast path.
JIT_CALL = "PjitFunction("
#: Of a loop's items (its calls, or its pairs of consecutive reads) at least this share
#: has a call of its one program (and, counted by calls, a read of the call's result).
CALLS_PER_READ = 0.9
#: Calls of one function a step from which the step is a loop over items (one call each).
MIN_ITEMS = 2


def each_item(calls: np.ndarray | int, items: np.ndarray | float) -> np.ndarray | bool:
    """Whether ``calls`` (of one program, or of them those waited for) are nearly one per
    item of ``items``: at least :data:`CALLS_PER_READ` of them."""
    return calls >= CALLS_PER_READ * items


def one_program_loops(ctx: Ctx, ops: np.ndarray, at: np.ndarray, n_loops: int,
                      count: np.ndarray) -> np.ndarray:
    """Per loop of reads (``ops``: the loops' outermost computing ops, ``at`` the loop of
    each, ``count`` each loop's reads): a loop of calls of one compiled program that reads
    each call's result, the program called once per item (a model per ensemble member, a
    step per sample): calls of one jitted program in the loop for nearly each of its pairs
    of consecutive reads (:func:`each_item`, counted over the loop, not gap by gap)."""
    s = ctx.trace.slices
    jit = np.isin(s.name[ops], ctx.trace.name_ids(lambda n: n.startswith(JIT_CALL)))
    if not jit.any():
        return np.zeros(n_loops, bool)
    at, names = at[jit], s.name[ops[jit]].astype(np.int64)
    width = int(names.max()) + 1
    pairs, n = np.unique(at * width + names, return_counts=True)  # calls per (loop, name)
    most = np.zeros(n_loops, np.int64)
    np.maximum.at(most, pairs // width, n)
    return each_item(most, count - 1)
