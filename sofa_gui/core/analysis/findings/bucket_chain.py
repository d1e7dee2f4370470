"""What a change of DDP's bucket size can gain on a host whose collectives run on their
backend's own threads (gloo, MPI, UCC).

A bucket size moves the same gradients: the collectives' own time, the bytes they send
at the pace the host gives them, stays.  What it moves is when the chain of collectives
runs.  In a steady step the chain cannot start before DDP copies the first gradient into
a bucket (its first ``reducer::mul_out`` on the main thread), and it ends no sooner than
that start plus the time its collectives keep the backend's threads busy.  So the most a
bucket size can save is the time by which the chain ends later than that: the pauses in
which the backend's threads wait for the next bucket, and the delay of the first one.
Where the collectives already run back to back from the first gradient on, the step's
wait for them is their own length, and no bucket size shortens it; only fewer bytes do
(accumulation with ``no_sync``, compression), which the finding's own estimate stands
for.  The per-call cost of a collective that larger buckets save is not counted (the
trace does not part it from the bytes' time).
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ..host_side import window_of
from ..intervals import union
from ..roles import host_collectives
from .context import Ctx, amdahl
from .host_estimate import fix_named

FIX_NAME = "bucket size"
#: Below this estimate the chain runs back to back and the finding says so: its own
#: estimate is then what fewer bytes gain, not what a bucket size gains.
BACK_TO_BACK = 1.10


def chain_slack(ctx: Ctx, host) -> tuple[float, float, float] | None:
    """(ns the collectives' chain ends later than it could, summed over the steady steps
    and capped by each step's communication wait; ns the chain keeps the backend's
    threads busy; the steady steps' wall) for the rank whose main thread is ``host``
    (None where its process runs no collective on another thread, or its main thread
    starts none: DDP's first copy of a gradient into a bucket, or a collective call)."""
    s = ctx.trace.slices
    lanes = ctx.trace.lanes
    r = ctx.rows
    if not len(r):
        return None
    coll = host_collectives(ctx.trace)
    coll = coll[(lanes.pid[s.lane[coll]] == lanes.pid[host.lane]) & (s.lane[coll] != host.lane)]
    comm = host.role_slices.get("communication", np.zeros(0, np.int64))
    first = comm[s.lane[comm] == host.lane]
    if not len(coll) or not len(first):
        return None
    cw = window_of(s.start[coll], host.starts, host.ends)
    fw = window_of(s.start[first], host.starts, host.ends)
    waits = host.column("communication")
    slack = busy = 0.0
    for i in r.tolist():
        mine = coll[cw == i]
        mine_first = first[fw == i]
        if not len(mine) or not len(mine_first):
            continue
        us_, ue = union(s.start[mine], s.end[mine])
        held = float((ue - us_).sum())
        earliest = float(s.start[mine_first].min())
        busy += held
        slack += min(max(float(ue[-1]) - (earliest + held), 0.0), float(waits[i]))
    wall = float((host.ends[r] - host.starts[r]).sum())
    return (slack, busy, wall) if busy > 0 and wall > 0 else None


def estimate_buckets(ctx: Ctx, finding, host) -> None:
    """Fill the bucket-size fix's estimate of the communication ``finding`` (where it
    shows that fix) from the collectives' chain on ``host``'s rank (None: the
    collectives run on a device, not estimated), and say it in the summary when the
    chain leaves no time to gain."""
    fix = fix_named(finding, FIX_NAME)
    if fix is None:
        return
    if host is None:
        fix.estimate_why = ("read where the collectives run on the host's threads (gloo, MPI, "
                            "UCC), not on a device")
        return
    got = chain_slack(ctx, host)
    if got is None:
        fix.estimate_why = "the trace holds no collective run on the backend's own threads"
        return
    slack, busy, wall = got
    fix.estimate = amdahl(min(slack / wall, 0.999))
    steps = len(ctx.rows)
    fix.estimate_why = (
        f"at most: a bucket size sends the same bytes, and the collectives keep the "
        f"backend's threads busy {fmt_ns(busy / steps)} a step; from DDP's first gradient "
        f"copy to their end they take {fmt_ns(slack / steps)} a step more than that")
    if fix.estimate < BACK_TO_BACK:
        finding.summary += (
            f" The collectives run back to back from the first gradient DDP hands them "
            f"({fmt_ns(busy / steps)} a step on the backend's threads): the wait is their "
            f"own length, which a bucket size does not shorten (about "
            f"{fix.estimate:.2f}x); only sending fewer bytes does.")
