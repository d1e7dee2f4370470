"""Copy and launch rules: host<->device copies on the critical path, and the device waiting
for the host to issue work (launch latency, per-op framework overhead)."""

from __future__ import annotations

import re

import numpy as np

from ...trace import CopyKind, Kind, Trace
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..device_side import COPY_DIRECTIONS, LAUNCH_GAP_NS, DeviceBreakdown
from ..host_side import HostBreakdown, window_of
from ..intervals import measure_in, union
from ..results import Evidence, Finding
from .causes import causes_by_name
from .context import (
    MAX_EVIDENCE,
    Ctx,
    lanes_of,
    make_finding,
    top_rows,
)
from .devices import (
    COPY_CATEGORIES,
    LAUNCH_CATEGORIES,
    TF_PROFILER,
    one_off_in_gaps,
    runtime_lanes,
    runtime_waits,
)
from .registry import Rule, rule
from .work import outermost


# -- copies ----------------------------------------------------------------------------------
@rule("host_device_copy_bound", "Host-device copies on the critical path", 0.05, 0.20,
      f"{TF_PROFILER} (host-to-device time counts as input)", partition="device_time")
def host_device_copy_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    d, share = ctx.best_device(COPY_CATEGORIES)
    if d is None:
        return None
    s = ctx.trace.slices
    idx = ctx.device_slices(d, Kind.MEMCPY)
    idx = idx[np.isin(s.copy_kind[idx], [int(CopyKind.H2D), int(CopyKind.D2H)])]
    idx = idx[ctx.in_steady(s.start[idx], d.starts, d.ends)]
    host = ctx.host_of(d.rank)
    calls = host.role_slices.get("memcpy", np.zeros(0, np.int64)) if host else np.zeros(0, int)
    calls = calls[ctx.in_steady(s.start[calls], d.starts, d.ends)] if len(calls) else calls
    cand = np.concatenate([idx, calls]).astype(np.int64)
    evidence = []
    for j in cand[np.argsort(-s.dur[cand], kind="stable")][:MAX_EVIDENCE].tolist():
        it = int(window_of(s.start[j:j + 1], d.starts, d.ends)[0])
        evidence.append(Evidence(_copy_label(ctx.trace, j), int(s.start[j]), int(s.end[j]),
                                 None if it < 0 else ctx.it(it), [int(s.lane[j])]))
    c = d.copies
    r = ctx.rows
    pageable = int(c.pageable_bytes[r, :2].sum())
    total = int(c.bytes[r, :2].sum())
    extra = (f"; {pct(pageable / total)} of the bytes come from pageable (unpinned) memory"
             if total and pageable else "")
    staged = ctx.share(d, ["idle_copy"])
    bw = ", ".join(f"{k.upper()} {c.bandwidth_gbps(k):.1f} GB/s" for k in ("h2d", "d2h")
                   if c.count[:, COPY_DIRECTIONS.index(k)].sum())
    summary = (f"Host<->device copies stall the device {pct(share)} of iteration time on "
               f"{d.label}: copies no kernel hides, plus {pct(staged)} idle while the host "
               f"is inside copy calls (staging pageable memory)."
               + (f" Achieved {bw}{extra}." if bw else ""))
    causes = causes_by_name(ctx, idx, s.dur[idx], float(s.dur[idx].sum()) or 1.0,
                            label=lambda n, j: _copy_label(ctx.trace, j))
    return make_finding(ctx, spec, share, summary, evidence, causes=causes)


def _copy_label(trace: Trace, j: int) -> str:
    s = trace.slices
    dur = int(s.dur[j])
    if s.kind[j] != int(Kind.MEMCPY):
        return f"{trace.name_of(j)} holds the host {fmt_ns(dur)}"
    nbytes = int(s.bytes[j])
    bw = f", {nbytes / dur:.2f} GB/s" if nbytes > 0 and dur > 0 else ""
    size = f" {nbytes / 1e6:.2f} MB" if nbytes > 0 else ""
    return f"{trace.name_of(j)}{size} in {fmt_ns(dur)}{bw}"


# -- launch / host-bound -----------------------------------------------------------------------
@rule("launch_overhead_bound", "Launch and framework overhead (host-bound)", 0.03, 0.15,
      f"{TF_PROFILER} kernel-launch bound thresholds", partition="device_time")
def launch_overhead_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    d, share = ctx.best_device(LAUNCH_CATEGORIES)
    if d is None or runtime_lanes(ctx):
        return None  # XLA/PjRt runs: host_dispatch_bound measures the host issuing work
    one_off = one_off_in_gaps(ctx, d)
    share = max(share - one_off, 0.0)
    g = d.gaps
    sel = np.concatenate([g.of("idle_launch"), g.of("idle_host")])
    gw = window_of(g.start[sel], d.starts, d.ends)
    short, hostb = d.column("idle_launch"), d.column("idle_host")
    evidence = []
    for i in top_rows(ctx.steady_only(short + hostb)):
        mine = sel[gw == i]
        if not len(mine):
            continue
        evidence.append(Evidence(
            f"iteration {i}: device waits {fmt_ns(short[i] + hostb[i])} for the host "
            f"({fmt_ns(short[i])} in gaps <= {fmt_ns(LAUNCH_GAP_NS)}, {fmt_ns(hostb[i])} in "
            f"longer gaps while the host runs framework code); {int(d.kernel_count[i])} "
            f"kernels",
            int(g.start[mine].min()), int(g.end[mine].max()), ctx.it(i), list(d.lanes)))
    host = ctx.host_of(d.rank)
    launches = calls = ""
    causes = []
    r = ctx.rows
    if host is not None:
        per_step = float(host.launches[r].mean()) if len(r) else 0.0
        launches = (f" The host made {per_step:,.0f} runtime calls per steady-state iteration "
                    f"and spent {pct(ctx.share(host, ['runtime']))} of its time in them.")
        calls, top, causes = runtime_in_gaps(ctx, d, host)
        evidence = top + evidence
    kernels = float(d.kernel_count[r].mean()) if len(r) else 0.0
    summary = (f"The device waits for the host to issue work {pct(share)} of steady-state "
               f"iteration time: {pct(ctx.share(d, ['idle_launch']))} in short gaps between "
               f"kernels (launch latency; {kernels:,.0f} kernels per iteration, median kernel "
               f"{fmt_ns(d.kernel_median_ns)}) and {pct(ctx.share(d, ['idle_host']))} while "
               f"per-op framework/Python overhead on the host is slower than the kernels it "
               f"launches.{launches}{calls}"
               + (f" Not counted: {pct(one_off)} of idle while one-off calls run (start-up "
                  f"work, see startup_cost)." if one_off else "")
               + " " + spec.grading("kernel-launch bound", TF_PROFILER))
    return make_finding(ctx, spec, share, summary, evidence, causes=causes)


#: Runtime calls that allocate or set up rather than launch work (CUDA/HIP).
SETUP_CALL = re.compile(r"Malloc|Free|HostAlloc|HostRegister|StreamCreate|EventCreate|"
                        r"GetStreamPriorityRange|GetDeviceProperties|DeviceGetAttribute|"
                        r"ModuleLoad|FuncGetAttributes|CtxCreate|DevicePrimaryCtx", re.I)


def runtime_in_gaps(ctx: Ctx, d: DeviceBreakdown, host: HostBreakdown):
    """What the main thread does while the device idles in long steady-state gaps: its
    outermost ops by time in the gaps (the causes), the runtime calls when they cover a
    quarter of it, and the slice that holds the host longest in a gap."""
    g = d.gaps
    sel = g.of("idle_host")
    sel = sel[ctx.in_steady(g.start[sel], d.starts, d.ends)]
    gs, ge = union(g.start[sel], g.end[sel])
    gap_ns = int((ge - gs).sum())
    s = ctx.trace.slices
    outer = every = np.zeros(0, np.int64)
    lanes = [host.lane] + list(host.helper_lanes)  # the autograd thread runs backward
    waits = runtime_waits(ctx)  # runtime threads' waits are not work
    for lane in lanes:
        mine = ctx.trace.lane_slices(lane)
        mine = mine[~np.isin(s.name[mine], waits)]
        ops = mine[np.isin(s.kind[mine], [int(Kind.CPU_OP), int(Kind.RUNTIME)])]
        mine = ops if len(ops) or lane != host.lane else mine[s.kind[mine] == int(Kind.PYTHON)]
        if not len(mine):
            continue
        mine = mine[np.argsort(s.start[mine], kind="stable")]
        every = np.concatenate([every, mine])
        outer = np.concatenate([outer, outermost(s.start, s.end, mine)])
    if not gap_ns or not len(outer):
        return "", [], []
    mine = every  # runtime calls below: on any of these threads
    used = [_thread(ctx.trace.lanes.name[x]) for x in lanes if np.any(s.lane[outer] == x)]
    who = ("the host" if len(used) < 2 else f"the host ({', '.join(used)})" if len(used) <= 3
           else f"the host ({used[0]} and {len(used) - 1} other threads)")
    text, j = _top_in_gaps(ctx, outer, gs, ge, gap_ns, f"{who} runs")
    inside = measure_in(gs, ge, s.start[outer], s.end[outer])
    causes = causes_by_name(ctx, outer[inside > 0], inside[inside > 0], gap_ns)
    calls = mine[s.kind[mine] == int(Kind.RUNTIME)]
    if len(calls):
        inside = measure_in(gs, ge, s.start[calls], s.end[calls])
        if 4 * int(inside.sum()) >= gap_ns:
            more, j = _top_in_gaps(ctx, calls, gs, ge, gap_ns, "it is inside runtime calls")
            text += more + _setup_note(ctx, j)
    it = int(window_of(s.start[j:j + 1], d.starts, d.ends)[0])
    ev = Evidence(f"{ctx.trace.name_of(j)} holds the host {fmt_ns(int(s.dur[j]))} while "
                  f"{d.label} idles", int(s.start[j]), int(s.end[j]),
                  None if it < 0 else ctx.it(it), lanes_of([host.lane], d.lanes))
    return text, [ev], causes


def _thread(name: str) -> str:
    """"pt_autograd_0" from "thread 2919752 (pt_autograd_0)"."""
    m = re.search(r"\(([^()]+)\)\s*$", name)
    return m.group(1) if m else name


def _top_in_gaps(ctx: Ctx, idx: np.ndarray, gs, ge, gap_ns: int, what: str) -> tuple[str, int]:
    s = ctx.trace.slices
    cs, ce = union(s.start[idx], s.end[idx])  # threads overlap: time covered, once
    covered = float(measure_in(gs, ge, cs, ce).sum())
    inside = measure_in(gs, ge, s.start[idx], s.end[idx])
    by_name = np.bincount(s.name[idx], weights=inside.astype(np.float64))
    top = [int(n) for n in np.argsort(-by_name)[:3] if by_name[n] > 0]
    listed = ", ".join(f"{ctx.trace.names[n]} {fmt_ns(by_name[n])}" for n in top)
    text = (f" In the long gaps {what} {pct(covered / gap_ns)} of the time"
            + (f": {listed}." if listed else "."))
    return text, int(idx[np.argmax(inside)])


def _setup_note(ctx: Ctx, j: int) -> str:
    name = ctx.trace.name_of(j)
    if not SETUP_CALL.search(name):
        return ""
    return (f" {name} allocates or initialises rather than launching work: keep "
            "allocations out of the loop (no torch.cuda.empty_cache(), stable shapes so the "
            "caching allocator reuses blocks).")



