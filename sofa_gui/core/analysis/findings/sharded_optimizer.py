"""Collectives run by the optimizer's step: an optimizer that shards its state over the
ranks (``ZeroRedundancyOptimizer``) updates only its rank's share of the parameters and
then broadcasts every updated shard to the other ranks (one ``c10d::broadcast_`` per
parameter, run by the backend's threads as ``gloo:broadcast``), waiting for them all
before its step returns.  The host breakdown counts that wait as communication (the step's
span encloses it as a step function does); this module sizes what an unsharded optimizer
gains: the step from its first collective to its end goes (the collectives and the wait
for them), and each rank then updates every parameter itself, its own update's time once
more for each other rank.  What the whole optimizer state on every rank costs in memory is
not in the trace.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from .context import Ctx
from .fixes import Fix

#: The optimizer's step as ``torch.profiler`` records it (``Optimizer.step#Adam.step``).
STEP_SPAN = re.compile(r"^Optimizer\.step#")
#: A collective started from the main thread.
COLLECTIVE_CALL = re.compile(r"^c10d::")
FIX_NAME = "optimizer state unsharded"


def sharded_steps(ctx: Ctx, host) -> tuple[float, float, int] | None:
    """(ns of ``host``'s optimizer steps from their first collective call to their end,
    ns of the updates nested in those steps, how many such steps) over the steady steps;
    None where no optimizer step runs a collective."""
    s = ctx.trace.slices
    t = ctx.trace
    on = t.lane_slices(host.lane)
    on = on[ctx.in_steady(s.start[on], host.starts, host.ends)]
    spans = on[np.isin(s.name[on], t.name_ids(STEP_SPAN.match))
               & (s.kind[on] == int(Kind.ANNOTATION))]
    calls = on[np.isin(s.name[on], t.name_ids(COLLECTIVE_CALL.match))]
    if not len(spans) or not len(calls):
        return None
    removed = updates = 0.0
    steps = 0
    for sp in spans.tolist():
        inside = (s.start[calls] >= s.start[sp]) & (s.end[calls] <= s.end[sp])
        if not inside.any() or ((s.start[spans] < s.start[sp]) & (s.end[spans] >= s.end[sp])).any():
            continue  # no collective, or a step nested in the one that runs them
        first = int(s.start[calls[inside]].min())
        removed += float(s.end[sp] - first)
        nested = spans[(s.start[spans] > s.start[sp]) & (s.end[spans] <= first)]
        updates += float(s.dur[nested].sum())
        steps += 1
    return (removed, updates, steps) if steps else None


def estimate_sharding(ctx: Ctx, finding, host) -> None:
    """Where ``host``'s optimizer step runs collectives, say so in the communication
    ``finding`` and show an unsharded optimizer as a fix of its own with its estimate."""
    got = sharded_steps(ctx, host) if host is not None else None
    if got is None:
        return
    removed, updates, steps = got
    world = ctx.facts.value("ranks")
    world = world if isinstance(world, int) and world > 1 else 2
    wall = float((host.ends[ctx.rows] - host.starts[ctx.rows]).sum()) or 1.0
    n = len(ctx.rows)
    added = updates * (world - 1)
    finding.summary += (
        f" The optimizer's step runs collectives: from its first one to its end it takes "
        f"{fmt_ns(removed / n)} a step (an optimizer that shards its state, such as "
        f"ZeroRedundancyOptimizer, broadcasts each rank's updated parameters and waits for "
        f"them).")
    fix = Fix("pytorch", "The plain optimizer on every rank instead of sharding its state "
                         "(no ZeroRedundancyOptimizer): the broadcasts of the updated "
                         "parameters after each step go; each rank keeps the whole optimizer "
                         "state and updates every parameter.",
              modes=("training",), gain="removes", name=FIX_NAME,
              estimate=wall / max(wall - removed + added, 1.0),
              estimate_why=(f"the step's collectives and their wait ({fmt_ns(removed / n)} a "
                            f"step) removed; its own update ({fmt_ns(updates / n)} a step) "
                            f"run for {world} ranks' parameters"))
    finding.fixes.insert(0, fix)
