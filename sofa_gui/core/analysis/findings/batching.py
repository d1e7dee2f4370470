"""Steps that serve their inputs a few at a time: CPU inference whose math ops see batches
of a handful of inputs, whose step is thousands of tiny calls (a model run for one input
or one token at a time), or whose step is calls of a compiled function that are mostly
their fixed cost (:mod:`.compiled_calls`: a SavedModel called once per request); and
CPU training on one sample a step, every math op on a single row (a tutorial's
one-name-at-a-time RNN).  Batching the requests (or the samples) is the fix
(:mod:`.small_batch` reports it; :mod:`.run_rules`' tiny-ops check leaves it the steps of
a small batch, of such calls and those whose repeats are a model run per request: a loop
of a few tiny calls stays the tiny-ops check's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from .batch_estimate import median_row, repeated_blocks
from .causes import self_times
from .compiled_calls import CompiledCalls, compiled_calls
from .context import Ctx
from .host_estimate import MATH_OP
from .read_rules import in_read_loops
from .work import TINY_NS, innermost, input_dims, name_medians, outermost, starts_inside

#: The batch the model's math ops see (first input's first dimension) at most this.
SMALL_BATCH = 4
#: Steps whose math ops' own work is at most this share of the steady steps' time are
#: made of the fixed per-call costs (a share, not a step's length: a loaded machine
#: stretches a step, not the part of it that is math).
MATH_SHARE_MAX = 0.5
#: The share of a training step's math ops (with shapes) on a single row from which the
#: step trains on one sample.
ONE_ROW_SHARE = 0.8


#: Framework calls per step (all depths) from which a step of tiny math calls is made of
#: per-call cost, whatever batch its shapes show (a token-by-token decode loop).
MANY_CALLS = 1000


@dataclass(frozen=True)
class SmallBatch:
    """CPU inference answered a few inputs (or one token) at a time, or training on one
    sample a step: ``batch`` its math ops' batch (None where shapes are not recorded),
    ``mine`` the main thread's steady ops outside read loops, ``math`` its math ops,
    ``step`` the median step (ns), ``small``
    whether the batch seen is at most :data:`SMALL_BATCH` (else the step is made of tiny
    calls, or of ``calls`` of a compiled function that are mostly their fixed cost)."""

    batch: int | None
    mine: np.ndarray
    math: np.ndarray
    step: float
    small: bool
    calls: CompiledCalls | None = None

    def models_requests(self, ctx: Ctx) -> bool:
        """Batching the requests is the fix, not batching a loop of tiny ops: the batch
        seen is small, the step is calls of a compiled model, or the step's repeats are a
        model's requests (:func:`model_requests`)."""
        return self.small or self.calls is not None or model_requests(ctx)


def model_requests(ctx: Ctx) -> bool:
    """The median step's repeats (:func:`.batch_estimate.repeated_blocks`) are a model
    run once per request: their unit holds a call whose name's median is over
    :data:`.work.TINY_NS` (a convolution per image), which a reading as a loop of tiny ops
    would keep whole, though one batched call runs it once.  A loop of a few tiny calls
    (a matmul per item) is no model's request."""
    host = ctx.bd.host
    blocks = repeated_blocks(ctx, host, median_row(ctx, host))
    if not blocks:
        return False
    s = ctx.trace.slices
    top = outermost(s.start, s.end, blocks[0].ops)
    return bool((name_medians(s.name[top], s.dur[top]) > TINY_NS).any())


def small_batch(ctx: Ctx) -> SmallBatch | None:
    """The step's small-batch inference (batching the requests is the fix), or None:
    steps of per-call cost (:func:`_per_call_led`) whose math ops see batches of at most
    :data:`SMALL_BATCH` inputs, steps
    made of tiny calls (:func:`_tiny_calls`) whatever batch the shapes show, or of calls
    of a compiled function that are mostly their fixed cost (:mod:`.compiled_calls`).  In
    training only a step of one sample counts (:func:`_one_row_training`)."""
    return ctx.once("small_batch", lambda: _small_batch(ctx))


def _small_batch(ctx: Ctx) -> SmallBatch | None:
    host = ctx.bd.host
    mode = ctx.facts.value("mode")
    if host is None or ctx.bd.device is not None or mode not in ("inference", "training"):
        return None
    r = ctx.rows
    if not len(r):
        return None
    s = ctx.trace.slices
    mine = ctx.steady_slices(host, Kind.CPU_OP)
    mine = mine[~in_read_loops(ctx, s.start[mine])]  # a loop of reads is host_reads_in_loop's
    # the loader's calls (parsing, a sample's tensors, the collate) are input work
    mine = mine[~starts_inside(ctx, host.role_slices.get("data_loading", mine[:0]), mine)]
    math = mine[np.isin(s.name[mine], ctx.trace.name_ids(MATH_OP.match))]
    # the batch a kernel sees is its innermost math op's: under torch.func.vmap the outer
    # ops record one sample's shape, the kernel inside them the whole batch's
    kernels = innermost(s.start, s.end, math)
    batch = _batch(ctx, kernels)
    step = float(np.median(host.ends[r] - host.starts[r]))
    led = _per_call_led(ctx, math)
    small = batch is not None and batch <= SMALL_BATCH and led
    if mode == "training":  # only a single row per step; see :func:`_one_row_training`
        return _one_row_training(ctx, batch, mine, math, step, kernels) if led else None
    calls = None if small else compiled_calls(ctx, host)
    if not small and calls is None and not _tiny_calls(ctx, mine, math, len(r)):
        return None
    return SmallBatch(batch, mine, math, step, small, calls)


def _one_row_training(ctx: Ctx, batch: int | None, mine: np.ndarray, math: np.ndarray,
                      step: float, kernels: np.ndarray) -> SmallBatch | None:
    """Training on one sample a step: every math op of the step works on a single row
    (first input's first dimension 1, a matmul's weight gradient aside), the step made of
    per-call cost.  Each op's fixed cost is paid per sample, as in batch-1 inference, and
    training on batches of samples amortises it; a few samples a step stay a loop's or the
    math's."""
    if batch != 1 or not _all_one_row(ctx, kernels):
        return None
    return SmallBatch(batch, mine, math, step, True)


def _per_call_led(ctx: Ctx, math: np.ndarray) -> bool:
    """The steady steps are made of per-call cost: their math ops' own work (exclusive
    time) is at most :data:`MATH_SHARE_MAX` of the main thread's steady time.  Both parts
    run at the capture's pace, so a machine loaded or slow keeps the ratio a step's
    length would lose."""
    host, r = ctx.bd.host, ctx.rows
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    return float(self_times(ctx, math).sum()) <= MATH_SHARE_MAX * wall


def _all_one_row(ctx: Ctx, math: np.ndarray) -> bool:
    """The math ops with recorded shapes all but a few (:data:`ONE_ROW_SHARE` or more)
    have a matrix input with a dimension of one: a single row through a layer
    (``[1, k]``), or its weight gradient, an outer product (``[n, 1] x [1, k]``).  The few
    others work on the sample's own sequence, a row per position (an attention's keys
    projected over its encoder's outputs, ``[10, 128] x [128, 128]`` once per target word,
    and their gradients), not on several samples.  None recorded is no proof."""
    seen = one = 0
    for j in math.tolist():
        mats = [d for d in input_dims(ctx, j) if len(d) >= 2]
        if mats:
            seen += 1
            one += any(1 in d for d in mats)
    return seen > 0 and one >= ONE_ROW_SHARE * seen


def _tiny_calls(ctx: Ctx, mine: np.ndarray, math: np.ndarray, n_steps: int) -> bool:
    """The step is made of tiny calls: at least :data:`MANY_CALLS` framework calls per
    step and math calls whose median is tiny (:data:`.work.TINY_NS`)."""
    if not len(math) or len(mine) < MANY_CALLS * n_steps:
        return False
    return float(np.median(ctx.trace.slices.dur[math])) <= TINY_NS


def _batch(ctx: Ctx, math: np.ndarray) -> int | None:
    """The most common first dimension of the math ops' first input of two or more
    dimensions (recorded shapes; ``addmm``'s first input is its bias); None without
    shapes."""
    seen: dict[int, int] = {}
    for j in math[:: max(len(math) // 64, 1)].tolist():
        first = next((d for d in input_dims(ctx, j) if len(d) >= 2), None)
        if first is not None:
            seen[first[0]] = seen.get(first[0], 0) + 1
    return max(seen, key=seen.get) if seen else None
