"""A loop over the positions of a sequence: the same small module called once per position
(a recurrent cell per time step with teacher forcing, a head applied to ``h[:, t]`` for
each ``t``), where one call over the whole sequence does the same work.

The trace shows such a loop as a run of repeats, inside each step, of the same unit of
outermost framework calls (:func:`.batch_estimate.repeated_blocks`) in which one call picks
the position: an indexing op (``aten::select`` / ``slice`` / ``narrow``) of the same
tensor along the same dimension, a different index each repeat (``torch.profiler``
records the dimension and the index among an op's concrete inputs).  That the positions
are picked from one tensor that holds them all is what says they are known before the
loop starts, so one call can take them together; a decoder that feeds each output back
as the next input picks nothing from such a tensor and is not this loop.  The positions
may also come from one op that returns them all as pieces (``x.unbind(1)``,
``x.split(1, 1)``, ``x.chunk(T, 1)``) right before the repeats, each repeat starting on a
piece's shape; where the capture records no input shapes, nothing says what was picked
and nothing is read.  In training its backward is a second run of repeats, of autograd
nodes, as many as the forward's, counted only with the picking op's own backward among
them (``SelectBackward0`` / ``SliceBackward0`` in each repeat: each fills a zero
gradient of the whole sequence to place one position's in it; ``UnbindBackward0`` /
``SplitBackward0`` once after them).  A model's alike layers repeat too, but pick no position.
Picking along the first dimension is picking rows of a batch one at a time (a per-sample
loss, a per-image crop: the tiny-op and small-batch readings' loops) unless the module is
a recurrent cell, which a time-major sequence (``x[t]``) feeds that way.

The estimate is :mod:`.batch_estimate`'s for a training loop of small calls: the step
without the profiler before the fix over the step after it, in which the repeats (forward
and backward) and the calls that gather their pieces (a ``stack`` of the outputs and its
backward) are replaced by one repeat as it runs now (its calls' fixed cost paid once) plus
the other repeats' matmul FLOPs at the rate of a batched matmul.  What it assumes: the
module's math does not get slower for running over the whole sequence (a recurrent
layer's time steps still run one after another, inside one call), and the other repeats'
elementwise work is small beside its fixed cost per call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..grad_facts import EVALUATE
from ..results import Evidence, Finding
from .batch_estimate import (
    PROFILER_NS_PER_EVENT,
    Block,
    added_ns,
    median_row,
    repeated_blocks,
    step_slices,
    step_window,
    unprofiled_ns,
)
from .context import Ctx, make_finding
from .host_estimate import fix_named
from .recorder_cost import per_event_ns
from .registry import Rule, rule
from .work import input_dims, outermost, slice_args

#: Ops that pick one position of a tensor (``x[:, t]``, ``x[:, t:t + 1]``, ``x.narrow``).
INDEX = re.compile(r"^aten::(select|slice|narrow)$")
#: Ops that return every position of a tensor as pieces at once (``x.unbind(1)``,
#: ``x.split(1, 1)``, ``x.chunk(T, 1)``): the loop then takes one piece per repeat.
SPLIT = re.compile(r"^aten::(unbind|split|chunk|unsafe_split)$")
#: The autograd node of a picking op's backward, by the op (``narrow`` is a ``slice``,
#: ``chunk`` a ``split``); the others are named after the op (``aten::select``:
#: ``SelectBackward0``).
PICK_NODE = {"aten::narrow": "SliceBackward", "aten::chunk": "SplitBackward"}
#: Ops that gather a loop's pieces into one tensor.
GATHER_OP = re.compile(r"^aten::(stack|cat)$")
#: Fewer repeats a step than this are no loop over a sequence's positions.
MIN_REPEATS = 4
#: A repeat of more outermost calls than this is no small module called per position (a
#: whole request's token-by-token decode repeats per request).
MAX_UNIT = 8
#: Recurrent cells and the layer that runs the same weights over a whole sequence.
CELL_LAYER = {"aten::lstm_cell": "nn.LSTM", "aten::gru_cell": "nn.GRU",
              "aten::rnn_tanh_cell": "nn.RNN", "aten::rnn_relu_cell": "nn.RNN"}
#: The fix's name in :data:`.fixes.FIXES`.
FIX_NAME = "one call over the sequence"


@dataclass(frozen=True)
class PositionLoop:
    """A step's loop over positions: the ``forward`` repeats (and the ``backward`` ones in
    training), the repeated ``module`` call (the unit's call with the most time, the
    indexing left out) and the unit's ``calls``, and the tensor the positions are picked
    from (``shape``, along ``dim``) by ``pick`` (the indexing op in each repeat, or the one
    op before them that returns every piece: ``split``, its slice)."""

    row: int
    forward: Block
    backward: Block | None
    module: str
    calls: tuple[str, ...]
    shape: tuple[int, ...]
    dim: int
    pick: str = "aten::select"
    split: int | None = None

    @property
    def count(self) -> int:
        return self.forward.count

    @property
    def blocks(self) -> list[Block]:
        return [b for b in (self.forward, self.backward) if b is not None]


def position_loop(ctx: Ctx) -> PositionLoop | None:
    """The median steady step's loop over positions (host-only PyTorch runs), once per
    analysis; None where it has none."""
    return ctx.once("position_loop", lambda: _find(ctx))


def _find(ctx: Ctx) -> PositionLoop | None:
    host = ctx.bd.host
    if host is None or ctx.bd.device is not None or not len(ctx.rows) \
            or ctx.facts.value("framework") != "pytorch":
        return None
    row = median_row(ctx, host)
    blocks = repeated_blocks(ctx, host, row, cover=0.0)
    every = step_slices(ctx, host, row)
    for b in blocks:
        found = _picks_positions(ctx, b) or _takes_pieces(ctx, b, every)
        if found is None:
            continue
        shape, dim, module, calls, pick, split = found
        if dim == 0 and module not in CELL_LAYER:
            continue  # rows of a batch one at a time: the tiny-op and small-batch readings'
        back = next((x for x in blocks
                     if x is not b and _is_backward(ctx, x, b, pick, split, every)), None)
        return PositionLoop(row, b, back, module, calls, shape, dim, pick, split)
    return None


def _unit(ctx: Ctx, b: Block) -> np.ndarray:
    """The outermost calls of ``b``'s repeats, by start (``count x period`` of them)."""
    s = ctx.trace.slices
    return outermost(s.start, s.end, b.ops)[: b.count * b.period]


def _repeats(ctx: Ctx, b: Block):
    """(outermost calls as one row per repeat, the unit's call names) of a block short
    and repeated enough to be a loop over positions; else None."""
    if b.count < MIN_REPEATS or b.period > MAX_UNIT:
        return None
    top = _unit(ctx, b)
    if len(top) < b.count * b.period:
        return None
    top = top.reshape(b.count, b.period)
    names = ctx.trace.names
    return top, tuple(names[int(n)] for n in ctx.trace.slices.name[top[0]])


def _picks_positions(ctx: Ctx, b: Block):
    """(shape, dim, module, calls) where each repeat of ``b`` picks a position of one
    tensor along one dimension, a different one each repeat, and calls the same module
    on the same shapes; else None."""
    unit = _repeats(ctx, b)
    if unit is None:
        return None
    top, calls = unit
    picks = [k for k, n in enumerate(calls) if INDEX.match(n)]
    for k in picks:
        got = _walk(ctx, top[:, k], b.count)
        if got is None:
            continue
        module = _module(ctx, top, calls, picks)
        if module is not None:
            return got[0], got[1], module, calls, calls[k], None
    return None


def _takes_pieces(ctx: Ctx, b: Block, every: np.ndarray):
    """(shape, dim, module, calls, pick, split) where the last outermost call before
    ``b``'s repeats returns every position of one tensor as pieces (:data:`SPLIT`, one
    position a piece, as many as the repeats) and each repeat, picking nothing itself,
    starts on a piece's shape and calls the same module on the same shapes; else None.
    Without the recorded input shapes nothing says what the pieces are: None."""
    unit = _repeats(ctx, b)
    if unit is None:
        return None
    top, calls = unit
    s, names = ctx.trace.slices, ctx.trace.names
    if any(INDEX.match(n) for n in calls):
        return None
    ops = every[s.kind[every] == int(Kind.CPU_OP)]
    before = outermost(s.start, s.end, ops[s.end[ops] <= b.start])
    if not len(before) or not SPLIT.match(names[int(s.name[before[-1]])]):
        return None
    j = int(before[-1])
    got = _pieces(ctx, j)
    if got is None or got[0][got[1]] != b.count:
        return None
    shape, dim, piece = got
    first = input_dims(ctx, int(top[0, 0]))
    if not first or tuple(first[0]) != piece:
        return None
    module = _module(ctx, top, calls, [])
    return None if module is None else (shape, dim, module, calls, names[int(s.name[j])], j)


def _pieces(ctx: Ctx, j: int) -> tuple[tuple[int, ...], int, tuple[int, ...]] | None:
    """(shape, dim, one piece's shape) of the split op ``j`` where it returns one position
    a piece (``unbind``; ``split`` of size 1; ``chunk`` into as many pieces as positions);
    None otherwise or where its shapes and arguments are not recorded."""
    dims, concrete = input_dims(ctx, j), _concrete(ctx, j)
    if not dims or len(concrete) < 2:
        return None
    shape = tuple(dims[0])
    try:
        if ctx.trace.names[int(ctx.trace.slices.name[j])] == "aten::unbind":
            dim = int(concrete[1]) % len(shape)
            return shape, dim, shape[:dim] + shape[dim + 1:]
        size, dim = int(concrete[1]), int(concrete[2]) % len(shape)
    except (ValueError, IndexError, ZeroDivisionError):
        return None
    chunk = ctx.trace.names[int(ctx.trace.slices.name[j])] == "aten::chunk"
    if (size != shape[dim]) if chunk else (size != 1):
        return None
    return shape, dim, shape[:dim] + (1,) + shape[dim + 1:]


def _walk(ctx: Ctx, ops: np.ndarray, count: int) -> tuple[tuple[int, ...], int] | None:
    """(shape, dim) where the indexing ops ``ops`` (one a repeat) take a tensor of one
    shape along one dimension of at least ``count`` positions, each at another index."""
    seen = set()
    shape = dim = None
    for j in ops.tolist():
        dims, concrete = input_dims(ctx, j), _concrete(ctx, j)
        if not dims or len(concrete) < 3:
            return None
        try:
            d, at = int(concrete[1]), int(concrete[2])
            one = _one_position(ctx.trace.names[int(ctx.trace.slices.name[j])], concrete)
        except ValueError:
            return None
        if not one:
            return None
        this = tuple(dims[0])
        if shape is None:
            shape, dim = this, d
        if this != shape or d != dim or at in seen or not -len(shape) <= d < len(shape):
            return None
        seen.add(at)
    if shape is None or dim is None or shape[dim] < count:
        return None
    return shape, dim % len(shape)


def _one_position(name: str, concrete: list[str]) -> bool:
    """The indexing op picks one position: a ``select``, a ``slice`` from ``t`` to ``t + 1``
    (step 1), a ``narrow`` of length 1 (ValueError where its bounds are not numbers)."""
    if name.endswith("select"):
        return True
    if name.endswith("narrow"):
        return len(concrete) >= 4 and int(concrete[3]) == 1
    return len(concrete) >= 4 and int(concrete[3]) - int(concrete[2]) == 1 \
        and (len(concrete) < 5 or concrete[4] in ("", "1"))


def _concrete(ctx: Ctx, j: int) -> list[str]:
    got = slice_args(ctx, j).get("Concrete Inputs")
    return [str(x) for x in got] if isinstance(got, list) else []


def _module(ctx: Ctx, top: np.ndarray, calls: tuple[str, ...], picks: list[int]) -> str | None:
    """The unit's call with the most time (indexing left out), where every repeat calls it
    on the same input shapes; None otherwise."""
    s = ctx.trace.slices
    rest = [k for k in range(len(calls)) if k not in picks]
    if not rest:
        return None
    k = max(rest, key=lambda c: float(s.dur[top[:, c]].sum()))
    shapes = {repr(input_dims(ctx, int(j))) for j in top[:, k].tolist()}
    return calls[k] if len(shapes) == 1 else None


def _is_backward(ctx: Ctx, x: Block, fwd: Block, pick: str, split: int | None,
                 every: np.ndarray) -> bool:
    """``x`` is the backward of the loop ``fwd``: after it, as many repeats (the first or
    last may differ: the gradients accumulate into the parameters once), each of autograd
    nodes, and the picking op's own backward with them: in each repeat for an indexing
    op (``SelectBackward0``), once after the repeats start for an op that returned every
    piece (``UnbindBackward0``).  A tensor that needs no gradient records no such node:
    the repeats are then not proven this loop's backward."""
    names = ctx.trace.names
    s = ctx.trace.slices
    if x.start < fwd.end or not fwd.count - 2 <= x.count <= fwd.count:
        return False
    head = _unit(ctx, x)[: x.period]
    if not all(EVALUATE.match(names[int(n)]) for n in s.name[head]):
        return False
    node = PICK_NODE.get(pick, _node_of(pick))
    seen = _unit(ctx, x) if split is None else every[s.start[every] >= x.start]
    return node in {_bare(names[int(n)]) for n in np.unique(s.name[seen])}


def _bare(name: str) -> str:
    """An autograd node's call without its prefix and version (``SelectBackward``)."""
    return EVALUATE.sub("", name).rstrip("0123456789")


@dataclass(frozen=True)
class SequenceFix:
    """The loop replaced by one call over the sequence: the step without the profiler
    before (``before_ns``) and after (``after_ns``), the repeats' time (``loop_ns``), one
    repeat (``unit_ns``), the other repeats' matmul math (``math_ns``) and the calls that
    gather the pieces (``gather_ns``), all unprofiled; ``per_event`` the profiler's cost
    taken off (ns, read off the capture or not)."""

    before_ns: float
    after_ns: float
    loop_ns: float
    unit_ns: float
    math_ns: float
    gather_ns: float
    per_event: tuple[float, bool]
    measured_rate: bool

    def speedup(self) -> float:
        return self.before_ns / max(self.after_ns, 1e-6)


def sequence_fix(ctx: Ctx, loop: PositionLoop) -> SequenceFix:
    """One call over the sequence in ``loop``'s step: the repeats and the calls gathering
    their pieces go, one repeat stays (its calls' fixed cost, paid once) and the other
    repeats' matmul FLOPs are added at a batched matmul's rate (their elementwise work is
    taken as small beside their fixed cost, as for any training loop of small calls)."""
    host = ctx.bd.host
    every = step_slices(ctx, host, loop.row)
    a, b = step_window(ctx, host, loop.row, every)
    cost, read = per_event_ns(ctx, host.lane, PROFILER_NS_PER_EVENT)
    before = unprofiled_ns(float(b - a), len(every), cost)
    reps = [unprofiled_ns(x.span, x.events, cost) for x in loop.blocks]
    unit = sum(r / x.count for r, x in zip(reps, loop.blocks))
    adds = [added_ns(ctx, x.ops, x.count, x.count, elementwise=False) for x in loop.blocks]
    math = sum((x.count - 1) * add.ns for x, add in zip(loop.blocks, adds))
    gather = _gather_ns(ctx, every, loop)
    after = max(before - sum(reps) - gather, 0.0) + unit + math
    return SequenceFix(before, after, float(sum(reps)), unit, math, gather, (cost, read),
                       any(add.measured for add in adds))


def _gather_ns(ctx: Ctx, every: np.ndarray, loop: PositionLoop) -> float:
    """ns of the calls outside the repeats that gather their pieces, which go with them:
    a ``stack`` or ``cat`` of a list of exactly as many tensors as the loop has repeats
    (not a foreach optimizer or gradient-norm call over the parameters, which stays) and
    its autograd node (``StackBackward0``, unbinding the gradient one piece at a time)."""
    s, names = ctx.trace.slices, ctx.trace.names
    ops = every[s.kind[every] == int(Kind.CPU_OP)]
    inside = np.zeros(len(ops), bool)
    for x in loop.blocks:
        inside |= (s.start[ops] >= x.start) & (s.start[ops] < x.end)
    top = outermost(s.start, s.end, ops[~inside])
    gathers = [j for j in top.tolist() if GATHER_OP.match(names[int(s.name[j])])
               and _lists(ctx, j) == loop.count]
    nodes = {_node_of(names[int(s.name[j])]) for j in gathers}
    if loop.split is not None:  # the op that split the tensor into the pieces goes too
        gathers.append(loop.split)
        nodes.add(PICK_NODE.get(loop.pick, _node_of(loop.pick)))
    backs = [j for j in top.tolist() if _bare(names[int(s.name[j])]) in nodes]
    return float(s.dur[np.asarray(gathers + backs, np.int64)].sum())


def _node_of(op: str) -> str:
    """The autograd node an op's backward runs as: ``aten::stack`` -> ``StackBackward``."""
    name = op.split("::")[-1]
    return "".join(w.title() for w in name.split("_")) + "Backward"


def _lists(ctx: Ctx, j: int) -> int:
    """The most tensors in one list input of slice ``j`` (0 where it takes none)."""
    dims = slice_args(ctx, j).get("Input Dims")
    if not isinstance(dims, list):
        return 0
    return max((len(d) for d in dims if isinstance(d, list) and d and isinstance(d[0], list)),
               default=0)


@rule("sequence_loop", "Loop over a sequence's positions", 0.05, 0.20,
      "a module called once per position, where one call over the sequence does the same "
      "work (saved >= {moderate} of step)",
      factors={"math_unchanged": 0.9})
def sequence_loop(ctx: Ctx, spec: Rule) -> Finding | None:
    loop = position_loop(ctx)
    if loop is None:
        return None
    fix = sequence_fix(ctx, loop)
    share = max(1.0 - fix.after_ns / max(fix.before_ns, 1.0), 0.0)
    summary = _summary(ctx, loop, fix, share)
    f = make_finding(ctx, spec, share, summary, _evidence(ctx, loop),
                     speedup=fix.speedup(), assumption=spec.factor("math_unchanged"),
                     notes=("assumes the module's math runs as fast over the whole sequence",))
    x = fix_named(f, FIX_NAME)
    if x is not None:
        x.estimate = f.estimated_speedup
        x.estimate_why = "the repeats replaced by one call over the sequence"
    return f


def _summary(ctx: Ctx, loop: PositionLoop, fix: SequenceFix, share: float) -> str:
    layer = CELL_LAYER.get(loop.module)
    how = (f"one {layer} over the sequence (the cell's weights, the time steps inside one "
           f"call)" if layer else f"one {loop.module} on the whole tensor (or the positions "
           f"folded into the batch)")
    back = (f", and their backward {loop.backward.count} repeats of autograd nodes"
            if loop.backward is not None else "")
    filled = (", the index's backward filling a zero gradient of the whole sequence each "
              "time" if loop.backward is not None else "")
    a, b = step_window(ctx, ctx.bd.host, loop.row, step_slices(ctx, ctx.bd.host, loop.row))
    spans = sum(x.span for x in loop.blocks) / max(float(b - a), 1.0)
    picks = ("picks position t of one tensor of shape" if loop.split is None else
             f"takes piece t of one {loop.pick} (every position a piece) of a tensor of shape")
    return (f"Each step calls {loop.module} {loop.count} times in a row, once per position: "
            f"every repeat ({', '.join(loop.calls)}) {picks} "
            f"{list(loop.shape)} along dimension {loop.dim} and calls the module on the same "
            f"shapes{back}. The repeats take {pct(spans)} of the step. The positions are all "
            f"in that tensor before the loop starts, so {how} does the same work with each "
            f"call's fixed cost (dispatch, the Python between calls{filled}) paid once: "
            f"about {fix.speedup():.2f}x ({pct(share)} of the step saved). " + _basis(fix))


def _basis(fix: SequenceFix) -> str:
    """The estimate's basis and what it assumes, in words."""
    cost, read = fix.per_event
    said = "as fast as this capture ran its recorder" if read else "a fixed figure"
    rate = ("the trace's own large matmuls' rate" if fix.measured_rate else
            "the rate a batched fp32 matmul runs at on one core")
    return (f"Estimate: the step without the profiler's cost ({cost / 1e3:.2f} µs per "
            f"recorded event, {said}), {fmt_ns(fix.before_ns)}, over the step with the "
            f"repeats ({fmt_ns(fix.loop_ns)}) and the calls gathering their pieces "
            f"({fmt_ns(fix.gather_ns)}) replaced by one repeat as it runs now "
            f"({fmt_ns(fix.unit_ns)}) plus the other repeats' matmul FLOPs at {rate} "
            f"({fmt_ns(fix.math_ns)}), {fmt_ns(fix.after_ns)}; it assumes the module's math "
            f"runs no slower over the whole sequence and that the repeats' elementwise work "
            f"is small beside their fixed cost.")


def _evidence(ctx: Ctx, loop: PositionLoop) -> list[Evidence]:
    """The forward repeats, their backward and the module's first call, in the median
    step."""
    host, s = ctx.bd.host, ctx.trace.slices
    it = ctx.it(loop.row)
    out = [Evidence(f"{loop.count} repeats of {', '.join(loop.calls)}", loop.forward.start,
                    loop.forward.end, it, [host.lane])]
    if loop.backward is not None:
        out.append(Evidence(f"their backward: {loop.backward.count} repeats of autograd nodes",
                            loop.backward.start, loop.backward.end, it, [host.lane]))
    top = _unit(ctx, loop.forward)[: loop.forward.period]
    first = next((int(j) for j in top.tolist()
                  if ctx.trace.names[int(s.name[j])] == loop.module), None)
    if first is not None:
        out.append(Evidence(f"one {loop.module} call ({fmt_ns(int(s.dur[first]))})",
                            int(s.start[first]), int(s.end[first]), it, [host.lane]))
    return out

