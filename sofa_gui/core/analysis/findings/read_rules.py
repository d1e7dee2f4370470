"""Host reads in a loop: the main thread reads results back one element (or one row) at a
time, each read a call of its own (``.item()``, ``float(x[k])``, ``x[k].tolist()``,
``np.asarray`` of one element of a JAX array).

What the trace proves is the read calls themselves and what lies between them:

* a **read** is a main-thread call that hands a tensor's values to Python
  (:mod:`.read_calls`: ``.item()``, ``bool(t)``, ``.tolist()``, ``.numpy()``, the
  formatting of ``str(tensor)``, the Python tracers' conversions; TensorFlow's eager element
  picks stand for its unrecorded ``.numpy()``). Reads inside the optimizer's step or the
  input pipeline are theirs, not the loop's;
* a **read loop** is a run of consecutive reads with only the loop's own body between
  them: the calls that recur between most pairs of reads (the indexing that picks the
  element, the Python around it) and tiny calls that prepare the reads (what
  ``str(tensor)`` computes before it prints the values). Work between two reads ends the
  loop (:func:`.read_calls.work_between`: the model's math, or a call of real size or of
  the step's structure that does not recur: the forward pass, the optimizer); a pause
  with nothing recorded does not (a descheduled thread loses time in proportion to the
  work it does, here the loop's).
* a loop that runs several of the framework's computing ops per read (a loss per box that
  reads each box's matched cell to index with it) is a loop of ops that reads along:
  its cost is each op's fixed cost, which batching the work removes with the reads
  (``op_overhead_bound`` counts it, the reads' own calls among its ops), so it is no
  read loop (on a device run each read's wait for the queue is
  ``synchronization_stalls``');
* likewise a loop that calls one jitted program between its reads (an ensemble trained
  member by member, each member's loss read with ``float``) is a loop of calls that reads
  each call's result: batching the items into one call (``jax.vmap``) removes the calls'
  fixed cost and the reads together, a read of all the results after the loop only the
  waits, so it is ``call_overhead_bound``'s, no read loop (:mod:`.item_calls`);
* and on a CPU run a loop that writes into a tensor element by element between its reads
  (``mat[t, p] += 1`` per sample: indexing with 0-d tensors reads each index into Python,
  then an in-place add and the copy back write the element) is a loop of element
  updates: with no device queue its reads wait on nothing, the cost is each update's ops,
  and one scatter op (``torch.bincount``, ``index_add_``) removes them with the reads
  (``op_overhead_bound``'s, no read loop). On a device each read would drain the queue;
* so is, on a CPU run, a loop whose reads mostly index (``transitions[tags[i + 1],
  tags[i]]``: each 0-d index read and picked with at once, :mod:`.index_reads`): the
  reads wait on nothing and cost their calls, part of the indexed ops' fixed cost, which
  gathering the indices at once removes (``op_overhead_bound``'s, no read loop).

The loop's time (first read to last) is the blocking host reads' time: the fix reads the
whole result once per batch.  The estimate (:mod:`.host_estimate`) takes the profiler's
cost out of the loops and the rest of the step (at the ratios of the reads' recorder),
counts the rest warmer by how long the loops kept it away once they were most of the
step, and adds what one read of the whole result still spends: one call of the loop's
kind and the conversion of every value the loops read (:data:`BULK_NS_PER_VALUE`).  The
untraced Python right after a loop (from its last read to the next recorded event, beyond
the steps' own untraced boundary, twice the untraced time they start with: the text a log
line assembles, numpy work on a ``.numpy()`` copy) goes with the loop, at its captured time
(nothing recorded in it).  On a
device run each read also drains the device queue (``synchronization_stalls`` measures that
side).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..host_side import window_of
from ..intervals import measure_in
from ..results import Evidence, Finding
from .causes import causes_by_name
from .context import MAX_EVIDENCE, Ctx, make_finding
from .host_estimate import (
    PYTHON_LOOP_UNPROFILED,
    READ_LOOP_UNPROFILED,
    TF_UNPROFILED,
    TINY_LOOP_UNPROFILED,
    HostFix,
    rest_math,
)
from .index_reads import PICK_OP, index_loops
from .item_calls import one_program_loops
from .read_calls import TF_PICK, read_calls, work_between
from .registry import Rule, rule
from .work import TINY_NS, elements, input_dims, op_kind, op_kinds, outermost

#: Computing ops per read from which a loop is a loop of ops that reads along
#: (:func:`_op_loops`): a read and the pick that indexes it are one or two calls.
OPS_PER_READ = 4
#: The framework's computing ops: PyTorch's, TensorFlow's eager ops, JAX's jitted calls.
COMPUTE_OP = re.compile(r"^(aten::|EagerLocalExecute: |PjitFunction\()")
#: In-place writes per pair of consecutive reads from which a CPU loop is a loop of element
#: updates (:func:`_update_loops`): ``mat[t, p] += 1`` reads ``t`` and ``p`` for the add
#: and again for the write back, four reads to two writes.
WRITES_PER_READ = 0.25
#: Fewer reads in a row than this is a metric read, not a loop.
MIN_READS = 16
#: Picks (and reads) per item of a loop of per-item ops (:func:`_item_op_loops`), at most:
#: an item's inputs sliced and its result gathered.
PICKS_PER_ITEM = 8
#: A call between reads is the loop's body when it recurs between at least this share of
#: the pairs of consecutive reads.
BODY_SHARE = 0.5
#: ns per value that one read of a whole result still spends (conversion to Python objects
#: and the Python that consumes them), measured on one CPU thread of an idle machine for
#: float results of rows of 8 or more values: ``.tolist()`` (PyTorch), ``np.asarray(x)
#: .tolist()`` (JAX) and ``.numpy().tolist()`` (TensorFlow) take 13-27 ns a value (5-11 for
#: integers and booleans, 50-66 for rows of one value), a Python ``max`` per row or a
#: count of the positive values 10-45 more, formatting each as text about 200 more
#: (``benchmarks/corpus/bulk_read.py``).
BULK_NS_PER_VALUE = 40


@dataclass
class ReadLoops:
    """The read loops of the main thread: ``reads`` (the read calls in loops, by start),
    ``loop`` (the loop of each read), ``starts``/``ends`` (each loop's span), ``count``
    (reads per loop) and ``picked`` (per read: a TensorFlow element pick standing for a
    read the trace does not record)."""

    reads: np.ndarray
    loop: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    count: np.ndarray
    picked: np.ndarray


def read_loops(ctx: Ctx) -> ReadLoops:
    """The main thread's read loops (computed once per analysis)."""
    return ctx.once("read_loops", lambda: _find_loops(ctx))


def in_read_loops(ctx: Ctx, t_ns: np.ndarray) -> np.ndarray:
    """Per time: inside one of the read loops."""
    loops = read_loops(ctx)
    t_ns = np.asarray(t_ns)
    if not len(loops.starts):
        return np.zeros(len(t_ns), bool)
    k = np.searchsorted(loops.starts, t_ns, side="right") - 1
    return (k >= 0) & (t_ns <= loops.ends[np.maximum(k, 0)])


def _find_loops(ctx: Ctx) -> ReadLoops:
    none = ReadLoops(*(np.zeros(0, np.int64) for _ in range(5)), np.zeros(0, bool))
    host = ctx.bd.host
    if host is None:
        return none
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[np.argsort(s.start[mine], kind="stable")]
    reads, picked = read_calls(ctx, host, mine)
    if len(reads) < MIN_READS:
        return none
    foreign = _foreign_between(ctx, mine, reads)
    run = np.concatenate([[0], np.cumsum(foreign)])  # loop id per read
    size = np.bincount(run)
    keep = size[run] >= MIN_READS
    reads, run, picked = reads[keep], run[keep], picked[keep]
    if not len(reads):
        return none
    ops = _op_loops(ctx, mine, reads, run)
    keep = ~ops[np.searchsorted(np.unique(run), run)]
    reads, run, picked = reads[keep], run[keep], picked[keep]
    if not len(reads):
        return none
    ids, first, loop = np.unique(run, return_index=True, return_inverse=True)
    last = np.append(first[1:], len(run)) - 1
    return ReadLoops(reads, loop.astype(np.int64), s.start[reads[first]].astype(np.int64),
                     s.end[reads[last]].astype(np.int64), (last - first + 1).astype(np.int64),
                     picked)


def _foreign_between(ctx: Ctx, mine: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """Per pair of consecutive reads: work foreign to the loop lies between them: the
    model's math, or work (:func:`.read_calls.work_between`) whose name recurs between
    fewer than :data:`BODY_SHARE` of the pairs.  Frames that open between two reads and
    hold later ones (an inner loop's frame) are the loop's."""
    s = ctx.trace.slices
    n_gaps = len(reads) - 1
    lo, hi = s.end[reads[:-1]], s.start[reads[1:]]
    starts = s.start[mine]
    gap = np.searchsorted(lo, starts, side="right") - 1  # the pair a slice may lie between
    ok = (gap >= 0) & (gap < n_gaps)
    ok[ok] &= s.end[mine[ok]] <= hi[gap[ok]]  # frames that hold later reads are the loop
    math, work = work_between(ctx, mine)
    gap, names = gap[ok], s.name[mine[ok]].astype(np.int64)
    math, work = math[ok], work[ok]
    foreign = np.zeros(n_gaps, bool)
    if not len(gap):
        return foreign
    width = int(names.max()) + 1
    pairs, inv = np.unique(gap * width + names, return_inverse=True)  # (pair, name) once
    p_gap, p_name = pairs // width, pairs % width
    seen = np.bincount(p_name)  # pairs each name lies between
    rare = seen[p_name] < BODY_SHARE * n_gaps
    p_work = np.bincount(inv, weights=work, minlength=len(pairs)) > 0
    foreign[p_gap[rare & p_work]] = True
    foreign[gap[math]] = True
    return foreign


def _op_loops(ctx: Ctx, mine: np.ndarray, reads: np.ndarray, run: np.ndarray) -> np.ndarray:
    """Per loop (``run``: the loop id of each of the ``reads``, sorted): a loop of the
    framework's ops that reads along, not a loop of reads: between its first read and its
    last it runs :data:`OPS_PER_READ` or more computing ops per pair of consecutive reads
    (outermost among the framework's ops, the reads and the picks that index them left
    out): the work done per element (a loss per box, a distance per pair), each op paying
    its fixed cost.
    Batching that work removes the loop, reads and all (``op_overhead_bound`` measures
    it); a read of the whole result would remove only the reads' own calls.  Loops of
    one program's calls and, on a CPU run, loops of element updates are such loops too
    (:func:`.item_calls.one_program_loops`, :func:`_update_loops`), and so are, on a CPU
    run, loops of reads that index (:func:`.index_reads.index_loops`)."""
    s = ctx.trace.slices
    ids, first, count = np.unique(run, return_index=True, return_counts=True)
    last = first + count - 1
    lo, hi = s.start[reads[first]], s.end[reads[last]]
    ops = mine[np.isin(s.name[mine], ctx.trace.name_ids(COMPUTE_OP.match))]
    ops = outermost(s.start, s.end, ops)
    ops = ops[~np.isin(s.name[ops], op_kinds(ctx, PICK_OP)) & ~np.isin(ops, reads)]
    at = np.searchsorted(lo, s.start[ops], side="right") - 1
    ok = (at >= 0) & (s.end[ops] <= hi[np.maximum(at, 0)])
    many = np.bincount(at[ok], minlength=len(ids)) >= OPS_PER_READ * (count - 1)
    loop = np.searchsorted(ids, run)
    return (many | one_program_loops(ctx, ops[ok], at[ok], len(ids), count)
            | _update_loops(ctx, ops[ok], at[ok], len(ids), count)
            | _item_op_loops(ctx, ops[ok], at[ok], count, reads, loop)
            | index_loops(ctx, mine, reads, loop, len(ids)))


def _update_loops(ctx: Ctx, ops: np.ndarray, at: np.ndarray, n_loops: int,
                  count: np.ndarray) -> np.ndarray:
    """Per loop: on a run with no device, a loop of element updates (``ops``: the loops'
    outermost computing ops, ``at`` the loop of each): in-place writes (PyTorch's ``add_``,
    ``copy_``, TensorFlow's variable assigns and scatters) at least :data:`WRITES_PER_READ`
    times its pairs of consecutive reads.  The reads are the indexing's (a 0-d tensor
    used as an index is read into Python) and wait on nothing queued; the time is the
    updates' ops, which one scatter op per batch replaces."""
    if ctx.bd.device is not None or not len(ops):
        return np.zeros(n_loops, bool)
    writes = np.isin(ctx.trace.slices.name[ops], ctx.trace.name_ids(_writes_in_place))
    return np.bincount(at[writes], minlength=n_loops) >= WRITES_PER_READ * (count - 1)


def _item_op_loops(ctx: Ctx, ops: np.ndarray, at: np.ndarray, count: np.ndarray,
                   reads: np.ndarray, loop: np.ndarray) -> np.ndarray:
    """Per loop: on a run with no device, a loop of per-item ops whose TensorFlow picks
    (most of its ``reads``, ``loop`` the loop of each: picks that stand for unrecorded
    reads) slice its items (``ops``: the loops' outermost computing ops, picks left out,
    ``at`` the loop of each): an op of real size (median >= :data:`.work.TINY_NS`: a
    non-max suppression over an image's boxes) recurs at least once per
    :data:`PICKS_PER_ITEM` picks.  The picks cut each item's inputs for that op (and
    gather from its result), they hand few values to Python; with no device queue nothing
    waits, the time is each op's fixed cost, which one batched op over all items removes
    (``op_overhead_bound``'s, no read loop).  A small op per read (an ``argmax`` of a
    row's few logits) is the read's own preparation; recorded reads are reads."""
    n_loops = len(count)
    if ctx.bd.device is not None or not len(ops):
        return np.zeros(n_loops, bool)
    s = ctx.trace.slices
    picks = np.isin(s.name[reads], ctx.trace.name_ids(TF_PICK.match))
    picked = np.bincount(loop, weights=picks, minlength=n_loops) > 0.5 * count
    out = np.zeros(n_loops, bool)
    for k in np.unique(at[picked[at]]).tolist():
        mine = ops[at == k]
        names, inv, n = np.unique(s.name[mine], return_inverse=True, return_counts=True)
        med = np.array([np.median(s.dur[mine[inv == j]]) for j in range(len(names))])
        out[k] = bool(((n >= max(MIN_CYCLES, count[k] / PICKS_PER_ITEM))
                       & (med >= TINY_NS)).any())
    return out


def _writes_in_place(name: str) -> bool:
    """An op that writes into its input tensor or variable (:func:`.work.op_kind`)."""
    kind = op_kind(name)
    return kind.endswith("_") or kind.startswith(("assign", "resource_scatter"))


def loop_share(ctx: Ctx) -> tuple[float, np.ndarray, np.ndarray, bool]:
    """(share of the main thread's time inside read loops, the reads counted, each one's
    part of its loop's time in ns, whether the share is taken loop to loop).  Over the
    steady iterations; but when the iterations found are finer than the loops (several
    start inside one loop: the loop's elements were taken for the steps), over the
    cycles from each loop's start to the next one's."""
    host = ctx.bd.host
    loops = read_loops(ctx)
    r = ctx.rows
    empty = (0.0, np.zeros(0, np.int64), np.zeros(0), False)
    if host is None or not len(loops.starts) or not len(r):
        return empty
    s = ctx.trace.slices
    per_read = ((loops.ends - loops.starts) / np.maximum(loops.count, 1))[loops.loop]
    if _finer_than_loops(host, loops):
        span = (loops.ends - loops.starts)[:-1].astype(np.float64)
        cycle = float(loops.starts[-1] - loops.starts[0]) or 1.0
        keep = loops.loop < len(loops.starts) - 1
        return (min(float(span.sum()) / cycle, 1.0), loops.reads[keep],
                per_read[keep].astype(np.float64), True)
    ws, we = host.starts[r], host.ends[r]
    inside = measure_in(ws, we, loops.starts, loops.ends).astype(np.float64)
    wall = float((we - ws).sum()) or 1.0
    steady = ctx.in_steady(s.start[loops.reads], host.starts, host.ends)
    return (min(float(inside.sum()) / wall, 1.0), loops.reads[steady],
            per_read[steady].astype(np.float64), False)


#: Loops to measure loop to loop (two whole cycles at least).
MIN_CYCLES = 3


def _finer_than_loops(host, loops: ReadLoops) -> bool:
    """At least :data:`MIN_CYCLES` loops, and the median loop holds two or more iteration
    starts."""
    if len(loops.starts) < MIN_CYCLES:
        return False
    inside = (np.searchsorted(host.starts, loops.ends, side="right")
              - np.searchsorted(host.starts, loops.starts, side="left"))
    return float(np.median(inside)) >= 2


@rule("host_reads_in_loop", "Element-wise host reads in a loop (.item() / .tolist())",
      0.03, 0.15, f"synchronisation thresholds; >= {MIN_READS} reads in a row, with only the "
      f"loop's own calls between them, make a loop", factors={"reads_inferred": 0.8})
def host_reads_in_loop(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    share, reads, cost, by_cycle = loop_share(ctx)
    if host is None or not len(reads) or share <= 0:
        return None
    s = ctx.trace.slices
    loops = read_loops(ctx)
    causes = causes_by_name(ctx, reads, cost, float(cost.sum()) or 1.0)
    evidence = _loop_evidence(ctx, host, loops)
    per_loop = float(np.median(loops.count))
    n = len(loops.starts)
    picked = bool(np.isin(reads, loops.reads[loops.picked]).mean() > 0.5)
    each = (f"each element picked by an eager {_pick_op(ctx, reads)} run from Python "
            f"({fmt_ns(float(np.median(s.dur[reads])))} median) and read by a conversion the "
            f"trace does not record (TensorFlow records no event for .numpy() / float() / "
            f"int()), so the picks stand for the reads" if picked else
            f"each read a call of its own that hands one value to Python "
            f"({fmt_ns(float(np.median(s.dur[reads])))} median) plus the indexing that "
            f"picks it")
    head = (f"{n} loops of {per_loop:,.0f} element reads (median) on the main thread, {each}; "
            f"the loops take {pct(share)} of its time from one loop's start to the next (the "
            f"iterations found are finer than the loops: each holds several)" if by_cycle else
            f"{len(reads) / max(ctx.ph.n_steady, 1):,.0f} element reads per steady-state "
            f"iteration on the main thread, in {n} loop{'s' if n != 1 else ''} of "
            f"{per_loop:,.0f} reads (median), {each}; the loops take {pct(share)} of its time")
    dev = ctx.bd.device is not None
    summary = (f"{head}. Reading the whole result once per batch (one vectorised op, one "
               f"transfer) removes the loops."
               + (" Each read also waits for the device queue to drain." if dev else
                  " On a CPU run nothing waits for a device: the loop is the host reading "
                  "results back one at a time."))
    speedup, why = _estimate(ctx, reads, cost, share, by_cycle, picked)
    inferred = ("the reads are inferred from the element picks",) if picked else ()
    return make_finding(ctx, spec, share, summary + why, evidence, causes=causes,
                        speedup=speedup, notes=inferred,
                        assumption=spec.factor("reads_inferred") if picked else 1.0)


def _pick_op(ctx: Ctx, reads: np.ndarray) -> str:
    """The op that picks the elements ("StridedSlice"), from its most common name."""
    names, counts = np.unique(ctx.trace.slices.name[reads], return_counts=True)
    return ctx.trace.names[int(names[np.argmax(counts)])].split(": ")[-1]


def _estimate(ctx: Ctx, reads: np.ndarray, cost: np.ndarray, share: float,
              by_cycle: bool, picked: bool) -> tuple[float, str]:
    """(the fix's speed-up, why in words): the loops removed (:mod:`.host_estimate`), one
    bulk read of every value the counted ``reads`` hand over put in their place
    (``cost``: each read's part of its loop's time; ``picked``: the reads are mostly
    TensorFlow's element picks)."""
    loops = read_loops(ctx)
    ws, we = _windows(ctx, loops, by_cycle)
    wall = float((we - ws).sum()) or 1.0
    steps = len(loops.starts) - 1 if by_cycle else len(ws)
    loop_ratio, per_op = _recorder(ctx, loops, picked)
    values, n = _whole_values(ctx, loops, reads)
    calls = _one_call_each(loops, reads) * loop_ratio
    left = min((values * BULK_NS_PER_VALUE + calls) / max(float(cost.sum()), 1.0), 1.0)
    inside = loops.starts < we.max()  # by cycle, the last loop starts the window's end
    math = rest_math(ctx, ctx.bd.host, ws, we, loops.starts[inside], loops.ends[inside])
    after = 0.0 if by_cycle else _after_reads(ctx, loops, ws, we) / wall
    removed = share + after  # untraced: it keeps its time without the profiler
    fix = HostFix(removed, math / wall, share * left, (share * loop_ratio + after) / removed,
                  "a loop of reads" + (" with the Python after it" if after >= 0.01 else ""),
                  step_ns=ctx.call_ns(wall, steps), per_op=per_op)
    used = (f" After the loops the main thread works {pct(after)} of the time with nothing "
            f"recorded, beyond the steps' own untraced boundary: Python that works on "
            f"the values read (formatting, summaries), which one read of the whole result "
            f"hands over at once; the fix takes it out with the loops." if after >= 0.01
            else "")
    bulk = (f" One read of the whole result a loop indexes still costs one of the loop's "
            f"reads and converts its {values // max(n, 1):,} values ({BULK_NS_PER_VALUE} ns "
            f"each, measured for .tolist() / .numpy() and a Python pass over the values): "
            f"{pct(left)} of the loops' time." if left >= 0.01 else "")
    return fix.speedup(), fix.basis() + used + bulk


def _after_reads(ctx: Ctx, loops: ReadLoops, ws: np.ndarray, we: np.ndarray) -> float:
    """ns in the windows ``ws``/``we`` from each loop's last read to the main thread's next
    recorded event (or the window's end), less the steps' own untraced boundary: twice the
    untraced time the same windows start with after their mark (the loop around the step
    runs on both sides of it: the step function's return and the loop's next turn before,
    the call into the step after).  What is left is the Python after the reads that works
    on their values (a text's assembly, a numpy summary of a ``.numpy()`` copy), which the
    trace does not record."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(ctx.bd.host.lane)
    st = np.sort(s.start[mine[s.dur[mine] > 0]])
    k = np.searchsorted(ws, loops.ends, side="right") - 1
    ok = (k >= 0) & (loops.starts >= ws[np.maximum(k, 0)]) & (loops.ends < we[np.maximum(k, 0)])
    if not len(st) or not ok.any():
        return 0.0
    end, w_start, w_end = loops.ends[ok], ws[k[ok]], we[k[ok]]
    nxt = st[np.minimum(np.searchsorted(st, end), len(st) - 1)]
    tail = np.where(nxt >= end, np.minimum(nxt, w_end), w_end) - end
    first = st[np.minimum(np.searchsorted(st, w_start, side="right"), len(st) - 1)]
    head = np.clip(np.minimum(first, w_end) - w_start, 0, None)  # after the step's own mark
    return max(float(tail.sum() - 2 * head.sum()), 0.0)


def _recorder(ctx: Ctx, loops: ReadLoops, picked: bool) -> tuple[float, float]:
    """(the loop's unprofiled over captured time, the rest's per-op work's) for the
    recorder of the reads: TensorFlow's eager picks (``picked``), a Python tracer's
    conversions, or torch.profiler's ops."""
    s = ctx.trace.slices
    if picked:
        return TF_UNPROFILED, TF_UNPROFILED
    if (s.kind[loops.reads] == int(Kind.PYTHON)).mean() > 0.5:
        return PYTHON_LOOP_UNPROFILED, PYTHON_LOOP_UNPROFILED
    return READ_LOOP_UNPROFILED, TINY_LOOP_UNPROFILED


def _one_call_each(loops: ReadLoops, reads: np.ndarray) -> float:
    """Captured ns of one read of each loop the counted ``reads`` are in (its time over
    its reads): one read of the whole result is at least one call of the loop's kind."""
    which = np.unique(loops.loop[np.searchsorted(loops.reads, reads)])
    return float(((loops.ends - loops.starts) / np.maximum(loops.count, 1))[which].sum())


def _windows(ctx: Ctx, loops: ReadLoops, by_cycle: bool) -> tuple[np.ndarray, np.ndarray]:
    """The time the loops' share is taken of: the steady iterations, or the cycles from
    the first loop's start to the last one's."""
    if by_cycle:
        return loops.starts[:1], loops.starts[-1:]
    host, r = ctx.bd.host, ctx.rows
    return host.starts[r], host.ends[r]


#: Ops that pick an element or a row of the result a loop reads (:func:`.work.op_kind`).
INDEX_OP = frozenset({"select", "index", "slice", "narrow", "unbind"})
#: Indexing ops (and reads) per loop whose input sizes are read (they index the same
#: result).
INDEX_SAMPLE = 8


def _whole_values(ctx: Ctx, loops: ReadLoops, reads: np.ndarray) -> tuple[int, int]:
    """(values the fix's one read per loop converts, loops): the whole result each loop
    indexes (the largest first input of its first indexing ops), or the values its reads
    hand over (their count times a sample's median) where that is more or shapes are not
    recorded."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(ctx.bd.host.lane)
    idx = mine[np.isin(s.name[mine], op_kinds(ctx, INDEX_OP))]
    idx = idx[np.argsort(s.start[idx], kind="stable")]
    which = loops.loop[np.searchsorted(loops.reads, reads)]  # by start: loop by loop
    ids, first, count = np.unique(which, return_index=True, return_counts=True)
    total = 0
    for k, at, n in zip(ids.tolist(), first.tolist(), count.tolist()):
        lo, hi = np.searchsorted(s.start[idx], [loops.starts[k], loops.ends[k]])
        whole = max((_values(ctx, j) for j in _picks(s.name, idx[lo:hi])[:INDEX_SAMPLE]),
                    default=0)
        sample = reads[at:at + min(n, INDEX_SAMPLE)].tolist()
        each = float(np.median([_values(ctx, j) for j in sample]))
        total += max(whole, int(round(each * n)))
    return total, len(ids)


def _picks(names: np.ndarray, idx: np.ndarray) -> list[int]:
    """The indexing ops of a loop that pick its elements: those whose name recurs in it.
    An op taken once (``out[:4]`` before the loop formats those rows) cuts the part the
    loop reads: its input is more than the loop reads."""
    _, inv, counts = np.unique(names[idx], return_inverse=True, return_counts=True)
    return idx[counts[inv] > 1].tolist()


def _values(ctx: Ctx, j: int) -> int:
    """Values one read hands to Python: the elements of its first recorded input (1
    where shapes are not recorded)."""
    dims = input_dims(ctx, j)
    return max(elements(dims[0]), 1) if dims else 1


def _loop_evidence(ctx: Ctx, host, loops: ReadLoops) -> list[Evidence]:
    span = loops.ends - loops.starts
    out = []
    for k in np.argsort(-span, kind="stable")[:MAX_EVIDENCE].tolist():
        it = int(window_of(loops.starts[k:k + 1], host.starts, host.ends)[0])
        out.append(Evidence(f"{int(loops.count[k])} reads in a row take {fmt_ns(int(span[k]))}",
                            int(loops.starts[k]), int(loops.ends[k]),
                            None if it < 0 else ctx.it(it), [host.lane]))
    return out
