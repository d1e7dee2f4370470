"""What replacing many small calls by one batched call leaves: the estimate of batching the
requests a step answers one at a time (small-batch inference: :mod:`.small_batch`), of one
batched op for a loop of tiny ones (:mod:`.run_rules`' tiny-ops check) and of one
high-level call on many samples (:mod:`.call_setup`).

The estimate is the step without the profiler before the fix over the step after it:

* **before**: the captured time less the profiler's own cost per recorded event (a loop of
  small calls records an event for each, and the profiler's cost per event, not per
  nanosecond of work, is what inflates it), as fast as the capture ran
  (:mod:`.recorder_cost`; :data:`PROFILER_NS_PER_EVENT` where the capture cannot tell);
* **the calls batched**: the step's outermost framework calls repeat a unit ``count``
  times in a row (:func:`repeated_blocks`: one request's forward pass, one request's whole
  token-by-token decode, one iteration of a Python loop over tiny ops); where nothing
  repeats, each step is a unit and the batch the steps captured (training on one sample a
  step: at least ``samples``, its weights' gradients and updates once a batch);
* **after**: the rest of the step as it was, one unit as it was (each of its calls' fixed
  cost is paid once for the whole batch, with one input's math), and the math the batch's
  other inputs add (:func:`added_ns`): each matmul's FLOPs at the rate of a batched matmul
  (:func:`matmul_rate`), each convolution's own time as measured, its shapes' median (a
  convolution is already compute at batch 1: its time grows with the batch), each other
  op's elements at :data:`ELEMENT_NS` (a random draw: :mod:`.element_work`), views nothing;
  for requests served, the Python each keeps outside its calls (:mod:`.request_gaps`);
* **bound**: batching ``n`` inputs saves at most ``n`` x per input (at least one unit stays).

The figures are measured by ``benchmarks/corpus/call_cost.py`` on one thread of the idle 2-core
machine the corpus is made on, and against the tuned corpus cases' truths:

* ``torch.profiler`` (CPU activity, shapes recorded) costs 0.3-0.6 µs per event in a tight
  loop of one call, 0.6-1.7 µs per event of a model's step (captured step less the truth's
  unprofiled one, over its events); a ``ProfilerStep#N`` span's bookkeeping before its first
  call and after its last grows with its events (:func:`step_window` leaves it out);
* ``addmm`` adds rows at 43-61 GFLOP/s in a batch of 4, 74-90 in one of 16, 92-99 in one of
  64, where one row alone is a matrix-vector product bound by reading the weights:
  ``100 GFLOP/s x rows / (rows + 3)`` (:data:`MATMUL_FLOPS`, :data:`MATMUL_HALF_ROWS`);
* GELU, layer norm and argmax add 0.4-0.9 ns an element to 64 rows of 96, ReLU 0.1.

A trace of another machine records its own rates; only matmuls of :data:`LARGE_FLOPS` or
more show the machine's (batch-1 calls are fixed cost): else the assumed rate, said so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from .causes import self_times
from .context import Ctx
from .element_work import element_ns
from .host_fill import host_fill_ns
from .recorder_cost import per_event_ns
from .request_gaps import between_ns, kept_words
from .shared_data import shared_data
from .work import MATMUL, elements, input_dims, matmul_work, outermost, starts_inside

#: What ``torch.profiler`` adds per recorded event (ns), where the capture cannot tell.
PROFILER_NS_PER_EVENT = 1_000
#: A part's unprofiled time is at least this share of its captured time.
UNPROFILED_FLOOR = 0.2
#: The rate of a batched fp32 matmul on one core (FLOP/s) and the rows at which it is half.
MATMUL_FLOPS = 100e9
MATMUL_HALF_ROWS = 3
#: Matmuls of at least this many FLOPs show the machine's rate (their fixed cost is small).
LARGE_FLOPS = 2_000_000
#: What one more input adds to a small elementwise, normalisation or reduction op, per element.
ELEMENT_NS = 0.5
#: Repeats cover at least this share of a step to be the requests it answers.
BLOCK_COVER = 0.75
#: Runs of repeats shorter than this share of a step are not a loop of its own.
MIN_BLOCK = 0.1
#: Units longer than this many outermost calls are not searched for.
MAX_PERIOD = 512

CONV = re.compile(r"^aten::(_slow_conv2d_forward|mkldnn_convolution|convolution_overrideable|"
                  r"thnn_conv2d|_nnpack_spatial_convolution|slow_conv_dilated[23]d|"
                  r"_conv_depthwise2d|slow_conv3d_forward)$")
#: Ops whose cost does not grow with the data (views, allocations, metadata).
VIEW = re.compile(r"^aten::(view|reshape|_reshape_alias|_unsafe_view|as_strided|t|transpose|"
                  r"permute|expand|slice|select|unsqueeze|squeeze|flatten|detach|alias|"
                  r"resolve_conj|resolve_neg|unbind|split|split_with_sizes|chunk|"
                  r"unsafe_split|unsafe_chunk|narrow|empty|empty_strided|empty_like|"
                  r"lift_fresh|to|_to_copy_noop|contiguous|numpy_T|expand_as|view_as)$")


def unprofiled_ns(captured_ns: float, events: float,
                  per_event: float = PROFILER_NS_PER_EVENT) -> float:
    """A part's time without the profiler: its captured time less the profiler's cost per
    recorded event (``per_event`` ns), at least :data:`UNPROFILED_FLOOR` of it."""
    return max(captured_ns - events * per_event, UNPROFILED_FLOOR * captured_ns)


def event_cost(ctx: Ctx, lane: int) -> float:
    """ns the profiler adds per event recorded on ``lane`` in this capture."""
    return per_event_ns(ctx, lane, PROFILER_NS_PER_EVENT)[0]


@dataclass(frozen=True)
class Block:
    """``count`` repeats in a row of a unit of ``period`` outermost calls: ``start``,
    ``end`` (ns) of the repeats, ``events`` recorded inside them and ``ops`` every
    framework op inside them (all depths)."""

    period: int
    count: int
    start: int
    end: int
    events: int
    ops: np.ndarray

    @property
    def span(self) -> int:
        return self.end - self.start


def median_row(ctx: Ctx, host) -> int:
    """The steady row whose main-thread time is the median."""
    r = ctx.rows
    d = (host.ends[r] - host.starts[r]).astype(np.float64)
    return int(r[np.argsort(d, kind="stable")[len(r) // 2]])


def step_slices(ctx: Ctx, host, row: int) -> np.ndarray:
    """Every slice of the main thread starting in ``row``'s window, by start."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[(s.start[mine] >= host.starts[row]) & (s.start[mine] < host.ends[row])]
    return mine[np.argsort(s.start[mine], kind="stable")]


#: The profiler's own step marker: the time in it before the step's first recorded call and
#: after its last is the profiler's step bookkeeping (``prof.step()``).
PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")


def step_window(ctx: Ctx, host, row: int, every: np.ndarray) -> tuple[int, int]:
    """(start, end) ns of ``row``'s work: from its first recorded framework call to the end
    of its last where the profiler's own step marker spans it, else its window."""
    s = ctx.trace.slices
    ops = every[s.kind[every] == int(Kind.CPU_OP)]
    marked = np.isin(s.name[every], ctx.trace.name_ids(PROFILER_STEP.match)).any()
    if not marked or not len(ops):
        return int(host.starts[row]), int(host.ends[row])
    return int(s.start[ops].min()), int(s.end[ops].max())


def bookkeeping_ns(ctx: Ctx, host, rows: np.ndarray) -> float:
    """ns of the profiler's step bookkeeping in ``rows`` of ``host``'s main thread: each
    row's time outside its recorded calls (:func:`step_window`), not spent unprofiled."""
    out = 0.0
    for row in rows.tolist():
        a, b = step_window(ctx, host, row, step_slices(ctx, host, row))
        out += float(host.ends[row] - host.starts[row] - (b - a))
    return max(out, 0.0)


def repeated_blocks(ctx: Ctx, host, row: int, cover: float = BLOCK_COVER) -> list[Block]:
    """The runs of a repeated unit of outermost framework calls in ``row``, largest first,
    that together cover at least ``cover`` of its time; [] where they do not.  A unit is
    the shortest that repeats over the span (one request's forward pass, not two; a
    request's whole decode where its tokens do not cover the step).  Runs are taken
    longest first (a run among the calls left is never longer than one taken before), so
    the first under :data:`MIN_BLOCK` of the step ends the search.  Found once per
    analysis for each row and cover (the small-batch check and the tiny-ops check's
    hand-off to it ask for the same)."""
    key = ("repeated_blocks", host.lane, row, cover)
    return ctx.once(key, lambda: _repeated_blocks(ctx, host, row, cover))


def _repeated_blocks(ctx: Ctx, host, row: int, cover: float) -> list[Block]:
    s = ctx.trace.slices
    every = step_slices(ctx, host, row)
    ops = every[s.kind[every] == int(Kind.CPU_OP)]
    top = outermost(s.start, s.end, ops)
    a, b = step_window(ctx, host, row, every)
    wall = float(b - a) or 1.0
    found: list[tuple[int, int, int]] = []  # (first, period, count) in ``top``
    taken = np.zeros(len(top), bool)
    while True:
        best = _largest_run(s.name[top], s.start[top], s.end[top], taken)
        if best is None or best[3] < MIN_BLOCK * wall:
            break
        first, period, count, _ = best
        taken[first:first + period * count] = True
        found.append((first, period, count))
    blocks = [_block(ctx, every, ops, top, *f) for f in found]
    if sum(b.span for b in blocks) < cover * wall:
        return []
    return sorted(blocks, key=lambda b: -b.span)


def _largest_run(seq: np.ndarray, t0: np.ndarray, t1: np.ndarray,
                 taken: np.ndarray) -> tuple[int, int, int, int] | None:
    """(first, period, count, span) of the run of repeats that spans the most time among
    the calls not ``taken`` (the shortest period on a tie), or None."""
    best = None
    for p in range(1, min(len(seq) // 2, MAX_PERIOD) + 1):
        eq = np.concatenate([[False], (seq[:-p] == seq[p:]) & ~taken[:-p] & ~taken[p:],
                             [False]])
        d = np.diff(eq.astype(np.int8))
        st, en = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        count = (en - st + p) // p
        ok = count >= 2
        if not ok.any():
            continue
        st, count = st[ok], count[ok]
        span = t1[st + count * p - 1] - t0[st]
        k = int(np.argmax(span))
        if best is None or span[k] > best[3]:
            best = (int(st[k]), p, int(count[k]), int(span[k]))
    return best


def _block(ctx: Ctx, every: np.ndarray, ops: np.ndarray, top: np.ndarray, first: int,
           period: int, count: int) -> Block:
    s = ctx.trace.slices
    a, b = int(s.start[top[first]]), int(s.end[top[first + period * count - 1]])
    inside = (s.start[every] >= a) & (s.start[every] < b)
    return Block(period, count, a, b, int(inside.sum()),
                 ops[(s.start[ops] >= a) & (s.start[ops] < b)])


def large_matmuls(ctx: Ctx, ops: np.ndarray) -> np.ndarray:
    """Per op of ``ops``: a matmul (``aten::linear`` or :data:`MATMUL`) of at least
    :data:`LARGE_FLOPS` by its recorded shapes.  Its time is the machine's math, not a
    fixed cost per call, however short: a loop of tiny ops does not count it.  One
    instance of each name and shape is read."""
    s = ctx.trace.slices
    names = ctx.trace.name_ids(lambda n: n == "aten::linear" or bool(MATMUL.match(n)))
    linear = ctx.trace.name_ids(lambda n: n == "aten::linear")
    out = np.zeros(len(ops), bool)
    seen: dict = {}
    for k in np.flatnonzero(np.isin(s.name[ops], names)).tolist():
        dims = input_dims(ctx, int(ops[k]))
        key = (int(s.name[ops[k]]), str(dims))
        if key not in seen:
            mats = [d for d in dims if len(d) >= 2]
            w = (2.0 * elements(mats[0]) * mats[1][0], 0) if (
                np.isin(s.name[ops[k]], linear) and len(mats) >= 2) else matmul_work(dims)
            seen[key] = w is not None and w[0] >= LARGE_FLOPS
        out[k] = seen[key]
    return out


def matmul_rate(ctx: Ctx, rows: int) -> tuple[float, bool]:
    """(FLOP/s, measured) of a matmul of ``rows`` rows: the rate of the trace's own
    matmuls of at least :data:`LARGE_FLOPS` where it has them (FLOP-weighted), else
    the assumed :data:`MATMUL_FLOPS` at that many rows."""
    if "large_matmul_rate" not in ctx.memo:
        ctx.memo["large_matmul_rate"] = _large_matmul_rate(ctx)
    rate = ctx.memo["large_matmul_rate"]
    if rate:
        return rate, True
    return MATMUL_FLOPS * rows / (rows + MATMUL_HALF_ROWS), False


def _large_matmul_rate(ctx: Ctx) -> float:
    s = ctx.trace.slices
    idx = np.flatnonzero((s.kind == int(Kind.CPU_OP))
                         & np.isin(s.name, ctx.trace.name_ids(MATMUL.match)))
    flops, ns = 0.0, 0.0
    for j in idx[:: max(len(idx) // 4096, 1)].tolist():
        w = matmul_work(input_dims(ctx, j))
        if w is not None and w[0] >= LARGE_FLOPS:
            flops += w[0]
            ns += float(s.dur[j])
    return flops / (ns * 1e-9) if ns > 0 else 0.0


@dataclass(frozen=True)
class Added:
    """What one more input adds to a unit (ns, unprofiled), and whether its matmul rate is
    the trace's own (``measured``) or assumed; ``fill_ns`` of it copies the Python numbers
    its tensors are made from (:mod:`.host_fill`)."""

    ns: float
    matmul_ns: float
    measured: bool
    fill_ns: float = 0.0


def added_ns(ctx: Ctx, ops: np.ndarray, units: int, batch: int,
             elementwise: bool = True, rows: bool = False) -> Added:
    """The math one more input adds to a unit whose ops (all depths, over ``units``
    repeats) are ``ops``, in a batch of ``batch``: matmuls' FLOPs at :func:`matmul_rate`
    of the batched rows (without recorded shapes, :func:`unshaped_ns`), convolutions' own
    time (:func:`conv_ns`), with ``elementwise`` the other innermost ops' elements
    (:func:`.element_work.element_ns`; without, a loop's per-item ops batch into cheap ones;
    with ``rows``, only a sample's rows, ops with an input with a dimension of one: the
    weights' gradients and updates run once a batch; never those on data every one-row
    request shares: :mod:`.shared_data`), and the copy of the Python numbers
    its tensors are made from (:func:`.host_fill.host_fill_ns`: a batched tensor copies all)."""
    s = ctx.trace.slices
    names = ctx.trace.names
    own = self_times(ctx, ops).astype(np.float64)
    leaf = _leaves(ctx, ops)
    children = _children(ctx, ops)
    mm_ns = other = 0.0
    measured = False
    unshaped = np.zeros(len(ops), bool)
    cost = event_cost(ctx, int(s.lane[ops[0]])) if len(ops) else PROFILER_NS_PER_EVENT
    convs: dict[tuple, list[int]] = {}
    small: list[int] = []  # innermost elementwise calls
    for k, j in enumerate(ops.tolist()):
        name = names[int(s.name[j])]
        if MATMUL.match(name):
            w = matmul_work(input_dims(ctx, j))
            if w is None:
                unshaped[k] = True
                continue
            rate, measured = matmul_rate(ctx, w[1] * batch)
            mm_ns += w[0] / rate * 1e9
        elif CONV.match(name):
            key = (name, *map(tuple, input_dims(ctx, j)))
            convs.setdefault(key, []).append(k)
        elif elementwise and leaf[k] and not VIEW.match(name):
            if not rows or any(1 in d for d in input_dims(ctx, j) if len(d)):
                small.append(k)
    small = [k for k, x in zip(small, shared_data(ctx, ops[small], ops)) if not x]
    mm_ns += unshaped_ns(s.name[ops[unshaped]], own[unshaped])
    other += conv_ns(own, children, convs, cost) + element_ns(
        ctx, ops[small], own[small], ELEMENT_NS, lambda ns: unprofiled_ns(ns, 1, cost))
    fill = host_fill_ns(ctx, ops, cost)
    n = max(units, 1)
    return Added((mm_ns + other + fill) / n, mm_ns / n, measured, fill / n)


def conv_ns(own: np.ndarray, children: np.ndarray, convs: dict, cost: float) -> float:
    """ns of the convolutions ``convs`` (by name and input shapes), each at its group's
    median own time less the profiler's cost of it and its direct calls: its math is fixed
    by its shapes, and a call slowed by the machine adds none."""
    return sum(len(at) * unprofiled_ns(float(np.median(own[at])),
                                       1 + float(np.median(children[at])), cost)
               for at in convs.values())


#: The quantile of a call's own times taken as its fixed cost, where shapes are unknown.
FIXED_Q = 0.1


def unshaped_ns(names: np.ndarray, own: np.ndarray) -> float:
    """What ops without recorded shapes (matmuls, a compiled function's kernels) add per
    input: the per-call math the trace
    shows, each name's median own time over its fixed cost (its :data:`FIXED_Q`
    quantile), per call (a call's time beyond the fixed cost grows with its work; the
    median leaves out descheduled ones)."""
    out = 0.0
    for name in np.unique(names).tolist():
        mine = own[names == name]
        out += len(mine) * max(float(np.median(mine) - np.quantile(mine, FIXED_Q)), 0.0)
    return out


def _children(ctx: Ctx, ops: np.ndarray) -> np.ndarray:
    """Per op (sorted by start): the ops of ``ops`` directly inside it (the profiler's cost
    of recording them lands in its own time)."""
    s = ctx.trace.slices
    end = np.searchsorted(s.start[ops], s.end[ops], side="left")
    out = np.zeros(len(ops), np.int64)
    depth = s.depth[ops]
    for k in np.flatnonzero(end - np.arange(len(ops)) > 1).tolist():
        out[k] = int((depth[k + 1:end[k]] == depth[k] + 1).sum())
    return out


def _leaves(ctx: Ctx, ops: np.ndarray) -> np.ndarray:
    """Per op (sorted by start): no other op of ``ops`` starts inside it."""
    s = ctx.trace.slices
    if not len(ops):
        return np.zeros(0, bool)
    nxt = np.append(s.start[ops[1:]], np.iinfo(np.int64).max)
    return nxt >= s.end[ops]


@dataclass(frozen=True)
class BatchFix:
    """Batching ``batch`` inputs of a unit: the step without the profiler before the fix
    (``before_ns``) and after it (``after_ns``) for the same inputs, what a unit takes
    unprofiled (``unit_ns``), what one more input adds to it (``added``), how many units a
    step holds (``per_step``), what is batched (``what``), the profiler's cost per event
    taken off (``per_event``: ns, read or not), the Python a request keeps (``between``)."""

    before_ns: float
    after_ns: float
    unit_ns: float
    added: Added
    batch: int
    per_step: int
    what: str
    per_event: tuple[float, bool] = (PROFILER_NS_PER_EVENT, False)
    between: float = 0.0

    def speedup(self) -> float:
        return self.before_ns / max(self.after_ns, 1e-6)

    def _fill(self) -> str:
        f = self.added.fill_ns
        return (f", {fmt_ns(f)} copying the Python numbers its tensors are made from"
                if f > 0 else "")

    def unprofiled(self) -> str:
        """How the step is read without the profiler, in words: its cost per recorded
        event and whether the capture tells it."""
        cost, read = self.per_event
        said = ("as fast as this capture ran its recorder" if read else
                "a fixed figure: the capture cannot tell its own")
        return (f"the step without the profiler's cost ({cost / 1e3:.2f} µs per recorded "
                f"event, {said})")

    def basis(self) -> str:
        """The estimate's basis in words, for the finding's summary."""
        rate = ("the trace's own large matmuls' rate" if self.added.measured else
                f"{MATMUL_FLOPS / 1e9:.0f} GFLOP/s x rows / (rows + {MATMUL_HALF_ROWS}), "
                f"as a batched fp32 matmul runs on one core (no matmul in the trace is large "
                f"enough to show this machine's rate)")
        return (f" Estimate for {self.what}: {self.unprofiled()} before the fix, "
                f"{fmt_ns(self.before_ns)}, over the step after it, {fmt_ns(self.after_ns)}: "
                f"one unit as it runs now ({fmt_ns(self.unit_ns)}: each call's fixed cost "
                f"paid once) plus what each further input adds "
                f"({fmt_ns(self.added.ns)}: matmul FLOPs at {rate}, convolutions' own time "
                f"at their calls' median, {ELEMENT_NS} ns per element of the other ops, "
                f"random draws their time beyond a small call's"
                f"{self._fill()}){kept_words(self.between)}, the rest of the step as it is; "
                f"batching {self.batch} inputs saves at most {self.batch}x per input.")


def batch_fix(ctx: Ctx, host, what: str = "", per_input_ns: float = 0.0,
              served: bool = False, samples: int = 0) -> BatchFix | None:
    """The batching estimate of the steady steps of ``host``'s main thread: the requests a
    step answers one at a time (:func:`repeated_blocks`) batched together, or, where a
    step answers one, the steps captured batched into one call.  ``per_input_ns``: work
    each further input adds beyond the main thread's ops (the part of a compiled function's
    ops on the runtime's pool threads that grows with the input); ``served``: requests
    served, each keeping its Python between the units (where none copies Python numbers:
    that copy is the Python between them, counted per input already); ``samples``: one
    sample a step trained, at least this many batched (``rows`` of :func:`added_ns`)."""
    r = ctx.rows
    if host is None or not len(r):
        return None
    row = median_row(ctx, host)
    every = step_slices(ctx, host, row)
    a, b = step_window(ctx, host, row, every)
    cost, read = per_event_ns(ctx, host.lane, PROFILER_NS_PER_EVENT)
    step_ns = unprofiled_ns(float(b - a), len(every), cost)
    blocks = repeated_blocks(ctx, host, row)
    if blocks:
        b = blocks[0]
        repeats = unprofiled_ns(b.span, b.events, cost)
        unit = repeats / b.count
        add = _plus(added_ns(ctx, b.ops, b.count, b.count), per_input_ns)
        kept = between_ns(ctx, b.ops, b.period, b.count) if served and not add.fill_ns else 0.0
        after = step_ns - repeats + unit + (b.count - 1) * (add.ns + kept)
        return BatchFix(step_ns, after, unit, add, b.count, b.count,
                        what or f"the {b.count} requests of a step batched into one call",
                        (cost, read), kept)
    n = max(len(r), samples)
    if n < 2:
        return None
    unit, add = _one_request_steps(ctx, host, n, samples > 0)
    add = _plus(add, per_input_ns)
    return BatchFix(n * unit, unit + (n - 1) * add.ns, unit, add, n, 1, what or (
        f"batches of {n} samples instead of one a step" if samples else
        f"the {n} steps captured (one request each) batched into one call"), (cost, read))


def _plus(add: Added, ns: float) -> Added:
    return Added(add.ns + ns, add.matmul_ns, add.measured, add.fill_ns) if ns else add

SAMPLED_STEPS = 16  # steps sampled for the work of a step that answers one request
def _one_request_steps(ctx: Ctx, host, batch: int, rows: bool) -> tuple[float, Added]:
    """(unprofiled step, what one more input adds in a ``batch``), medians over up to
    :data:`SAMPLED_STEPS` steady steps: one step's ops are too few for a typical figure."""
    s = ctx.trace.slices
    r = ctx.rows
    steps, adds = [], []
    for row in r[:: max(len(r) // SAMPLED_STEPS, 1)].tolist():
        every = step_slices(ctx, host, row)
        a, b = step_window(ctx, host, row, every)
        steps.append(unprofiled_ns(float(b - a), len(every), event_cost(ctx, host.lane)))
        adds.append(added_ns(ctx, every[s.kind[every] == int(Kind.CPU_OP)], 1, batch, rows=rows))
    k = int(np.argsort([x.ns for x in adds])[len(adds) // 2])
    return float(np.median(steps)), adds[k]


@dataclass(frozen=True)
class LoopBatch:
    """A step's loops of repeated small calls batched, in shares of the step: ``gather``,
    the calls outside the repeats that work per repeat (as many calls recorded inside as
    the loop has repeats: a stack of the loop's outputs, its backward unbinding it), which
    go with the loop; ``replacement``, what the batched calls cost (one repeat of each loop
    unprofiled, the other repeats' matmul FLOPs); ``count``, the longest loop's repeats."""

    count: int
    gather: float
    replacement: float


def loop_batch(ctx: Ctx, host, tiny: np.ndarray) -> LoopBatch | None:
    """The loops of repeated calls of the median steady step (:func:`repeated_blocks`)
    whose time is mostly in ``tiny`` outermost calls (the calls batching removes: not a
    model's repeated layers), and what batching them costs; None where such loops are
    under half of the step."""
    if host is None or not len(ctx.rows):
        return None
    row = median_row(ctx, host)
    s = ctx.trace.slices
    blocks = [x for x in repeated_blocks(ctx, host, row, cover=0.5)
              if s.dur[x.ops[np.isin(x.ops, tiny)]].sum() >= 0.5 * x.span]
    every = step_slices(ctx, host, row)
    a, b = step_window(ctx, host, row, every)
    wall = float(b - a) or 1.0
    if sum(x.span for x in blocks) < 0.5 * wall:
        return None
    count = max(x.count for x in blocks)
    cost = event_cost(ctx, host.lane)
    replacement = sum(unprofiled_ns(x.span, x.events, cost) / x.count
                      + (x.count - 1) * added_ns(ctx, x.ops, x.count, x.count, False).ns
                      for x in blocks)
    return LoopBatch(count, _gather_ns(ctx, every, blocks, count) / wall, replacement / wall)


def _gather_ns(ctx: Ctx, every: np.ndarray, blocks: list[Block], count: int) -> float:
    """ns of the outermost calls outside ``blocks`` that record at least ``count`` calls."""
    s = ctx.trace.slices
    ops = every[s.kind[every] == int(Kind.CPU_OP)]
    inside = np.zeros(len(ops), bool)
    for x in blocks:
        inside |= (s.start[ops] >= x.start) & (s.start[ops] < x.end)
    top = outermost(s.start, s.end, ops[~inside])
    starts = np.sort(s.start[ops])
    held = (np.searchsorted(starts, s.end[top], side="left")
            - np.searchsorted(starts, s.start[top], side="right"))
    return float(s.dur[top][held >= count].sum())


#: Instances of an op name whose inputs are read for the name's typical tensor size.
DATA_SAMPLE = 32


def loop_data_ns(ctx: Ctx, host, outer: np.ndarray) -> float:
    """ns of data work inside the outermost calls ``outer`` that one batched op still does:
    each innermost op but for views and allocations that is no matmul or convolution (a
    flip, a copy, an elementwise op) moves its largest input's elements at
    :data:`ELEMENT_NS` each, whether it runs once per item or once for the batch.
    Matmuls' FLOPs are :func:`loop_batch`'s; views and allocations cost nothing per
    element.  Each name's size is the median of up to :data:`DATA_SAMPLE` of its
    instances (a loop repeats its calls on like inputs)."""
    if not len(outer):
        return 0.0
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[s.kind[mine] == int(Kind.CPU_OP)]
    mine = mine[starts_inside(ctx, outer, mine)]
    names = ctx.trace.names
    mine = mine[~np.isin(s.name[mine], ctx.trace.name_ids(VIEW.match))]
    mine = mine[np.argsort(s.start[mine], kind="stable")]
    leaves = mine[_leaves(ctx, mine)]  # innermost but for views and allocations
    total = 0.0
    for name in np.unique(s.name[leaves]).tolist():
        label = names[int(name)]
        if MATMUL.match(label) or CONV.match(label):
            continue
        of = leaves[s.name[leaves] == name]
        sample = of[:: max(len(of) // DATA_SAMPLE, 1)]
        size = np.median([max((elements(d) for d in input_dims(ctx, j) if len(d)), default=0)
                          for j in sample.tolist()])
        total += len(of) * float(size) * ELEMENT_NS
    return total


def loop_once_ns(ctx: Ctx, host, outer: np.ndarray, steps: int) -> float:
    """ns a loop's batched replacement still spends on calls' fixed cost where the loop
    repeats no unit to take one of (nested loops of uneven lengths: per image, per box):
    the batched code runs each kind of the loop's outermost calls (``outer``, all steps)
    once a step on all the items, forward and backward, each at its name's fixed cost
    (the :data:`FIXED_Q` quantile of its calls' times, less the profiler's cost of the
    events each records)."""
    if not len(outer):
        return 0.0
    s = ctx.trace.slices
    st = np.sort(s.start[ctx.trace.lane_slices(host.lane)])
    events = (np.searchsorted(st, s.end[outer], side="left")
              - np.searchsorted(st, s.start[outer], side="left"))
    dur = s.dur[outer].astype(np.float64)
    own = np.maximum(dur - events * event_cost(ctx, host.lane), UNPROFILED_FLOOR * dur)
    names = s.name[outer]
    return max(steps, 1) * sum(float(np.quantile(own[names == n], FIXED_Q))
                               for n in np.unique(names).tolist())
