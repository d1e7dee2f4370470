"""Unexplained idle: the device waits and nothing in the trace says for what."""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..device_side import DeviceBreakdown
from ..host_side import window_of
from ..results import Cause, Evidence, Finding
from .context import (
    MAX_CAUSES,
    MAX_EVIDENCE,
    Ctx,
    make_finding,
)
from .devices import device_work
from .registry import Rule, rule


# -- unexplained idle ------------------------------------------------------------------------
@rule("gpu_idle_unexplained", "Device idle, cause not in the trace", 0.10, 0.30,
      "idle not attributed to input, copies, syncs or host work; {moderate} / {high} so "
      "that ordinary gaps stay quiet", partition="device_time",
      factors={"cause_unknown": 0.7})
def gpu_idle_unexplained(ctx: Ctx, spec: Rule) -> Finding | None:
    d, share = ctx.best_device(("idle_other",))
    if d is None:
        return None
    g = d.gaps
    sel = g.of("idle_other")
    sel = sel[ctx.in_steady(g.start[sel], d.starts, d.ends)]
    if not len(sel):
        return None
    length = g.end[sel] - g.start[sel]
    evidence = []
    for k in np.argsort(-length, kind="stable")[:MAX_EVIDENCE].tolist():
        j = int(sel[k])
        it = int(window_of(g.start[j:j + 1], d.starts, d.ends)[0])
        evidence.append(Evidence(f"{d.label} idle {fmt_ns(int(length[k]))} with nothing in "
                                 f"the trace running on the host", int(g.start[j]),
                                 int(g.end[j]), None if it < 0 else ctx.it(it), list(d.lanes)))
    busy = ctx.share(d, ["compute", "communication"])
    host = "no host trace" if ctx.host_of(d.rank) is None else "no host event covers these gaps"
    summary = (f"{d.label} is idle {pct(share)} of steady-state iteration time for reasons the "
               f"trace cannot show ({host}); it computes or communicates {pct(busy)} of the "
               f"time. {len(sel)} such gaps, median {fmt_ns(float(np.median(length)))}, "
               f"longest {fmt_ns(int(length.max()))}.")
    return make_finding(ctx, spec, share, summary, evidence,
                        assumption=spec.factor("cause_unknown"), notes=("cause unknown",),
                        causes=_idle_after(ctx, d, sel))


def _idle_after(ctx: Ctx, d: DeviceBreakdown, gaps: np.ndarray):
    """Unexplained gaps grouped by the device op that ends just before each: the place in
    the program where the device runs dry."""
    s = ctx.trace.slices
    g = d.gaps
    dev = device_work(ctx, d.lanes)
    if not len(dev):
        return []
    dev = dev[np.argsort(s.end[dev], kind="stable")]
    k = np.searchsorted(s.end[dev], g.start[gaps], side="right") - 1
    ok = k >= 0
    before = dev[k[ok]]
    length = (g.end[gaps] - g.start[gaps])[ok]
    total = float(length.sum()) or 1.0
    out = []
    names = s.name[before]
    tot = np.bincount(names, weights=length.astype(np.float64))
    for nid in np.argsort(-tot, kind="stable")[:MAX_CAUSES].tolist():
        if tot[nid] <= 0:
            break
        mine = np.flatnonzero(names == nid)
        gi = int(gaps[ok][mine[np.argmax(length[mine])]])
        it = int(window_of(g.start[gi:gi + 1], d.starts, d.ends)[0])
        ev = Evidence(f"longest gap after {ctx.trace.names[nid]}", int(g.start[gi]),
                      int(g.end[gi]), None if it < 0 else ctx.it(it), list(d.lanes))
        out.append(Cause(f"idle after {ctx.trace.names[nid]}", int(tot[nid]), len(mine),
                         float(tot[nid]) / total, ev))
    return out

