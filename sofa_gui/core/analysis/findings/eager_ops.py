"""The ops a step dispatches one at a time from Python, measured once per analysis for
the readings that use them (:mod:`.eager_dispatch`: an un-jitted step's overhead, a
batch made op by op beside a compiled step, or the training state updated op by op
beside it; the tiny-ops check leaves the last two alone), and whether a TensorFlow
step runs eagerly (:func:`tf_eager_step`: the tiny-ops check's loop of ops that
``tf.function`` removes whole).

Between the calls of a compiled step, ops that make its batch read, slice, convert,
stack or draw data; ops that update the state the step returns (a hand-written
optimizer's moments and parameters, a moving average of the weights) are arithmetic on
arrays already on the device.  The trace shows no data flow between programs (the CPU
runtime runs them in the order they are dispatched, whatever they depend on), so the
programs' kind tells the two apart: in a training run, dispatches that are nearly all
(:data:`ARITHMETIC_SHARE`) elementwise arithmetic (:data:`ARITHMETIC`) update the state
(a batch already on the device and only rescaled reads the same; the finding says so).
Dispatches that read, convert, slice or draw no data (:data:`MAKES_DATA`) and mostly
compare and reduce (:data:`REDUCES`) turn arrays into counts and means: metrics computed
op by op on what the compiled call returned (an accuracy, a confusion count), per-op
overhead in any mode, not a batch being made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .. import roles as R
from ..host_side import tf_eager_ids, window_of
from ..intervals import measure_in, union
from ..iterations.dispatch import compiled_step_calls, function_module, module_of, step_dispatches
from .context import Ctx
from .host_estimate import pool_slices
from .read_rules import in_read_loops
from .work import TINY_NS, name_medians, outermost

#: Dispatches per steady step from which a step is run op by op.
MIN_DISPATCHES = 20
#: One dispatched program or op, by the event its runtime or tracer records.
DISPATCH = (re.compile(r"ExecuteHelperOnSingleDevice$"), re.compile(r"^PjitFunction\("),
            re.compile(r"^\$core\.py:\d+ bind$"))
#: TensorFlow's dispatch of one eager op from Python (its kernel runs inside it, on the
#: calling thread).
TF_EAGER = re.compile(r"^(TFE_Py_FastPathExecute_C|EagerExecute)$")
#: The op a TensorFlow eager dispatch runs, by the event inside it, and its kernel's run.
TF_EAGER_OP = re.compile(r"^EagerLocalExecute: ")
TF_KERNEL_RUN = re.compile(r"^KernelAndDeviceFunc::Run$")
#: A compiled TensorFlow function run by the graph executor (``tf.function``, a Keras
#: step function, a SavedModel's signature).
TF_GRAPH = re.compile(r"__inference_|__forward_")
#: Kernels a compiled step keeps: matmuls, convolutions and the library fusions around them.
KEPT_KERNEL = re.compile(r"dot|conv|gemm|matmul|ynn|onednn|mkl", re.I)
#: A dispatched JAX function (``PjitFunction(f)``) and its name.
_JITTED = re.compile(r"^PjitFunction\(_*([A-Za-z0-9_]+)\)$")
#: Elementwise arithmetic, by the names JAX dispatches it under: what an update of arrays
#: already on the device is made of (no read, slice, conversion, reduction or draw).
ARITHMETIC = frozenset(("add", "subtract", "sub", "multiply", "mul", "true_divide", "divide",
                        "div", "sqrt", "rsqrt", "square", "power", "pow", "integer_pow",
                        "exp", "log", "log1p", "negative", "neg", "reciprocal", "maximum",
                        "minimum", "max", "min", "abs", "absolute", "sign", "clip"))
#: Share of the dispatched programs that must be :data:`ARITHMETIC` for the update reading.
ARITHMETIC_SHARE = 0.95
#: Comparisons and reductions, by the names JAX dispatches them under: what turns the
#: compiled call's outputs into metrics (``(pred == y).mean()``, a confusion count).
REDUCES = frozenset(("equal", "eq", "not_equal", "ne", "less", "lt", "less_equal", "le",
                     "greater", "gt", "greater_equal", "ge", "argmax", "argmin", "reduce_sum",
                     "reduce_max", "reduce_min", "sum", "mean", "bitwise_and", "bitwise_or",
                     "logical_and", "logical_or", "and", "or", "count_nonzero"))
#: Share of the dispatched programs that must be :data:`REDUCES` for the metrics reading.
REDUCES_SHARE = 0.30
#: Programs that read, convert, slice, gather, reverse or draw data: what making a batch
#: is made of (random draws and key splits included).
MAKES_DATA = re.compile(r"convert|slice|gather|rev|uniform|normal|randint|bernoulli|"
                        r"threefry|random|concatenate|pad|iota|squeeze|transpose|scatter")
#: Share of the dispatched programs that may make data in the metrics reading.
MAKES_DATA_SHARE = 0.05
#: PRNG key handling, by the names JAX dispatches it under: a key split or folded and the
#: split's keys unpacked (``key, sub = jax.random.split(key)``); key-sized outputs, no data.
KEY_OPS = frozenset(("threefry_split", "threefry_fold_in", "random_split", "random_fold_in",
                     "split", "fold_in", "unstack", "random_wrap", "random_unwrap"))
#: Of those, the splits themselves (a loop that only folds or unpacks keys splits none).
KEY_SPLITS = frozenset(("threefry_split", "random_split", "split"))


@dataclass(frozen=True)
class Dispatched:
    """The steady steps' one-at-a-time dispatches, measured once for both readings."""

    calls: np.ndarray  # the dispatches (slice indexes)
    per_step: float
    wall: float  # ns of the steady rows
    kernels: float  # ns of the runtime threads' kernels in them
    kept: float  # ns of their matmul and convolution kernels and the compiled step's own
    compiled_step: bool  # a compiled program runs once in every steady step
    step_call_ns: float = 0.0  # ns of the main thread in the compiled step's calls
    updates_state: bool = False  # beside the compiled step, they update the training state
    splits_keys: bool = False  # beside the compiled step, they only split PRNG keys
    reduces_results: bool = False  # beside it, they compare and reduce, making no data

    @property
    def share(self) -> float:
        return max(1.0 - self.kernels / self.wall, 0.0)


def measure(ctx: Ctx) -> Dispatched | None:
    """The dispatches of the steady steps, when there are at least :data:`MIN_DISPATCHES`
    a step and kernels to tell them from (None otherwise); measured once per analysis."""
    return ctx.once("eager_dispatch", lambda: _measure(ctx))


def _measure(ctx: Ctx) -> Dispatched | None:
    host = ctx.bd.host
    r = ctx.rows
    if host is None or ctx.bd.device is not None or not len(r):
        return None
    calls = dispatches(ctx, host)
    per_step = len(calls) / len(r)
    if per_step < MIN_DISPATCHES:
        return None
    step = _steady_compiled_step_calls(ctx, host) if _compiled_step(ctx, host) else None
    kernels, kept = _kernels(ctx, host, step)
    if kernels <= 0:
        return None  # no kernel apart from the dispatch: the split is not in the trace
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    if step is None:
        return Dispatched(calls, per_step, wall, kernels, kept, False)
    s = ctx.trace.slices
    kinds = _between(ctx, host, step)
    keys = bool(len(kinds)) and float(np.isin(kinds, list(KEY_OPS)).mean()) >= ARITHMETIC_SHARE
    split = bool(np.isin(kinds, list(KEY_SPLITS)).any())
    updates = not keys and _updates_state(ctx, kinds)
    return Dispatched(calls, per_step, wall, kernels, kept, True,
                      float(s.dur[step].sum()), updates, keys and split,
                      not keys and not updates and reduces_results(kinds))


def reduces_results(kinds: np.ndarray) -> bool:
    """Whether the programs dispatched beside the compiled step (``kinds``) make metrics of
    its results: at least :data:`REDUCES_SHARE` of them compare or reduce and at most
    :data:`MAKES_DATA_SHARE` read, convert, slice or draw data."""
    if not len(kinds):
        return False
    makes = float(np.mean([bool(MAKES_DATA.search(k)) for k in kinds]))
    return makes <= MAKES_DATA_SHARE and float(np.isin(kinds, list(REDUCES)).mean()) >= \
        REDUCES_SHARE


def _steady_compiled_step_calls(ctx: Ctx, host) -> np.ndarray:
    """The compiled step's calls (:func:`..iterations.dispatch.compiled_step_calls`) that
    start in the steady rows."""
    calls = compiled_step_calls(ctx.trace, host.lane)
    return calls[ctx.in_steady(ctx.trace.slices.start[calls], host.starts, host.ends)]


def _updates_state(ctx: Ctx, kinds: np.ndarray) -> bool:
    """Whether the programs dispatched between the compiled step's calls (``kinds``)
    update the training state: a training run, and at least :data:`ARITHMETIC_SHARE` of
    them are elementwise arithmetic."""
    mode = ctx.facts.get("mode")
    if not (mode.known and mode.value == "training") or not len(kinds):
        return False
    return float(np.isin(kinds, list(ARITHMETIC)).mean()) >= ARITHMETIC_SHARE


def _between(ctx: Ctx, host, step: np.ndarray) -> np.ndarray:
    """The lower-cased names of the programs dispatched between the compiled step's calls
    in the steady steps (named ``PjitFunction(f)`` calls, outermost), one per call."""
    if not len(step):
        return np.array([], str)
    s = ctx.trace.slices
    mine = ctx.steady_slices(host)
    ids = ctx.trace.name_ids(lambda n: bool(_JITTED.match(n)))
    mine = outermost(s.start, s.end, mine[np.isin(s.name[mine], ids)
                                         & (s.name[mine] != s.name[step[0]])])
    ids, at = np.unique(s.name[mine], return_inverse=True)
    kinds = [_JITTED.match(ctx.trace.names[int(n)]).group(1).lower() for n in ids]
    return np.array(kinds, str)[at] if len(ids) else np.array([], str)


def _compiled_step(ctx: Ctx, host) -> bool:
    """Whether the step is one compiled program: the jitted function with the most compiled
    work (:func:`..iterations.dispatch.step_dispatches`) runs exactly once in every steady
    step. An un-jitted step's heaviest program is a primitive (a matmul) that runs several
    times a step; a function jitted per sample runs once per sample."""
    runs = step_dispatches(ctx.trace, host.lane)
    w = window_of(runs, host.starts, host.ends)
    per_row = np.bincount(w[w >= 0], minlength=len(host.starts))
    return bool(len(runs)) and bool((per_row[ctx.rows] == 1).all())


def dispatches(ctx: Ctx, host) -> np.ndarray:
    """The main thread's steady dispatches outside read loops, of the kind recorded most
    (outermost of it: a jnp function calling another counts once)."""
    s = ctx.trace.slices
    mine = ctx.steady_slices(host)
    mine = mine[~in_read_loops(ctx, s.start[mine])]
    best = mine[:0]
    for pat in DISPATCH:
        ids = ctx.trace.name_ids(lambda n, p=pat: bool(p.search(n)) and not R.SETUP.search(n))
        got = outermost(s.start, s.end, mine[np.isin(s.name[mine], ids)])
        if len(got) > len(best):
            best = got
    return best


def _kernels(ctx: Ctx, host, step: np.ndarray | None) -> tuple[float, float]:
    """(ns of every runtime-thread kernel, ns of those a compiled step keeps: the matmul
    and convolution ones, and every kernel of the compiled ``step``'s own module, which
    is compiled already) inside the steady rows (their union: kernels of two threads at
    once count once)."""
    s = ctx.trace.slices
    pool = pool_slices(ctx, host)
    r = ctx.rows
    keep = np.isin(s.name[pool], ctx.trace.name_ids(KEPT_KERNEL.search))
    if step is not None and len(step):
        own = function_module(ctx.trace.names[int(s.name[step[0]])])
        if own:  # an unnamed module would match every unnamed kernel
            keep |= np.array([m == own for m in module_of(ctx.trace, pool)], bool)
    kept = pool[keep]
    ns = [float(measure_in(*union(s.start[idx], s.end[idx]), host.starts[r], host.ends[r])
                .sum()) for idx in (pool, kept)]  # union and measure_in take empty sets
    return ns[0], ns[1]


def tf_eager_step(ctx: Ctx, host) -> bool:
    """Whether the steady steps run TensorFlow op by op: at least :data:`MIN_DISPATCHES`
    eager dispatches a step on the main thread outside read loops (outermost of them: a
    dispatch nested in a conversion counts once) and no compiled function's call among
    them.  ``tf.function`` over such a step removes every dispatch from Python at once,
    so the ops are one loop whatever the layers they belong to (a training step's few
    per-layer ops are a loop of their own only beside PyTorch's fixes, which batch or fuse
    part of the step).  Measured once per analysis."""
    key = ("tf_eager_step", host.lane)
    return ctx.once(key, lambda: _tf_eager_step(ctx, host))


def _tf_eager_step(ctx: Ctx, host) -> bool:
    r = ctx.rows
    if not len(r):
        return False
    s = ctx.trace.slices
    mine = ctx.steady_slices(host)
    if np.isin(s.name[mine], ctx.trace.name_ids(TF_GRAPH.search)).any():
        return False
    mine = mine[~in_read_loops(ctx, s.start[mine])]
    eager = outermost(s.start, s.end, mine[np.isin(s.name[mine],
                                                   ctx.trace.name_ids(TF_EAGER.match))])
    return len(eager) >= MIN_DISPATCHES * len(r)


def tf_eager_update(ctx: Ctx, host) -> bool:
    """Whether, in a training run, the steady steps run a compiled TensorFlow function and
    beside it at least :data:`MIN_DISPATCHES` eager ops a step, nearly all
    (:data:`ARITHMETIC_SHARE`) elementwise arithmetic on variables and variable reads and
    writes (:func:`..host_side.tf_eager_ids`), some of them writes: the state updated op
    by op from Python (a moving average of the weights, a hand-written optimizer), a loop
    that ``tf.function`` over the update removes whole, as over an eager step.  A batch
    made op by op reads data, and a model run eagerly runs matmuls.  Measured once per
    analysis."""
    key = ("tf_eager_update", host.lane)
    return ctx.once(key, lambda: _tf_eager_update(ctx, host))


def _tf_eager_update(ctx: Ctx, host) -> bool:
    mode = ctx.facts.get("mode")
    r = ctx.rows
    if not (mode.known and mode.value == "training") or not len(r):
        return False
    s = ctx.trace.slices
    mine = ctx.steady_slices(host)
    if not np.isin(s.name[mine], ctx.trace.name_ids(TF_GRAPH.search)).any():
        return False  # no compiled function: the step runs eagerly (tf_eager_step)
    mine = mine[~in_read_loops(ctx, s.start[mine])]
    run, writes, state_math = tf_eager_ids(ctx.trace)
    names = s.name[mine]  # the eager ops but the compiled calls themselves
    ops = names[np.isin(names, run) & ~np.isin(names, ctx.trace.name_ids(TF_GRAPH.search))]
    if len(ops) < MIN_DISPATCHES * len(r):
        return False
    write = np.isin(ops, writes)
    return bool(write.any()) and float((np.isin(ops, state_math) | write).mean()) \
        >= ARITHMETIC_SHARE


def op_kernels(ctx: Ctx, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(name ids, kernel ns) of ``ops`` by the op each runs: a TensorFlow eager dispatch
    (``TFE_Py_FastPathExecute_C``, ``EagerExecute``: one name for every op, a 20 µs add
    and a 2 ms pooling gradient alike) by the ``EagerLocalExecute: <op>`` event inside it
    and the time of the kernel run in that (``KernelAndDeviceFunc::Run``), where there
    are; every other op by its own name and time.  An op whose dispatch is long and its
    kernel short (a random op's kernel made anew on every call) is per-call cost, not
    math."""
    s = ctx.trace.slices
    names, ns = s.name[ops].copy(), s.dur[ops].astype(np.float64)
    disp = np.flatnonzero(np.isin(names, ctx.trace.name_ids(TF_EAGER.match)))
    if not len(disp):
        return names, ns
    op_ids, run_ids = ctx.trace.name_ids(TF_EAGER_OP.match), ctx.trace.name_ids(TF_KERNEL_RUN.match)
    for lane in np.unique(s.lane[ops[disp]]).tolist():
        at = disp[s.lane[ops[disp]] == lane]
        mine = ctx.trace.lane_slices(lane)
        k, inside = _first_inside(ctx, mine[np.isin(s.name[mine], op_ids)], ops[at])
        names[at[inside]] = s.name[k[inside]]
        k, inside = _first_inside(ctx, mine[np.isin(s.name[mine], run_ids)], ops[at])
        ns[at] = np.where(inside, s.dur[k], 0.0) if len(k) else 0.0
    return names, ns


def _first_inside(ctx: Ctx, inner: np.ndarray, outer: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(per ``outer`` slice, the first of ``inner`` starting in it, whether there is one)."""
    s = ctx.trace.slices
    if not len(inner):
        return inner, np.zeros(len(outer), bool)
    inner = inner[np.argsort(s.start[inner], kind="stable")]
    k = np.minimum(np.searchsorted(s.start[inner], s.start[outer], side="left"), len(inner) - 1)
    first = inner[k]
    return first, (s.start[first] >= s.start[outer]) & (s.end[first] <= s.end[outer])


#: An eager dispatch whose op's kernel takes this many times the dispatches' median runs
#: math of its own (a convolution's gradient), which a compiled step keeps.
KERNEL_OVER_DISPATCH = 3


def op_typical(ctx: Ctx, ops: np.ndarray) -> np.ndarray:
    """Per op, its name's median time; a TensorFlow eager dispatch (one name for every op)
    whose op's kernel (:func:`op_kernels`) takes over :data:`TINY_NS` and
    :data:`KERNEL_OVER_DISPATCH` times the dispatches' median counts its op's dispatches'
    median: such an op runs math of its own, which a compiled step keeps, not a tiny op
    held.  The other dispatches keep the dispatches' median, the fixed cost they share (a
    small MLP's matmul included, and a random op whose dispatch is long but its kernel
    short)."""
    s = ctx.trace.slices
    typical = name_medians(s.name[ops], s.dur[ops])
    names, kernel = op_kernels(ctx, ops)
    math = name_medians(names, kernel) > np.maximum(TINY_NS, KERNEL_OVER_DISPATCH * typical)
    return np.where(math, name_medians(names, s.dur[ops]), typical)
