"""What a DDP communication hook costs the main thread, and what turning it off gains.

DDP divides each gradient by the world size as it copies it into its bucket
(``torch::distributed::reducer::mul_out``) unless a communication hook is registered: it
then copies the gradient undivided (``torch::distributed::reducer::copy_``) and hands the
bucket to the hook, which runs its own ops (a compression hook's cast to fp16 or bf16 and
its division) on the main thread before it starts the bucket's collective
(``c10d::allreduce_``).  Those ops, between a bucket's last gradient copy and its
collective call, are the hook's cost in the trace.  What turning the hook off gains is
that cost; what it costs is not in the trace: a compression hook's buckets are then sent
uncompressed (twice the bytes of a 16-bit hook), and the cast back after the collective
runs in the collective's callback, which the profiler does not record.  Where the ranks
share the host's cores, the wait for the collectives is set by the cores, not by the bytes
alone, so the estimate counts the wait unchanged and says so.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...units import fmt_ns
from .context import Ctx, amdahl
from .fixes import Fix

#: DDP's copy of a gradient into its bucket where a communication hook is registered.
HOOKED_COPY = "torch::distributed::reducer::copy_"
#: A collective started from the main thread (the hook's, or DDP's own).
COLLECTIVE_CALL = "c10d::"
FIX_NAME = "communication hook off"
#: The remedy that advises compression, worded anew where a hook already runs.
COMPRESSION_WORDS = "communication hooks for FP16/BF16"


def hook_work(ctx: Ctx, host) -> tuple[float, int, list[str]] | None:
    """(ns the hook's ops take on ``host``'s main thread over the steady steps, how many
    buckets it ran on, their names by time) where DDP copies gradients into its buckets
    undivided (a registered hook), else None."""
    s = ctx.trace.slices
    t = ctx.trace
    on = np.flatnonzero(s.lane == host.lane)
    on = on[ctx.in_steady(s.start[on], host.starts, host.ends)]
    if not len(on):
        return None
    copies = on[np.isin(s.name[on], t.name_ids(lambda n: n == HOOKED_COPY))]
    calls = on[np.isin(s.name[on], t.name_ids(lambda n: n.startswith(COLLECTIVE_CALL)))]
    if not len(copies) or not len(calls):
        return None
    spent = 0.0
    buckets = 0
    by_name: dict[str, float] = {}
    for c in calls.tolist():
        depth = s.depth[c]
        before = copies[(s.depth[copies] == depth) & (s.end[copies] <= s.start[c])]
        if not len(before):
            continue
        last = int(before[np.argmax(s.start[before])])
        if _parted(ctx, host, last, c):
            continue
        # the hook's own ops: the collective call's siblings after the bucket's last copy
        mine = on[(s.depth[on] == depth) & (s.start[on] >= s.end[last])
                  & (s.end[on] <= s.start[c])]
        buckets += 1
        for j in mine.tolist():
            spent += float(s.dur[j])
            by_name[t.name_of(j)] = by_name.get(t.name_of(j), 0.0) + float(s.dur[j])
    if not buckets:
        return None
    return spent, buckets, sorted(by_name, key=by_name.get, reverse=True)


def _parted(ctx: Ctx, host, copy: int, call: int) -> bool:
    """Whether a slice one level up on the main thread ends between the gradient ``copy``
    and the collective ``call`` (they are then not one bucket's hand-over)."""
    s = ctx.trace.slices
    d = s.depth[call]
    if d == 0:
        return False
    up = np.flatnonzero((s.lane == host.lane) & (s.depth == d - 1)
                        & (s.start <= s.start[call]) & (s.end >= s.end[call]))
    return not len(up) or bool(s.start[up].max() > s.start[copy])


def estimate_hook(ctx: Ctx, finding, host) -> None:
    """Where ``host``'s trace shows a communication hook: say so in the communication
    ``finding``, show turning it off as a fix of its own with the hook's cost as its
    estimate, and word the compression remedy as one already applied."""
    got = hook_work(ctx, host) if host is not None else None
    if got is None:
        return
    spent, buckets, names = got
    steps = len(ctx.rows)
    wall = float((host.ends[ctx.rows] - host.starts[ctx.rows]).sum()) or 1.0
    ops = ", ".join(f"`{n}`" for n in names[:3]) or "no op"
    finding.summary += (
        f" DDP runs a communication hook: it copies each gradient into its bucket undivided "
        f"(`reducer::copy_`), and the hook runs {ops} on the main thread before each "
        f"bucket's collective ({buckets / steps:.0f} a step, {fmt_ns(spent / steps)} a "
        f"step). Turning it off saves those ops; a compression hook's buckets are then sent "
        f"uncompressed, which the trace cannot time.")
    fix = Fix("pytorch", "DDP without the communication hook (no register_comm_hook: its own "
                         "all-reduce of the buckets): the hook's ops before each collective go; "
                         "a compression hook's buckets are then sent uncompressed.",
              modes=("training",), gain="removes", name=FIX_NAME,
              estimate=amdahl(min(spent / wall, 0.999)),
              estimate_why=(f"the hook's {fmt_ns(spent / steps)} a step on the main thread "
                            f"removed; the wait counted unchanged (what the larger collective "
                            f"costs, and the cast back in its callback, is not in the trace)"))
    finding.fixes = [_applied(f) for f in finding.fixes]
    finding.fixes.insert(0, fix)


def _applied(fix: Fix) -> Fix:
    """The compression remedy, worded for a run whose hook already compresses."""
    if COMPRESSION_WORDS not in fix.text:
        return fix
    return replace(fix, text="Communicate less often: gradient accumulation with "
                             "model.no_sync(). A communication hook already runs here; "
                             "PowerSGD's low-rank hook sends fewer bytes than a 16-bit one.")
