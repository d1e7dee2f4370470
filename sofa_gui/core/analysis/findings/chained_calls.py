"""A training step whose repeated calls form a chain: each repeat reads a value of its
result into Python and the next one starts from a tensor made of host values (a policy
called once per action of an episode, the action read with ``.item()`` and handed to an
environment simulated in Python, whose new state is the next call's input).

The trace shows the loop as a run of repeats of one unit of one-row calls
(:func:`.batch_estimate.repeated_blocks`) in which every repeat holds a read of a value
(``aten::item``, ``aten::_local_scalar_dense``) and a tensor made from host values
(``aten::lift_fresh``, ``aten::tensor``, ``aten::from_numpy``, ...).  A trace records no
data flow, but a step that reads each call's result and builds the next call's input in
Python between them waits on that read before it can call again: the repeats cannot be
batched into one call, as the requests of a server can, whose inputs are picked from a
batch that holds them all.  What batches is independent copies of the whole step (several
environments stepped in lockstep, as a vector environment does): one call per position of
the chain on the copies' inputs, and one update for them all.

The estimate is per copy, for :data:`COPIES` copies run together (a trace cannot show how
many a program can run; more copies gain more, up to what each copy's own work leaves):

* **before**: the step without the profiler's cost per recorded event
  (:mod:`.recorder_cost`), as :mod:`.batch_estimate` reads it;
* **after**: each repeat's and the rest of the step's calls once for all the copies (their
  fixed cost paid once), plus per copy what each copy still does alone: the Python after
  each read until the next call (what the program does with the value: the environment's
  step), running warmer for running again right after itself
  (:func:`.host_estimate.cooled`: before, the calls between kept it away), and the math
  each further input adds to the calls (:func:`.batch_estimate.added_ns`).

A step whose repeats are whole updates one after another (each starts an optimizer step:
a model trained batch by batch, a step being its epoch) is no chain of calls either: each
update runs on the last one's weights, and one batched call over all the repeats would be
one update on their batches together, another algorithm.  What batches is independent
copies of the whole step, each on its own weights (the models of a hyperparameter sweep or
an ensemble, stacked as ``torch.func.stack_module_state`` and ``vmap`` do), estimated per
copy for :data:`COPIES` (:func:`copies_fix`): the step's calls once for all of them, the
model's forward and backward at :data:`STACKED_CALL_COST` times their cost, and
per copy the math its ops add, the elementwise ones too (each copy updates its own
parameters and moments: the optimizer's per-element work grows with the copies).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from .. import roles as R
from ..host_side import window_of
from .batch_estimate import (
    ELEMENT_NS,
    PROFILER_NS_PER_EVENT,
    BatchFix,
    Block,
    added_ns,
    median_row,
    repeated_blocks,
    step_slices,
    step_window,
    unprofiled_ns,
)
from .context import Ctx
from .host_estimate import COLD_PER_OP, cooled
from .recorder_cost import per_event_ns
from .work import optimizer_steps, outermost, starts_inside

#: Ops that read a value of a tensor into Python.
READ = re.compile(r"^aten::(item|_local_scalar_dense)$")
#: Ops that make a tensor from host values (``torch.tensor``, ``torch.from_numpy``).
HOST_MADE = re.compile(r"^aten::(lift_fresh|lift|tensor|from_numpy|as_tensor|scalar_tensor)$")
#: What removes a chained step's per-call cost, in words.
CHAIN_REMEDY = ("Each repeated call reads its result into Python before the next starts from "
                "host values: the calls are a chain and cannot be batched with each other. "
                "Running independent copies of the step together (environments stepped in "
                "lockstep, as a vector environment does: one call per link of the chain on "
                "all their inputs, one update) pays each call's fixed cost once for them "
                "all.")
#: The copies of the step the estimate runs together (a vector environment's width).
COPIES = 8
#: The part of a step its runs of repeats cover for a loop of whole updates (as the tiny-op
#: loop's batching reads its loops, :func:`.batch_estimate.loop_batch`).
LOOP_COVER = 0.5
#: A model's forward and backward called under ``torch.func.vmap`` of ``functional_call`` on
#: stacked parameters over the same calls run eagerly, for one copy: vmap's batching rules
#: and the parameters swapped into the module each call add their own cost per call (2.6x
#: on two small MLPs, one shallow and one deep, whose steps are mostly per-call cost;
#: 1.0-1.8x on a small conv net and a wider MLP, whose calls hold more math;
#: ``benchmarks/corpus/stacked_cost.py``).
STACKED_CALL_COST = 2.6


def chained(ctx: Ctx, block: Block) -> bool:
    """Every repeat of ``block`` reads a value into Python and makes a tensor from host
    values: the next repeat's input can be built from the last one's read."""
    s = ctx.trace.slices
    top = outermost(s.start, s.end, block.ops)
    top = top[np.argsort(s.start[top], kind="stable")]
    repeat = np.arange(len(top)) // max(block.period, 1)  # the repeat of each outer call

    def repeats_with(rx: re.Pattern) -> int:
        hit = np.isin(s.name[top], ctx.trace.name_ids(rx.match))
        return len(np.unique(repeat[hit]))  # a read's own nested ops count once

    return repeats_with(READ) >= block.count and repeats_with(HOST_MADE) >= block.count


def whole_updates(ctx: Ctx, block: Block, lane: int) -> bool:
    """Every repeat of ``block`` starts an optimizer step: each repeat is a whole update
    (forward, backward, step), one after another on the last one's weights.  Copies run
    together would share one update, which changes the algorithm: such repeats are no chain
    that copies batch."""
    s = ctx.trace.slices
    top = np.sort(s.start[outermost(s.start, s.end, block.ops)])
    steps = s.start[optimizer_steps(ctx, lane)]
    steps = steps[(steps >= block.start) & (steps < block.end)]
    at = np.searchsorted(top, steps, side="right") - 1  # the outer call each step starts in
    return len(np.unique(at[at >= 0] // max(block.period, 1))) >= block.count


def chained_updates(ctx: Ctx, host) -> float:
    """The optimizer steps per steady step where the step's updates form a chain: between
    every two of a step's updates (outside them) a value is read into Python and a tensor is
    made from host values (an agent acting with its policy after each update, the action read
    back and the environment's new state made into the next input); 1.0 where they do not.
    The next update's input waits on what the last update's weights made: a batched call can
    pool only one update's calls."""
    s = ctx.trace.slices
    steps = optimizer_steps(ctx, host.lane)
    steps = steps[ctx.in_steady(s.start[steps], host.starts, host.ends)]
    if len(steps) < 2 * max(ctx.ph.n_steady, 1):
        return 1.0
    steps = steps[np.argsort(s.start[steps], kind="stable")]
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[~starts_inside(ctx, steps, mine)]  # the optimizer's own reads are not links
    row = window_of(s.start[steps], host.starts, host.ends)
    for rx in (READ, HOST_MADE):
        at = np.sort(s.start[mine[np.isin(s.name[mine], ctx.trace.name_ids(rx.match))]])
        for k in range(len(steps) - 1):
            if row[k] != row[k + 1]:
                continue
            lo, hi = s.start[steps[k]], s.start[steps[k + 1]]
            if np.searchsorted(at, hi) - np.searchsorted(at, lo, side="right") < 1:
                return 1.0
    return len(steps) / max(ctx.ph.n_steady, 1)


def after_reads_ns(ctx: Ctx, every: np.ndarray, block: Block) -> tuple[float, float]:
    """(ns of untraced Python after the block's reads until the next framework call, ns
    from one read to the next: how long the rest of a repeat keeps that Python away)."""
    s = ctx.trace.slices
    ops = every[s.kind[every] == int(Kind.CPU_OP)]
    top = outermost(s.start, s.end, ops)
    read = np.isin(s.name[top], ctx.trace.name_ids(READ.match))
    inside = (s.start[top] >= block.start) & (s.start[top] < block.end)
    k = np.flatnonzero(read[:-1] & inside[:-1])
    if not len(k):
        return 0.0, 0.0
    gaps = np.clip(s.start[top[k + 1]] - s.end[top[k]], 0, None).astype(np.float64)
    return float(gaps.sum()), block.span / max(len(k), 1) - float(np.median(gaps))


@dataclass(frozen=True)
class ChainFix(BatchFix):
    """:class:`.batch_estimate.BatchFix` of copies of a chained step: ``unit_ns`` is what
    the copies share (the step less the Python after its reads), ``per_step`` the chain's
    links, ``python`` the Python after the reads a step (ns, as captured) and ``alone``
    what it takes per copy, the copies run one after another."""

    python: float = 0.0
    alone: float = 0.0

    def basis(self) -> str:
        return (f" Estimate per copy, a lower bound, for {self.batch} independent copies of "
                f"the step run together (the trace cannot show how many the program can "
                f"run; more gain more, and all the Python after the reads is counted as "
                f"each copy's own, the most it can be): {self.unprofiled()}, "
                f"{fmt_ns(self.before_ns / self.batch)}, over its share of the copies' "
                f"step, {fmt_ns(self.after_ns / self.batch)}: the calls once for all copies "
                f"({fmt_ns(self.unit_ns)}: one call per link of the chain on the copies' "
                f"inputs, one update), and per copy the Python after each read "
                f"({fmt_ns(self.python)} a step as captured, {fmt_ns(self.alone)} run for "
                f"each copy right after the last: work that runs again right after itself "
                f"is faster) and the math each further input adds "
                f"({fmt_ns(self.added.ns)} a link).")


def chain_fix(ctx: Ctx, host) -> ChainFix | None:
    """The estimate of running copies of a training step whose longest run of repeats is a
    chain (:func:`chained`), per copy; None where it is not (and for inference, whose
    requests batch together). Read once per analysis: the tiny-op and small-batch
    readings both tell it."""
    if host is None or not len(ctx.rows) or ctx.facts.value("mode") != "training":
        return None
    return ctx.once(("chain_fix", host.lane), lambda: _chain_fix(ctx, host))


@dataclass(frozen=True)
class CopiesFix(BatchFix):
    """:class:`.batch_estimate.BatchFix` of copies of a step made of whole updates: the
    step's calls once for the copies (``unit_ns``), ``per_step`` updates a step, the
    model's forward and backward calls ``model_ns`` of the step unprofiled."""

    model_ns: float = 0.0

    def basis(self) -> str:
        return (f" Estimate per copy, for {self.batch} independent copies of the step run "
                f"together (the trace cannot show how many the program runs; more gain "
                f"more): {self.unprofiled()}, {fmt_ns(self.before_ns / self.batch)}, over its "
                f"share of the copies' step, {fmt_ns(self.after_ns / self.batch)}: the "
                f"step's calls once for all copies ({fmt_ns(self.unit_ns)}: the "
                f"rest as it runs now, the model's forward and backward calls "
                f"{self.model_ns / 1e6:.2f} ms at "
                f"{STACKED_CALL_COST}x, the cost per call of a model called under "
                f"torch.func.vmap on stacked parameters, measured on small models) and per "
                f"copy the math its ops add "
                f"({fmt_ns(self.added.ns)} a step: matmul FLOPs and {ELEMENT_NS} ns per "
                f"element of the other ops, each copy's optimizer update on its own "
                f"parameters included).")


#: What removes the per-call cost of a step of whole updates, in words.
COPIES_REMEDY = ("Each repeat is a whole update (forward, backward, optimizer step) on the "
                 "last one's weights: the updates cannot be batched with each other (one "
                 "update on their batches together is another algorithm). Independent "
                 "copies of the step (the models of a hyperparameter sweep or an ensemble, "
                 "their parameters stacked with torch.func.stack_module_state and the model "
                 "called under torch.func.vmap, one update for the stacked parameters) pay "
                 "each call's fixed cost once for them all.")


def copies_fix(ctx: Ctx, host) -> CopiesFix | None:
    """The estimate of running copies of a training step whose longest run of repeats is
    whole updates (:func:`whole_updates`) that form no chain of reads, per copy; None
    where the repeats are no such updates."""
    if host is None or not len(ctx.rows) or ctx.facts.value("mode") != "training":
        return None
    return ctx.once(("copies_fix", host.lane), lambda: _copies_fix(ctx, host))


def _copies_fix(ctx: Ctx, host) -> CopiesFix | None:
    row = median_row(ctx, host)
    blocks = repeated_blocks(ctx, host, row, cover=LOOP_COVER)
    if not blocks or not whole_updates(ctx, blocks[0], host.lane) or chained_updates(
            ctx, host) > 1.0:
        return None  # a chain of updates batches neither way
    s = ctx.trace.slices
    every = step_slices(ctx, host, row)
    a, b = step_window(ctx, host, row, every)
    cost = per_event_ns(ctx, host.lane, PROFILER_NS_PER_EVENT)
    step_ns = unprofiled_ns(float(b - a), len(every), cost[0])
    add = added_ns(ctx, every[s.kind[every] == int(Kind.CPU_OP)], 1, COPIES)
    model_ns = _model_calls_ns(ctx, host, every, cost[0])
    shared = step_ns + (STACKED_CALL_COST - 1.0) * model_ns
    return CopiesFix(COPIES * step_ns, shared + (COPIES - 1) * add.ns, shared, add, COPIES,
                     blocks[0].count, f"{COPIES} copies of the step's updates", cost,
                     model_ns=model_ns)


def _model_calls_ns(ctx: Ctx, host, every: np.ndarray, per_event: float) -> float:
    """ns, unprofiled, of the model's forward and backward calls among the step's slices
    ``every`` and the Python between two of them (a module's own call): its outermost
    framework ops in those roles outside the optimizer's steps."""
    s = ctx.trace.slices
    ops = every[s.kind[every] == int(Kind.CPU_OP)]
    top = outermost(s.start, s.end, ops)
    top = top[np.argsort(s.start[top], kind="stable")]
    model = np.isin(R.host_roles(ctx.trace, top), (R.FORWARD, R.BACKWARD))
    model &= ~starts_inside(ctx, optimizer_steps(ctx, host.lane), top)
    if not model.any():
        return 0.0
    gaps = np.clip(s.start[top[1:]] - s.end[top[:-1]], 0, None)
    between = float(gaps[model[:-1] & model[1:]].sum())
    events = int(starts_inside(ctx, top[model], every).sum())
    return unprofiled_ns(float(s.dur[top[model]].sum()), events, per_event) + between


def _chain_fix(ctx: Ctx, host) -> ChainFix | None:
    row = median_row(ctx, host)
    blocks = repeated_blocks(ctx, host, row)
    if not blocks or not chained(ctx, blocks[0]) or whole_updates(ctx, blocks[0], host.lane):
        return None
    block = blocks[0]
    every = step_slices(ctx, host, row)
    a, b = step_window(ctx, host, row, every)
    cost = per_event_ns(ctx, host.lane, PROFILER_NS_PER_EVENT)
    step_ns = unprofiled_ns(float(b - a), len(every), cost[0])
    python, away = after_reads_ns(ctx, every, block)
    alone = python / cooled(COLD_PER_OP, away)
    add = added_ns(ctx, block.ops, block.count, COPIES)
    shared = max(step_ns - python, 0.0)
    after = shared + COPIES * alone + (COPIES - 1) * block.count * add.ns
    return ChainFix(COPIES * step_ns, after, shared, add, COPIES, block.count,
                    f"{COPIES} copies of the chained step", cost, python=python, alone=alone)
