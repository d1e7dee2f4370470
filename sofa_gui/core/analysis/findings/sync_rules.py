"""Synchronisation rules: the device idles after the host blocks on it (syncs, waits with
nothing queued, blocking device-to-host read-backs)."""

from __future__ import annotations

import numpy as np

from ...trace import CopyKind, Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..device_side import DeviceBreakdown
from ..host_side import window_of
from ..intervals import measure_in, union
from ..results import Evidence, Finding
from .causes import causes_by_name
from .context import (
    MAX_EVIDENCE,
    Ctx,
    lanes_of,
    make_finding,
)
from .devices import (
    SYNC_CATEGORIES,
    TF_PROFILER,
    call_site,
    call_sites,
    device_busy,
    runtime_dispatch_in_sync,
    runtime_lanes,
    runtime_waits,
)
from .registry import Rule, rule
from .work import outermost


# -- synchronisation / read-backs ------------------------------------------------------------
@rule("synchronization_stalls", "Synchronisation stalls", 0.03, 0.15,
      f"{TF_PROFILER} 'all other time' / host-idle thresholds", partition="device_time",
      factors={"wait_cause_unknown": 0.5})
def synchronization_stalls(ctx: Ctx, spec: Rule) -> Finding | None:
    d, share = ctx.best_device(SYNC_CATEGORIES)
    if d is None:
        return None
    readback = _readbacks(ctx, d)[1]
    dispatch = runtime_dispatch_in_sync(ctx, d)
    share = max(share - readback - dispatch, 0.0)
    g = d.gaps
    sel = g.of("idle_sync")
    sel = sel[ctx.in_steady(g.start[sel], d.starts, d.ends)]
    sel = sel[np.argsort(-(g.end[sel] - g.start[sel]), kind="stable")]
    s = ctx.trace.slices
    evidence = []
    for j in sel[:MAX_EVIDENCE].tolist():
        sync = int(g.sync_slice[j])
        if sync < 0:
            continue
        it = int(window_of(g.start[j:j + 1], d.starts, d.ends)[0])
        evidence.append(Evidence(
            f"{call_site(ctx, sync)} returns, then {d.label} idles "
            f"{fmt_ns(g.end[j] - g.start[j])}",
            int(min(s.start[sync], g.start[j])), int(g.end[j]),
            None if it < 0 else ctx.it(it), lanes_of([int(s.lane[sync])], d.lanes)))
    syncs = g.sync_slice[sel]
    gap = (g.end[sel] - g.start[sel])[syncs >= 0]
    syncs = syncs[syncs >= 0]
    sites = dict(zip(syncs.tolist(), call_sites(ctx, syncs)))
    causes = causes_by_name(ctx, syncs, gap, float(gap.sum()) or 1.0,
                            label=lambda n, j: sites[j], by_label=True)
    notes = []
    if readback:
        notes.append(f"the blocking read-backs ({pct(readback)}) are a finding of their own")
    if dispatch:
        notes.append(f"{pct(dispatch)} while runtime threads still dispatch is host work")
    extra = f" Not counted here: {'; '.join(notes)}." if notes else ""
    empty, waits, idle = _empty_waits(ctx, d)
    if share and empty > 0.5 * share:
        return _empty_wait_finding(ctx, spec, d, share, empty, waits, idle, extra)
    summary = (f"The device idles after host synchronisations {pct(share)} of steady-state "
               f"iteration time: the host blocks until the queue drains (explicit syncs, "
               f".item(), blocking copies), then has to refill it.{extra}")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes)


def _empty_wait_finding(ctx: Ctx, spec: Rule, d: DeviceBreakdown, share: float, empty: float,
                        waits: np.ndarray, idle: np.ndarray, extra: str) -> Finding:
    """Sync stalls in which the device had nothing queued: the waits are the causes, and
    what they wait for is not in the trace (half confidence, the gain an upper bound)."""
    s = ctx.trace.slices
    site = dict(zip(waits.tolist(), call_sites(ctx, waits)))  # one lookup per lane
    causes = causes_by_name(ctx, waits, idle, float(idle.sum()) or 1.0,
                            label=lambda n, j: f"{site[int(j)]} with the device idle")
    evidence = [Evidence(f"{site[j]} waits {fmt_ns(int(s.dur[j]))}; {d.label} idle "
                         f"{fmt_ns(int(x))} of it", int(s.start[j]), int(s.end[j]),
                         ctx.it(int(window_of(s.start[j:j + 1], d.starts, d.ends)[0])),
                         lanes_of([int(s.lane[j])], d.lanes))
                for j, x in sorted(zip(waits.tolist(), idle.tolist()),
                                   key=lambda t: -t[1])[:MAX_EVIDENCE]]
    summary = (f"The host waits in synchronisations while {d.label} has nothing left to do, "
               f"{pct(share)} of steady-state iteration time: in {pct(min(empty / share, 1.0))} "
               f"of it the device stays idle through the whole wait (it is busy "
               f"{pct(ctx.share(d, ['compute']))} overall). The wait is for something the "
               f"trace does not show (completion noticed late by the runtime"
               f"{_waiting_threads(ctx)}, or untraced work), so removing it is not a known "
               f"fix: the estimate is an upper bound.{_inside_waits(ctx, waits)}{extra}")
    return make_finding(ctx, spec, share, summary, evidence,
                        causes=causes, assumption=spec.factor("wait_cause_unknown"),
                        notes=("cause of the wait not in the trace",))


def _empty_waits(ctx: Ctx, d: DeviceBreakdown) -> tuple[float, np.ndarray, np.ndarray]:
    """Sync calls in steady state during which ``d`` stays idle (>= 90% of the call):
    waits with no queued device work to wait for.  (share of steady time, calls, idle ns
    per call)."""
    host = ctx.host_of(d.rank)
    calls = host.role_slices.get("sync", np.zeros(0, np.int64)) if host else np.zeros(0, int)
    s = ctx.trace.slices
    calls = calls[ctx.in_steady(s.start[calls], d.starts, d.ends)] if len(calls) else calls
    if not len(calls):
        return 0.0, calls, np.zeros(0)
    calls = outermost(s.start, s.end, calls)  # try_to_block inside block_until_ready once
    bs, be = device_busy(ctx, d.lanes)
    span = (s.end[calls] - s.start[calls]).astype(np.int64)
    idle = span - measure_in(bs, be, s.start[calls], s.end[calls])
    keep = idle >= 0.9 * span
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    return float(idle[keep].sum()) / wall, calls[keep], idle[keep].astype(np.float64)


def _inside_waits(ctx: Ctx, waits: np.ndarray) -> str:
    """What the trace shows inside the empty waits, over every device and host thread:
    how soon after a wait begins the last device work ends, and how much of the wait
    time the other host threads do work (their waits and markers not counted)."""
    s = ctx.trace.slices
    if not len(waits):
        return ""
    devs = [lane for d in ctx.bd.devices for lane in d.lanes]
    ws, we = s.start[waits].astype(np.int64), s.end[waits].astype(np.int64)
    bs, be = device_busy(ctx, devs)
    k = np.searchsorted(bs, we, side="left") - 1  # last device interval starting inside
    ok = k >= 0
    tail = np.zeros(len(waits), np.int64)
    tail[ok] = np.clip(np.minimum(be[k[ok]], we[ok]) - ws[ok], 0, None)
    own = set(s.lane[waits].tolist())
    other = np.flatnonzero(~np.isin(s.lane, devs + list(own)) & (s.dur > 0))
    other = other[~np.isin(s.name[other], runtime_waits(ctx))]
    hs, he = union(s.start[other], s.end[other])
    host = float(measure_in(hs, he, ws, we).sum()) / max(float((we - ws).sum()), 1.0)
    n = len(ctx.bd.devices)
    return (f" Inside these waits the trace shows no work: the last device work (all {n} "
            f"devices) ends at most {fmt_ns(int(tail.max()))} after a wait begins, and the "
            f"other host threads work {pct(host)} of the wait time (their waits not "
            f"counted)." if tail.max() <= 0.1 * (we - ws).max() and host < 0.05 else
            f" Inside these waits the last device work ends up to {fmt_ns(int(tail.max()))} "
            f"after a wait begins; other host threads work {pct(host)} of the wait time.")


def _waiting_threads(ctx: Ctx) -> str:
    """", while the XLA/PjRt runtime threads wait in BufferSequencingEvent::Execute" when
    the runtime threads have such waits."""
    lanes = runtime_lanes(ctx)
    if not lanes:
        return ""
    s = ctx.trace.slices
    mine = np.flatnonzero(np.isin(s.lane, lanes))
    waits = mine[np.isin(s.name[mine], runtime_waits(ctx))]
    if not len(waits):
        return ""
    j = int(waits[np.argmax(s.dur[waits])])
    return (f"; meanwhile the XLA/PjRt runtime threads wait in {ctx.trace.name_of(j)} "
            f"(up to {fmt_ns(int(s.dur[j]))}, nothing running inside)")


#: A read-back whose host call lasts this long blocks the host (not just a copy).
BLOCKING_CALL_NS = 1_000_000


def _readbacks(ctx: Ctx, d: DeviceBreakdown):
    """Blocking device-to-host copies in steady state: (host calls, share of steady time the
    device idles while the host is inside them, idle ns per call)."""
    s = ctx.trace.slices
    copies = ctx.device_slices(d, Kind.MEMCPY)
    copies = copies[s.copy_kind[copies] == int(CopyKind.D2H)]
    empty = (np.zeros(0, np.int64), 0.0, np.zeros(0))
    if not len(copies):
        return empty
    calls = np.flatnonzero((s.kind == int(Kind.RUNTIME)) & np.isin(s.correlation,
                                                                   s.correlation[copies]))
    calls = calls[(s.dur[calls] >= BLOCKING_CALL_NS)
                  & ctx.in_steady(s.start[calls], d.starts, d.ends)]
    if not len(calls):
        return empty
    bs, be = device_busy(ctx, d.lanes)
    span = (s.end[calls] - s.start[calls]).astype(np.int64)
    idle = span - measure_in(bs, be, s.start[calls], s.end[calls])
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    cap = float(d.column("idle_sync")[r].sum()) / wall
    return calls, min(float(idle.sum()) / wall, cap), idle


@rule("blocking_readback", "Blocking device-to-host read-back", 0.03, 0.15,
      "same grading as synchronisation stalls (a blocking read-back is a sync)",
      partition="device_time")
def blocking_readback(ctx: Ctx, spec: Rule) -> Finding | None:
    best = None
    for d in ctx.bd.devices:
        calls, share, idle = _readbacks(ctx, d)
        if best is None or share > best[2]:
            best = (d, calls, share, idle)
    if best is None or not len(best[1]):
        return None
    d, calls, share, idle = best
    s = ctx.trace.slices
    copy_of = {int(c): int(j) for j, c in zip(
        np.flatnonzero(s.kind == int(Kind.MEMCPY)).tolist(),
        s.correlation[s.kind == int(Kind.MEMCPY)].tolist())}
    site = dict(zip(calls.tolist(), call_sites(ctx, calls)))  # one lookup per lane
    evidence = []
    for k in np.argsort(-idle, kind="stable")[:MAX_EVIDENCE].tolist():
        j = int(calls[k])
        cp = copy_of.get(int(s.correlation[j]), -1)
        what = (f"{ctx.trace.name_of(cp)} of {int(s.bytes[cp])} bytes" if cp >= 0 else "copy")
        it = int(window_of(s.start[j:j + 1], d.starts, d.ends)[0])
        evidence.append(Evidence(
            f"{site[j]} blocks the host {fmt_ns(int(s.dur[j]))} for a {what}; "
            f"{d.label} idles {fmt_ns(int(idle[k]))} meanwhile", int(s.start[j]),
            int(s.end[j]), None if it < 0 else ctx.it(it),
            lanes_of([int(s.lane[j])], [int(s.lane[cp])] if cp >= 0 else [], d.lanes)))
    causes = causes_by_name(ctx, calls, idle, float(idle.sum()) or 1.0,
                            label=lambda n, j: _readback_label(ctx, site[int(j)], j, copy_of),
                            by_label=True)
    per = len(calls) / max(ctx.ph.n_steady, 1)
    summary = (f"{per:.1f} device-to-host read-backs per steady-state iteration block the host "
               f"until the device queue drains ({fmt_ns(float(np.median(s.dur[calls])))} "
               f"median call for a few bytes); {d.label} idles {pct(share)} of the iteration "
               f"while the host waits, then has to be refilled.")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes)


def _readback_label(ctx: Ctx, site: str, j: int, copy_of: dict) -> str:
    s = ctx.trace.slices
    cp = copy_of.get(int(s.correlation[j]), -1)
    size = f", {int(s.bytes[cp])} B {ctx.trace.name_of(cp)}" if cp >= 0 else ""
    return f"{site}{size}"



