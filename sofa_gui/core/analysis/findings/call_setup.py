"""Framework set-up paid on every call: each steady iteration builds a new input pipeline
and an iterator over it, or traces a function into a graph again, before it runs the
model.

A high-level call such as Keras' ``model.predict`` / ``fit`` / ``evaluate`` wraps its input
in a new ``tf.data`` pipeline (its datasets, then ``MakeIterator``: the pipeline's threads,
its map functions instantiated) and looks up or traces its step function, then runs the
step on what the input holds.  Called once for a whole dataset, that set-up is paid once
(start-up); called once per sample or per small batch, it is paid per call and is most of
each call, while the model's own work is small.  The set-up calls
(:data:`..roles.SETUP`) are the main thread's framework overhead in the breakdown, neither
input (no element is made: the one batch such a pipeline hands over is fetched in the
``IteratorGetNext`` after it) nor compute.  The share is their time over the steady
iterations; the fix makes one call per batch of many samples (or calls the model directly
for a few).  The estimate is that of one call on the samples of the calls captured: their
set-up paid once instead of once per call, what each call does besides (the model's step,
the call's own Python) kept, so batching ``n`` calls saves at most ``n`` x.  A trace shows
the calls, not how many of them a program could merge: the estimate says how many it
assumes.

Set-up inside Keras' own batch marker (``Profiled batch step N``, the span of one ``fit``
batch: its train step, then its batch-end callbacks) is not ``fit``'s, whose pipeline and
iterator are built once before its first batch: it is a high-level call nested in the batch
(a callback scoring rows with ``model.predict``), around the batch's own step.  Its fix
calls the model directly on the rows, which drops the nested call whole (its pipeline,
iterators, per-batch function calls, the Python and output handling around them) rather
than merging a number of calls: the estimate keeps the batch's own step (the marker's time
before the nested call's first set-up) and the ops the nested call ran on the runtime's
pool threads (the model's work, which a direct call still runs), in a typical (median)
batch.
"""

from __future__ import annotations

import re

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import covered, measure_in, union
from ..results import Finding
from ..roles import SETUP, makes_iterator
from .causes import causes_by_name
from .context import Ctx, cause_evidence, make_finding
from .host_estimate import pool_slices
from .recompiles import recompiles
from .registry import Rule, rule
from .work import outermost

#: Set-up in at least this share of the steady iterations is per call, not one-off.
EVERY_CALL = 0.5
#: Keras' marker of one ``fit`` batch (its TensorBoard callback's profiled batches).
KERAS_BATCH = re.compile(r"^Profiled batch step \d+$")
#: What the direct-call estimate (:func:`direct_call_speedup`) counts, said in the finding.
DIRECT_BASIS = (
    " The set-up is made inside Keras' fit batches (after each batch's train step, "
    "where its batch-end callbacks run), by a high-level call nested in the batch, "
    "not by fit, which builds its pipeline once: estimate for calling the model "
    "directly on the call's rows, the nested call dropped whole (its pipeline, "
    "iterators, per-batch function calls and output handling) and what the batch "
    "keeps (its own train step, the ops the nested call ran on the runtime's pool "
    "threads) kept.")


@rule("setup_overhead_bound", "Framework set-up on every call (input pipeline, iterator, "
      "tracing)", 0.05, 0.20, "same grading as per-op overhead; set-up calls (tf.data "
      f"datasets and iterators made, tf.function graphs built) in >= {EVERY_CALL:.0%} of the "
      "steady iterations", factors={"one_call_per_batch": 0.8})
def setup_overhead_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    r = ctx.rows
    if host is None or not len(r):
        return None
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[np.isin(s.name[mine], ctx.trace.name_ids(lambda n: bool(SETUP.search(n))))]
    rc = recompiles(ctx)
    if rc is not None:  # a tf.function traced again every step is recompilation
        mine = mine[~np.isin(mine, rc.spans)]
    mine = outermost(s.start, s.end, mine[ctx.in_steady(s.start[mine], host.starts,
                                                        host.ends)])
    if not len(mine):
        return None
    rows = np.searchsorted(host.starts, s.start[mine], side="right") - 1
    n_calls = len(np.unique(rows))
    calls = n_calls / len(r)
    if calls < EVERY_CALL:
        return None
    a, b = union(s.start[mine], s.end[mine])
    inside = float(measure_in(host.starts[r], host.ends[r], a, b).sum())
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    share = min(inside / wall, 1.0)
    causes = causes_by_name(ctx, mine, s.dur[mine], inside or 1.0)
    evidence = cause_evidence(causes)
    direct = direct_call_speedup(ctx, mine)
    basis = _basis(share, n_calls) if direct is None else DIRECT_BASIS
    summary = (f"In {pct(calls)} of the steady iterations the main thread sets the framework "
               f"up again before it runs the model ({fmt_ns(inside / len(r))} per iteration, "
               f"{pct(share)} of its time): {_what(ctx, mine, len(r))}. A high-level call "
               f"pays this set-up each time (Keras model.predict / fit / evaluate wrap their "
               f"input in a new tf.data pipeline and iterator and look up or trace their step "
               f"function): called once per sample or per small batch, the set-up is most of "
               f"each call. It makes no input element (not an input pipeline to "
               f"parallelise) and no math (not compute). One call on many samples pays it "
               f"once per batch.{basis}")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        speedup=merged_calls_speedup(share, n_calls) if direct is None
                        else direct, assumption=spec.factor("one_call_per_batch"),
                        notes=("assumes the calls can take many samples at once",))


def merged_calls_speedup(share: float, n: int) -> float:
    """The speed-up of one call instead of ``n`` calls that each spend ``share`` of their
    time on set-up: the set-up paid once, the rest of every call kept (at most ``n`` x)."""
    n = max(n, 1)
    return 1.0 / max(1.0 - share * (n - 1) / n, 1.0 / n)


def direct_call_speedup(ctx: Ctx, setup: np.ndarray) -> float | None:
    """The speed-up of calling the model directly instead of a high-level call nested in
    Keras' ``fit`` batches, or None when the set-up calls ``setup`` are not all inside
    Keras' batch markers.  Per batch, kept: the marker's time before its first set-up call
    (the batch's own train step) and the busy time of the runtime's pool threads from
    there to the marker's end (the ops the nested call ran); the median batch over the
    median kept time."""
    host, s = ctx.bd.host, ctx.trace.slices
    marks = ctx.trace.lane_slices(host.lane)
    marks = marks[np.isin(s.name[marks], ctx.trace.name_ids(lambda n: bool(
        KERAS_BATCH.match(n))))]
    if not len(marks) or not covered(s.start[setup], s.start[marks], s.end[marks]).all():
        return None
    pool = pool_slices(ctx, host)
    ps, pe = union(s.start[pool], s.end[pool])
    k = np.searchsorted(s.start[marks], s.start[setup], side="right") - 1
    held, at = np.unique(k, return_index=True)  # in start order: each marker's first
    starts, ends = s.start[marks][held], s.end[marks][held]
    firsts = s.start[setup][at]
    ops = measure_in(ps, pe, firsts, ends) if len(ps) else np.zeros(len(held))
    kept = (firsts - starts) + ops
    return float(np.median(ends - starts) / max(float(np.median(kept)), 1.0))


def _basis(share: float, n: int) -> str:
    return (f" Estimate for one call on the samples of the {n} calls captured: their set-up "
            f"paid once instead of {n} times, the rest of each call (the model's step, the "
            f"call's own Python) kept; merging {n} calls saves at most {n}x, more calls merged "
            f"save more.")


def _what(ctx: Ctx, idx: np.ndarray, n_rows: int) -> str:
    """"2.0 iterators made, 8.0 datasets built, 3.0 tf.function graphs traced per
    iteration" from the set-up calls' names (their nested calls included)."""
    s = ctx.trace.slices
    names = [ctx.trace.names[int(n)] for n in s.name[idx]]
    made = sum(map(makes_iterator, names))
    built = sum(n.startswith("EagerLocalExecute: ") and "Dataset" in n for n in names)
    traced = sum(n == "tf.function-graph_building" for n in names)
    parts = [f"{k / n_rows:,.1f} {what} per iteration" for k, what in
             ((made, "iterators made"), (built, "datasets built"),
              (traced, "tf.function graphs traced")) if k]
    return "; ".join(parts) or f"{len(idx) / n_rows:,.1f} set-up calls per iteration"
