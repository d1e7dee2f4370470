"""Dispatch rule: on XLA/PjRt runs the runtime threads issue the work; the device idles
while they dispatch, copy arguments and allocate."""

from __future__ import annotations

from ...units import fmt_pct as pct
from ..device_side import DeviceBreakdown
from ..results import Finding
from .causes import causes_by_name, self_times
from .context import (
    Ctx,
    make_finding,
)
from .devices import (
    LAUNCH_CATEGORIES,
    one_off_in_gaps,
    runtime_dispatch_in_sync,
    runtime_lanes,
    runtime_work,
)
from .launch_rules import runtime_in_gaps
from .registry import Rule, rule


@rule("host_dispatch_bound", "Host dispatch bound (XLA/PjRt runtime threads)", 0.03, 0.15,
      "same grading as launch overhead: the runtime threads are the host issuing work",
      partition="device_time")
def host_dispatch_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    lanes = runtime_lanes(ctx)
    if not lanes or not ctx.bd.devices:
        return None
    best = max(ctx.bd.devices, key=lambda d: _dispatch_share(ctx, d))
    share = _dispatch_share(ctx, best)
    s = ctx.trace.slices
    work = runtime_work(ctx, lanes)
    work = work[ctx.in_steady(s.start[work], best.starts, best.ends)]
    own = self_times(ctx, work)
    total = float(own.sum()) or 1.0
    causes = causes_by_name(ctx, work, own, total)
    host = ctx.host_of(best.rank)
    calls = ""
    if host is not None:  # what the main thread does meanwhile (the jitted call itself)
        calls, _, main = runtime_in_gaps(ctx, best, host)
        causes = sorted(causes + main, key=lambda c: -c.total_ns)
    evidence = [c.instance for c in causes if c.instance is not None]
    busy = ctx.share(best, ["compute"])
    summary = (f"{best.label} is busy only {pct(busy)} of steady-state iteration time; it idles "
               f"{pct(share)} while the host issues work: the main thread in the jitted call "
               f"and the XLA/PjRt runtime threads "
               f"({', '.join(sorted({ctx.trace.lanes.name[k].split('/')[0] for k in lanes}))}) "
               f"dispatching executables, copying arguments, allocating and releasing buffers "
               f"(their waits for buffer events not counted).{calls} The host issues too "
               f"little work per call: dispatch takes longer than the device work it issues.")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes)


def _dispatch_share(ctx: Ctx, d: DeviceBreakdown) -> float:
    """Host-bound idle of an XLA/PjRt run: launch gaps and host-side idle (one-off calls
    left out) plus the sync idle during which runtime threads still dispatch."""
    host_idle = ctx.share(d, LAUNCH_CATEGORIES) - one_off_in_gaps(ctx, d)
    return max(host_idle, 0.0) + runtime_dispatch_in_sync(ctx, d)



