"""Trace rules: findings measured on the breakdown of steady-state iterations.

Device-side shares come from disjoint breakdown categories (partition
``device_time``): input = ``idle_input``; copies = ``memcpy_h2d`` + ``memcpy_d2h`` +
``idle_copy``; launch = ``idle_launch`` + ``idle_host``; sync = ``idle_sync``;
communication = exposed ``communication``; unexplained idle = ``idle_other``.
``compute_bound`` cannot be "removed": its share is the time saved if compute kernels
ran :data:`COMPUTE_GAIN` x faster.  No finding is emitted without evidence.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import CopyKind, Kind, Trace
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..device_side import COPY_DIRECTIONS, DeviceBreakdown
from ..host_side import HostBreakdown, window_of
from ..intervals import measure_in, union
from ..results import Cause, Evidence, Finding
from ..run_facts import handover_parts
from .causes import causes_by_name, nested_in, self_times
from .context import (
    MAX_CAUSES,
    MAX_EVIDENCE,
    Ctx,
    amdahl,
    lanes_of,
    make_finding,
    severity,
    top_rows,
)
from .registry import rule
from .tf_data import pipeline_note
from .work import extra_calls_share, grown_work, one_off_calls, outermost

#: Assumed compute speed-up behind the compute_bound estimate.
COMPUTE_GAIN = 2.0
INPUT_CATEGORIES = ("idle_input",)
COPY_CATEGORIES = ("memcpy_h2d", "memcpy_d2h", "idle_copy")
LAUNCH_CATEGORIES = ("idle_launch", "idle_host")
SYNC_CATEGORIES = ("idle_sync",)
COMM_CATEGORIES = ("communication",)
_TF = "TensorFlow profiler"


# -- input -----------------------------------------------------------------------------------
@rule("input_pipeline_bound", "Input pipeline bound", 0.05, 0.20,
      f"{_TF} input-pipeline analysis (moderately/highly input-bound at 5/20 %)",
      partition="device_time")
def input_pipeline_bound(ctx: Ctx) -> Finding | None:
    fid = "input_pipeline_bound"
    d, share = ctx.best_device(INPUT_CATEGORIES)
    host = ctx.host_of(d.rank) if d is not None else ctx.bd.host
    if host is None:
        return None
    host_share = ctx.share(host, ["data_loading"])
    if d is None:
        share = host_share
        per_iter = host.column("data_loading")
        where = "the main thread spends it loading data (no accelerator in the trace)"
    else:
        per_iter = d.column("idle_input")
        where = (f"{d.label} sits idle while the main thread loads the next batch "
                 f"(data loading is {pct(host_share)} of host time)")
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    s = ctx.trace.slices
    dl = dl[ctx.in_steady(s.start[dl], host.starts, host.ends)] if len(dl) else dl
    evidence = []
    lanes = [host.lane] + (d.lanes if d is not None else [])
    for i in top_rows(ctx.steady_only(per_iter)):
        lo, hi = host.starts[i], host.ends[i]
        mine = dl[(s.start[dl] < hi) & (s.end[dl] > lo)]
        if not len(mine):
            continue
        a, b = max(int(s.start[mine].min()), int(lo)), min(int(s.end[mine].max()), int(hi))
        evidence.append(Evidence(
            f"iteration {i}: {fmt_ns(per_iter[i])} waiting for input in "
            f"{ctx.trace.name_of(int(mine[0]))}", a, b, ctx.it(i), lanes))
    tf_note, causes = pipeline_note(ctx, host)
    causes = causes or _loader_causes(ctx, dl)
    grade = {"high": "HIGHLY", "medium": "MODERATELY"}.get(severity(fid, share), "NOT")
    summary = (f"{grade} input-bound: {pct(share)} of steady-state iteration time is spent "
               f"waiting for input; {where}.{tf_note} Thresholds: >= 5% moderately, "
               f">= 20% highly input-bound (TensorFlow profiler). The estimate is that of the "
               f"best fix that fits this machine.")
    return make_finding(ctx, fid, share, summary, evidence, causes=causes,
                        fix_gain=lambda fix: _input_fix_gain(ctx, share, fix))


def _loader_causes(ctx: Ctx, dl: np.ndarray):
    """What inside the loader regions takes the time: nested ops / Python functions by
    exclusive time; the regions themselves when nothing is nested."""
    if not len(dl):
        return []
    total = float(ctx.trace.slices.dur[dl].sum())
    inner = nested_in(ctx, dl)
    if len(inner):
        return causes_by_name(ctx, inner, self_times(ctx, inner), total)
    return causes_by_name(ctx, dl, ctx.trace.slices.dur[dl], total)


def _input_fix_gain(ctx: Ctx, share: float, fix) -> tuple[float | None, str, float]:
    """One input fix's speed-up: work moved to other cores is bounded by the free cores
    (``cores``: one per worker; ``core``: one background thread); work removed (cached,
    done once) by Amdahl only; (speed-up, why, confidence factor of the assumption)."""
    if fix.gain == "removes":
        return amdahl(share), ("no extra core: the work is done once, not every step, if "
                               "the data can be prepared ahead"), 0.9
    if fix.gain in ("cores", "core"):
        return _parallel_speedup(ctx, share, one=fix.gain == "core")
    return None, f"{fix.name} shortens only part of the wait", 1.0


def parallel_bound(share: float, free: float, slow: float = 1.0,
                   paced: float | None = None, handover: float = 0.0) -> float:
    """Speed-up when the loading share ``share`` of a step moves to ``free`` idle cores:
    the step cannot get shorter than the rest of it plus the hand-over of each batch to
    the main thread (``handover``, a share of the step), nor than the loading spread over
    those cores; with the other cores busy, the host-paced part ``paced`` of the rest (all
    of it by default) and the moved loading run ``slow`` x slower
    (``1 / max(1 - L + (s - 1) P + H, s L / f)``, at most Amdahl's)."""
    if free < 0.05:
        return 1.0
    p = 1.0 - share if paced is None else paced
    rest = 1.0 - share + (slow - 1.0) * p + handover
    return min(1.0 / max(rest, slow * share / free, 1e-6), amdahl(share))


#: Compute on one core runs this much slower while another core is busy, when the trace
#: carries no measured factor (run fact ``cpu_interf``): separate cores still share the
#: last-level cache and memory bandwidth, SMT siblings and many VMs' vCPUs share a core.
#: A stated assumption (the order of what ``recorder.calibrate`` measures on machines
#: with shared caches), not a figure fitted to any run.
DEFAULT_INTERFERENCE = 1.15


def _parallel_speedup(ctx: Ctx, share: float, one: bool) -> tuple[float, str, float]:
    """Amdahl on the loading share, bounded by the cores that can take the loading over:
    with ``f`` free cores (cores, minus the main process, minus what other processes
    keep busy; at most 1 for one background thread) the step cannot get shorter than
    ``max(T - L, L / f)``; the rest of the step slows while the moved work runs beside it
    (:func:`_interference`), and work the workers already do hands each batch over."""
    cores = ctx.facts.get("cpu_cores")
    slow, slow_why, slow_conf = _interference(ctx)
    moved, hand, moved_why, hand_conf = _moved_share(ctx, share)
    slow_conf *= hand_conf
    if not cores.known:
        return parallel_bound(moved, float("inf"), slow, _host_paced(ctx, share), hand), (
            f"assumes a free CPU core per worker: the trace does not say how many cores the "
            f"machine has; {slow_why}{moved_why}"), 0.8 * slow_conf
    n = int(cores.value)
    other = ctx.facts.get("cpu_other")
    busy = float(other.value) if other.known else 0.0
    free = max(n - 1 - busy, 0.0)
    held = f", {busy:.1f} held by other processes ({other.proof})" if other.known else ""
    if free < 0.05:
        return 1.0, (f"no CPU core is free for it ({n} cores: {cores.proof}{held}), so no "
                     f"speed-up is expected"), 1.0
    use = min(free, 1.0) if one else free
    sp = parallel_bound(moved, use, slow, _host_paced(ctx, share), hand)
    unsure = "" if other.known else "; other processes' load unknown"
    return sp, (f"bounded by {use:.1f} free core{'s' if use != 1 else ''} ({n} cores: "
                f"{cores.proof}{held}{unsure}); {slow_why}{moved_why}"), \
        (1.0 if other.known else 0.9) * slow_conf


def _interference(ctx: Ctx) -> tuple[float, str, float]:
    """(slow-down of the work left on the main core while another core works, why, its
    confidence factor).  1.0 when workers already run beside the step: the trace has the
    slow-down in it."""
    if ctx.facts.value("dataloader") == "workers":
        return 1.0, "the workers already running beside the step are in its times", 1.0
    f = ctx.facts.get("cpu_interf")
    if f.known:  # under 1 is the calibration's noise: a busy core never speeds another up
        slow = max(float(f.value), 1.0)
        return slow, (f"the main thread's work {slow:.2f}x slower while another core works "
                      f"({f.proof})"), 1.0
    return DEFAULT_INTERFERENCE, (f"the main thread's work assumed {DEFAULT_INTERFERENCE:.2f}x "
                                  f"slower while another core works (not measured on this "
                                  f"machine)"), 0.9


def _host_paced(ctx: Ctx, share: float) -> float:
    """Share of steady time whose pace the host sets, which a busy neighbour core slows:
    all of the rest on a run without a device, the device's waits for the host otherwise
    (kernels do not slow)."""
    d, _ = ctx.best_device(INPUT_CATEGORIES)
    return 1.0 - share if d is None else ctx.share(d, LAUNCH_CATEGORIES)


def _moved_share(ctx: Ctx, share: float) -> tuple[float, float, str, float]:
    """(loading share more workers can take over, hand-over share the main thread keeps,
    why, confidence factor): with workers already, the main thread still receives each
    batch, at least as long as its shortest wait for one (the workers were ahead then);
    without workers, the hand-over measured on the machine (:func:`_handover`)."""
    dl = ctx.facts.value("dataloader")
    if dl == "single_process":
        hand, why, conf = _handover(ctx)
        return share, hand, why + _MEMORY_NOT_COUNTED, conf
    host = ctx.bd.host
    r = ctx.rows
    if dl != "workers" or host is None or not len(r):
        return share, 0.0, "", 1.0
    per = host.column("data_loading")[r].astype(np.float64)
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    hand = float(per.min()) * len(r) / wall
    if hand <= 0:
        return share, 0.0, "", 1.0
    return max(share - hand, 0.0), 0.0, (f"; {fmt_ns(per.min())} per step stays on the main "
                                         f"thread (the shortest wait for a batch: its "
                                         f"hand-over)"), 1.0


#: What a trace of the single-process loader cannot show about the step left behind.
_MEMORY_NOT_COUNTED = ("; not counted: changes in the main process's own memory behaviour once "
                       "the loading leaves it (e.g. freed memory faulted in again every step)")
#: Loader calls of a PyTorch DataLoader (one per batch) and its default collate's stack
#: (one per tensor of the batch).
_LOADER_NEXT = re.compile(r"DataLoader.*__next__|DataLoaderIter")
_COLLATE = "aten::stack"
_ITEMSIZE = {"float": 4, "c10::Half": 2, "c10::BFloat16": 2, "double": 8, "long int": 8,
             "int": 4, "unsigned char": 1, "bool": 1, "signed char": 1, "short int": 2}


def _handover(ctx: Ctx) -> tuple[float, str, float]:
    """(share of the step the main thread still spends receiving the batches a worker
    hands over, why, confidence factor): the calibration's cost of one batch (trace
    metadata ``cpu_batch_handover_*``: per batch, per tensor, per MB) for the batches per
    step and the tensors per batch the trace shows (its collate's stacks); bytes from the
    stacks' shapes when recorded.  Unmeasured: not counted, said, confidence x0.9."""
    parts = handover_parts(ctx.trace)
    if parts is None:
        return 0.0, ("; the hand-over of each batch from a worker is not in this trace (not "
                     "measured on this machine)"), 0.9
    per_batch, per_tensor, per_mb, _, where = parts
    host, r = ctx.bd.host, ctx.rows
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64)) if host else []
    if host is None or not len(r) or not len(dl):
        return 0.0, "", 1.0
    dl = dl[ctx.in_steady(ctx.trace.slices.start[dl], host.starts, host.ends)]
    calls = np.array([j for j in dl.tolist() if _LOADER_NEXT.search(ctx.trace.name_of(j))],
                     np.int64)
    calls = calls if len(calls) else dl
    batches = len(calls) / len(r)
    stacks = [j for j in nested_in(ctx, calls).tolist() if ctx.trace.name_of(j) == _COLLATE] \
        if len(calls) else []
    tensors = max(len(stacks) / max(len(calls), 1), 1.0)
    mb = _stacked_mb(ctx, stacks, len(calls))
    us = per_batch + tensors * per_tensor + (mb or 0.0) * per_mb
    wall = float((host.ends[r] - host.starts[r]).mean()) or 1.0
    hand = us * 1e3 * batches / wall
    size = (f"{mb:.2f} MB per batch from the stacks' shapes" if mb is not None else
            f"bytes not in the trace (no shapes): +{per_mb:.0f} µs per MB not counted")
    return hand, (f"; {tensors:.0f} tensor{'s' if tensors != 1 else ''} per batch (its "
                  f"collate's {_COLLATE} calls), {batches:.0f} batch{'es' if batches != 1 else ''} "
                  f"per step: {us / 1e3:.1f} ms per batch stays on the main thread to receive "
                  f"it ({pct(hand)} of the step; {size}; calibration: {per_batch:.0f} µs per "
                  f"batch + {per_tensor:.0f} µs per tensor, {where})"), 1.0


def _stacked_mb(ctx: Ctx, stacks: list[int], calls: int) -> float | None:
    """MB per batch the collate stacked, from its recorded input shapes; None without."""
    if not stacks or not calls:
        return None
    total = 0
    for j in stacks:
        a = ctx.trace.args.get(int(ctx.trace.slices.args[j])) or {}
        dims, types = a.get("Input Dims"), a.get("Input type")
        if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
            return None
        size = _ITEMSIZE.get(types[0] if isinstance(types, list) and types else "", 4)
        for d in dims[0]:  # the stacked samples
            if not isinstance(d, list) or not all(isinstance(x, int) for x in d):
                return None
            total += size * int(np.prod(d)) if d else size
    return total / 1e6 / calls


# -- copies ----------------------------------------------------------------------------------
@rule("host_device_copy_bound", "Host-device copies on the critical path", 0.05, 0.20,
      f"{_TF} (host-to-device time counts as input)", partition="device_time")
def host_device_copy_bound(ctx: Ctx) -> Finding | None:
    fid = "host_device_copy_bound"
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
    return make_finding(ctx, fid, share, summary, evidence, causes=causes)


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
      f"{_TF} kernel-launch bound thresholds", partition="device_time")
def launch_overhead_bound(ctx: Ctx) -> Finding | None:
    fid = "launch_overhead_bound"
    d, share = ctx.best_device(LAUNCH_CATEGORIES)
    if d is None or _runtime_lanes(ctx):
        return None  # XLA/PjRt runs: host_dispatch_bound measures the host issuing work
    one_off = _one_off_in_gaps(ctx, d)
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
            f"({fmt_ns(short[i])} in gaps <= 50 µs, {fmt_ns(hostb[i])} in longer gaps while "
            f"the host runs framework code); {int(d.kernel_count[i])} kernels",
            int(g.start[mine].min()), int(g.end[mine].max()), ctx.it(i), list(d.lanes)))
    host = ctx.host_of(d.rank)
    launches = calls = ""
    causes = []
    r = ctx.rows
    if host is not None:
        per_step = float(host.launches[r].mean()) if len(r) else 0.0
        launches = (f" The host made {per_step:,.0f} runtime calls per steady-state iteration "
                    f"and spent {pct(ctx.share(host, ['runtime']))} of its time in them.")
        calls, top, causes = _runtime_in_gaps(ctx, d, host)
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
               + " Thresholds: >= 3% moderately, >= 15% highly kernel-launch bound "
                 "(TensorFlow profiler).")
    return make_finding(ctx, fid, share, summary, evidence, causes=causes)


def _one_off_in_gaps(ctx: Ctx, d: DeviceBreakdown) -> float:
    """Share of steady time the device idles (host-bound gaps) while a one-off call runs."""
    calls = one_off_calls(ctx)
    if not len(calls):
        return 0.0
    s = ctx.trace.slices
    g = d.gaps
    sel = g.of("idle_host")
    sel = sel[ctx.in_steady(g.start[sel], d.starts, d.ends)]
    cs, ce = union(s.start[calls], s.end[calls])
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    return float(measure_in(cs, ce, g.start[sel], g.end[sel]).sum()) / wall


#: Runtime calls that allocate or set up rather than launch work (CUDA/HIP).
SETUP_CALL = re.compile(r"Malloc|Free|HostAlloc|HostRegister|StreamCreate|EventCreate|"
                        r"GetStreamPriorityRange|GetDeviceProperties|DeviceGetAttribute|"
                        r"ModuleLoad|FuncGetAttributes|CtxCreate|DevicePrimaryCtx", re.I)


def _runtime_in_gaps(ctx: Ctx, d: DeviceBreakdown, host: HostBreakdown):
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
    waits = _runtime_waits(ctx)  # runtime threads' waits are not work
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


# -- synchronisation / read-backs ------------------------------------------------------------
@rule("synchronization_stalls", "Synchronisation stalls", 0.03, 0.15,
      f"{_TF} 'all other time' / host-idle thresholds", partition="device_time")
def synchronization_stalls(ctx: Ctx) -> Finding | None:
    fid = "synchronization_stalls"
    d, share = ctx.best_device(SYNC_CATEGORIES)
    if d is None:
        return None
    readback = _readbacks(ctx, d)[1]
    dispatch = _runtime_dispatch_in_sync(ctx, d)
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
            f"{_call_site(ctx, sync)} returns, then {d.label} idles "
            f"{fmt_ns(g.end[j] - g.start[j])}",
            int(min(s.start[sync], g.start[j])), int(g.end[j]),
            None if it < 0 else ctx.it(it), lanes_of([int(s.lane[sync])], d.lanes)))
    syncs = g.sync_slice[sel]
    gap = (g.end[sel] - g.start[sel])[syncs >= 0]
    syncs = syncs[syncs >= 0]
    sites = dict(zip(syncs.tolist(), _call_sites(ctx, syncs)))
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
        return _empty_wait_finding(ctx, d, share, empty, waits, idle, extra)
    summary = (f"The device idles after host synchronisations {pct(share)} of steady-state "
               f"iteration time: the host blocks until the queue drains (explicit syncs, "
               f".item(), blocking copies), then has to refill it.{extra}")
    return make_finding(ctx, fid, share, summary, evidence, causes=causes)


def _empty_wait_finding(ctx: Ctx, d: DeviceBreakdown, share: float, empty: float,
                        waits: np.ndarray, idle: np.ndarray, extra: str) -> Finding:
    """Sync stalls in which the device had nothing queued: the waits are the causes, and
    what they wait for is not in the trace (half confidence, the gain an upper bound)."""
    s = ctx.trace.slices
    site = dict(zip(waits.tolist(), _call_sites(ctx, waits)))  # one lookup per lane
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
    return make_finding(ctx, "synchronization_stalls", share, summary, evidence,
                        causes=causes, assumption=0.5,
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
    bs, be = _device_busy(ctx, d.lanes)
    span = (s.end[calls] - s.start[calls]).astype(np.int64)
    idle = span - measure_in(bs, be, s.start[calls], s.end[calls])
    keep = idle >= 0.9 * span
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    return float(idle[keep].sum()) / wall, calls[keep], idle[keep].astype(np.float64)


_DEVICE_WORK = [int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.COMMUNICATION)]


def _device_work(ctx: Ctx, lanes) -> np.ndarray:
    """Slices of ``lanes`` that keep a device busy (kernels, copies, sets, collectives),
    found once per trace and lane set."""
    cache = ctx.trace.memo("device_work", dict)
    key = tuple(sorted({int(x) for x in lanes}))
    if key not in cache:
        s = ctx.trace.slices
        cache[key] = np.flatnonzero(np.isin(s.lane, key) & np.isin(s.kind, _DEVICE_WORK))
    return cache[key]


def _device_busy(ctx: Ctx, lanes) -> tuple[np.ndarray, np.ndarray]:
    """Union of the time :func:`_device_work` on ``lanes`` keeps a device busy, once per
    trace and lane set."""
    cache = ctx.trace.memo("device_busy", dict)
    key = tuple(sorted({int(x) for x in lanes}))
    if key not in cache:
        s = ctx.trace.slices
        busy = _device_work(ctx, key)
        cache[key] = union(s.start[busy], s.end[busy])
    return cache[key]


def _inside_waits(ctx: Ctx, waits: np.ndarray) -> str:
    """What the trace shows inside the empty waits, over every device and host thread:
    how soon after a wait begins the last device work ends, and how much of the wait
    time the other host threads do work (their waits and markers not counted)."""
    s = ctx.trace.slices
    if not len(waits):
        return ""
    devs = [lane for d in ctx.bd.devices for lane in d.lanes]
    ws, we = s.start[waits].astype(np.int64), s.end[waits].astype(np.int64)
    bs, be = _device_busy(ctx, devs)
    k = np.searchsorted(bs, we, side="left") - 1  # last device interval starting inside
    ok = k >= 0
    tail = np.zeros(len(waits), np.int64)
    tail[ok] = np.clip(np.minimum(be[k[ok]], we[ok]) - ws[ok], 0, None)
    own = set(s.lane[waits].tolist())
    other = np.flatnonzero(~np.isin(s.lane, devs + list(own)) & (s.dur > 0))
    other = other[~np.isin(s.name[other], _runtime_waits(ctx))]
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
    lanes = _runtime_lanes(ctx)
    if not lanes:
        return ""
    s = ctx.trace.slices
    mine = np.flatnonzero(np.isin(s.lane, lanes))
    waits = mine[np.isin(s.name[mine], _runtime_waits(ctx))]
    if not len(waits):
        return ""
    j = int(waits[np.argmax(s.dur[waits])])
    return (f"; meanwhile the XLA/PjRt runtime threads wait in {ctx.trace.name_of(j)} "
            f"(up to {fmt_ns(int(s.dur[j]))}, nothing running inside)")


def _call_site(ctx: Ctx, j: int) -> str:
    """"cudaMemcpyAsync in ## sparse_data_dist ##"."""
    return _call_sites(ctx, np.array([j]))[0]


def _call_sites(ctx: Ctx, idx: np.ndarray) -> list[str]:
    """:func:`_call_site` for many slices at once (one annotation lookup per lane)."""
    from .causes import enclosing_annotations
    idx = np.asarray(idx, np.int64)
    names = [ctx.trace.name_of(j) for j in idx.tolist()]
    return [f"{n} in {w}" if w else n
            for n, w in zip(names, enclosing_annotations(ctx, idx))]


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
    bs, be = _device_busy(ctx, d.lanes)
    span = (s.end[calls] - s.start[calls]).astype(np.int64)
    idle = span - measure_in(bs, be, s.start[calls], s.end[calls])
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    cap = float(d.column("idle_sync")[r].sum()) / wall
    return calls, min(float(idle.sum()) / wall, cap), idle


@rule("blocking_readback", "Blocking device-to-host read-back", 0.03, 0.15,
      "same grading as synchronisation stalls (a blocking read-back is a sync)",
      partition="device_time")
def blocking_readback(ctx: Ctx) -> Finding | None:
    fid = "blocking_readback"
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
    site = dict(zip(calls.tolist(), _call_sites(ctx, calls)))  # one lookup per lane
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
    return make_finding(ctx, fid, share, summary, evidence, causes=causes)


def _readback_label(ctx: Ctx, site: str, j: int, copy_of: dict) -> str:
    s = ctx.trace.slices
    cp = copy_of.get(int(s.correlation[j]), -1)
    size = f", {int(s.bytes[cp])} B {ctx.trace.name_of(cp)}" if cp >= 0 else ""
    return f"{site}{size}"


# -- JAX / XLA host dispatch -----------------------------------------------------------------
_RUNTIME_THREAD = re.compile(r"^(py_xla_execute|tf_pjrt|pjrt|Host Threads|tf_XLA|xla_)", re.I)
#: Runtime-thread spans that wait rather than work: a BufferSequencingEvent task waits for
#: its buffer's definition event (the copy it runs, when there is one, is its own child
#: span), thread-pool markers are instants.
_RUNTIME_WAIT = re.compile(r"^(BufferSequencingEvent::Execute|ThreadpoolListener::|"
                           r"Wait for |.*::Await|.*BlockHostUntilDone)")


def _runtime_waits(ctx: Ctx) -> np.ndarray:
    """Name ids of :data:`_RUNTIME_WAIT` spans, found once per trace."""
    return ctx.trace.memo("runtime_wait_ids", lambda: ctx.trace.name_ids(_RUNTIME_WAIT.match))


def _runtime_work(ctx: Ctx, lanes) -> np.ndarray:
    """Slices of the runtime threads that are work (dispatch, copies, allocation), not
    waits (:data:`_RUNTIME_WAIT`)."""
    s = ctx.trace.slices
    work = np.flatnonzero(np.isin(s.lane, lanes))
    return work[~np.isin(s.name[work], _runtime_waits(ctx))]


def _runtime_lanes(ctx: Ctx) -> list[int]:
    names = ctx.trace.lanes.name
    main = {h.lane for h in ctx.bd.hosts}
    return [k for k, n in enumerate(names) if _RUNTIME_THREAD.search(n) and k not in main]


def _dispatch_idle(ctx: Ctx, d: DeviceBreakdown) -> float:
    """Share of steady time ``d`` idles while XLA/PjRt runtime threads are busy dispatching,
    allocating or copying: host work, not a sync (capped at the sync + host idle)."""
    cache = ctx.trace.memo("dispatch_idle", dict)
    key = (d.rank, d.device, tuple(ctx.rows.tolist()))
    if key in cache:
        return cache[key]
    lanes = _runtime_lanes(ctx)
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    if not lanes or not len(r):
        cache[key] = 0.0
        return 0.0
    s = ctx.trace.slices
    work = _runtime_work(ctx, lanes)
    ws, we = union(s.start[work], s.end[work])
    bs, be = _device_busy(ctx, d.lanes)
    a, b = _clip_to_rows(ws, we, d.starts[r], d.ends[r])
    covered = int((b - a).sum()) - int(measure_in(bs, be, a, b).sum())
    cap = float(sum(d.column(c)[r].sum() for c in ("idle_sync", "idle_host"))) / wall
    cache[key] = min(covered / wall, cap)
    return cache[key]


def _clip_to_rows(ws: np.ndarray, we: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pieces of the disjoint sorted intervals ``[ws, we)`` inside each row
    ``[lo, hi)``: a binary search per row for the intervals it meets, no rows x intervals
    pass."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    k0 = np.searchsorted(we, lo, side="right")  # first interval ending after lo
    k1 = np.searchsorted(ws, hi, side="left")  # first interval starting at or after hi
    n = np.where(hi > lo, np.maximum(k1 - k0, 0), 0)
    row = np.repeat(np.arange(len(lo)), n)
    k = k0[row] + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    return np.maximum(ws[k], lo[row]), np.minimum(we[k], hi[row])


def _runtime_dispatch_in_sync(ctx: Ctx, d: DeviceBreakdown) -> float:
    """The part of sync idle that is runtime-thread dispatch (the main thread waiting while
    the XLA/PjRt runtime still works): host work, not a sync."""
    dispatch = _dispatch_idle(ctx, d)
    if not dispatch:
        return 0.0
    r = ctx.rows
    wall = int((d.ends[r] - d.starts[r]).sum()) or 1
    return min(dispatch, float(d.column("idle_sync")[r].sum()) / wall)


@rule("host_dispatch_bound", "Host dispatch bound (XLA/PjRt runtime threads)", 0.03, 0.15,
      "same grading as launch overhead: the runtime threads are the host issuing work",
      partition="device_time")
def host_dispatch_bound(ctx: Ctx) -> Finding | None:
    fid = "host_dispatch_bound"
    lanes = _runtime_lanes(ctx)
    if not lanes or not ctx.bd.devices:
        return None
    best = max(ctx.bd.devices, key=lambda d: _dispatch_share(ctx, d))
    share = _dispatch_share(ctx, best)
    s = ctx.trace.slices
    work = _runtime_work(ctx, lanes)
    work = work[ctx.in_steady(s.start[work], best.starts, best.ends)]
    own = self_times(ctx, work)
    total = float(own.sum()) or 1.0
    causes = causes_by_name(ctx, work, own, total)
    host = ctx.host_of(best.rank)
    calls = ""
    if host is not None:  # what the main thread does meanwhile (the jitted call itself)
        calls, _, main = _runtime_in_gaps(ctx, best, host)
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
    return make_finding(ctx, fid, share, summary, evidence, causes=causes)


def _dispatch_share(ctx: Ctx, d: DeviceBreakdown) -> float:
    """Host-bound idle of an XLA/PjRt run: launch gaps and host-side idle (one-off calls
    left out) plus the sync idle during which runtime threads still dispatch."""
    host_idle = ctx.share(d, LAUNCH_CATEGORIES) - _one_off_in_gaps(ctx, d)
    return max(host_idle, 0.0) + _runtime_dispatch_in_sync(ctx, d)


# -- communication / compute -----------------------------------------------------------------
@rule("communication_bound", "Communication bound", 0.10, 0.20,
      "PyTorch TensorBoard plugin (communication > 10 % of step)", partition="device_time")
def communication_bound(ctx: Ctx) -> Finding | None:
    fid = "communication_bound"
    d, share = ctx.best_device(COMM_CATEGORIES)
    if d is None:
        return None
    s = ctx.trace.slices
    comm = ctx.device_slices(d, Kind.COMMUNICATION)
    cw = window_of(s.start[comm], d.starts, d.ends)
    exposed = d.column("communication")
    evidence = []
    for i in top_rows(ctx.steady_only(exposed)):
        mine = comm[cw == i]
        if not len(mine):
            continue
        j = int(mine[np.argmax(s.dur[mine])])
        hidden = d.comm_overlap[i] / d.comm_total[i] if d.comm_total[i] else 0.0
        evidence.append(Evidence(
            f"iteration {i}: {fmt_ns(exposed[i])} exposed communication "
            f"({pct(hidden)} hidden behind compute); longest {ctx.trace.name_of(j)}",
            int(s.start[j]), int(s.end[j]), ctx.it(i), [int(s.lane[j])]))
    r = ctx.rows
    total = int(d.comm_total[r].sum())
    overlap = int(d.comm_overlap[r].sum()) / total if total else 0.0
    straggle = ""
    if ctx.bd.ranks is not None:
        straggle = (f" Slowest rank per iteration: {ctx.bd.ranks.straggler.tolist()}; "
                    "exposed collectives on the other ranks are partly waiting for it.")
    mine = comm[ctx.in_steady(s.start[comm], d.starts, d.ends)]
    causes = causes_by_name(ctx, mine, s.dur[mine], float(s.dur[mine].sum()) or 1.0,
                            label=lambda n, j: n + (f" ({int(s.bytes[j]) / 1e6:.2f} MB)"
                                                    if s.bytes[j] > 0 else ""))
    summary = (f"Collectives not overlapped with compute take {pct(share)} of steady-state "
               f"iteration time on {d.label}; {pct(overlap)} of all communication time is "
               f"hidden behind compute.{straggle}")
    return make_finding(ctx, fid, share, summary, evidence, causes=causes)


@rule("compute_bound", "Compute bound", 0.50, 0.80,
      "TB plugin (GPU utilisation < 50 % -> not device-bound), on the compute share",
      hypothesis=True)
def compute_bound(ctx: Ctx) -> Finding | None:
    fid = "compute_bound"
    d, busy = ctx.best_device(["compute"])
    if d is not None:
        causes = _top_kernels(ctx, d)
        what = f"compute kernels keep {d.label} busy"
    else:
        host = ctx.bd.host
        if host is None:
            return None
        busy = ctx.share(host, ["forward", "backward", "optimizer"])
        causes = (_runtime_pool_ops(ctx, host)
                  if ctx.facts.value("framework") in ("tensorflow", "jax") else [])
        causes = causes or _top_host_ops(ctx, host)
        what = "framework ops keep the main thread busy (no accelerator in the trace)"
    sev = {"high": "medium", "medium": "low"}.get(severity(fid, busy), "none")
    share = busy * (1.0 - 1.0 / COMPUTE_GAIN)
    evidence = [c.instance for c in causes if c.instance is not None]
    # a hypothesis, not a measured waste: half confidence on an accelerator (tensor cores
    # make 2x common), a quarter on a CPU (bf16/threads rarely give 2x)
    trust = 0.5 if d is not None else 0.25
    summary = (f"{what} {pct(busy)} of steady-state iteration time. The share and speed-up "
               f"assume the compute becomes {COMPUTE_GAIN:g}x faster (typical of FP32 -> mixed "
               f"precision on tensor cores, or of kernel fusion), not that it disappears: a "
               f"hypothesis, so its confidence is {trust:g}x that of measured findings.")
    return make_finding(ctx, fid, share, summary, evidence, sev=sev, causes=causes,
                        assumption=trust, notes=("assumes 2x faster compute",))


def _top_kernels(ctx: Ctx, d: DeviceBreakdown):
    s = ctx.trace.slices
    k = ctx.device_slices(d, Kind.KERNEL)
    k = k[ctx.in_steady(s.start[k], d.starts, d.ends)]
    busy = float(d.column("compute")[ctx.rows].sum()) or 1.0
    return causes_by_name(ctx, k, s.dur[k], busy, k=3,
                          label=lambda n, j: n)


#: TF/JAX runtime wrappers around the ops their thread pools run (not work themselves).
_POOL_WRAPPER = re.compile(r"^(ExecutorState::|ExecutorDoneCallback|ParallelFor|ThunkExecutor::|"
                           r"ThreadpoolListener::|FunctionRun|InstantiatedCapturedFunction|"
                           r"Eager|KernelAndDeviceFunc|TFE_|\$|__inference_|__forward_|"
                           r"CpuExecutable::|GpuExecutable::|BlockUntilReady|PjitFunction|"
                           r"np\.asarray|DevicePut|ParseArguments|Iterator)")


def _runtime_pool_ops(ctx: Ctx, host: HostBreakdown):
    """TF/JAX: the ops the step's thread pools run (tf_Compute, Eigen, XLA threads), the
    outermost non-wrapper event per place, by total time; tf.data threads left out."""
    s = ctx.trace.slices
    lanes = [host.lane] + [h for h in host.helper_lanes
                           if not ctx.trace.lanes.name[h].startswith("tf_data")]
    wrappers = ctx.trace.name_ids(_POOL_WRAPPER.match)
    keep = []
    for lane in lanes:
        idx = ctx.trace.lane_slices(lane)
        idx = idx[(s.dur[idx] > 0) & np.isin(s.kind[idx], [int(Kind.CPU_OP)])
                  & ~np.isin(s.name[idx], wrappers)]
        if lane == host.lane:  # its outermost events are the Python-side step call
            idx = idx[s.depth[idx] > 0]
        idx = idx[ctx.in_steady(s.start[idx], host.starts, host.ends)]
        if len(idx):
            keep.append(outermost(s.start, s.end, idx, disjoint=True))
    if not keep:
        return []
    ops = np.concatenate(keep)
    return causes_by_name(ctx, ops, s.dur[ops], float(s.dur[ops].sum()) or 1.0, k=3)


def _top_host_ops(ctx: Ctx, host: HostBreakdown):
    """Leaf framework ops (no op nested inside) of the main thread with the most time."""
    s = ctx.trace.slices
    idx = ctx.trace.lane_slices(host.lane)
    idx = idx[s.kind[idx] == int(Kind.CPU_OP)]
    idx = idx[ctx.in_steady(s.start[idx], host.starts, host.ends)]
    if not len(idx):
        return []
    has_child = np.zeros(len(idx), bool)
    has_child[:-1] = (s.start[idx[1:]] < s.end[idx[:-1]]) & (s.depth[idx[1:]] > s.depth[idx[:-1]])
    leaf = idx[~has_child]
    busy = float(s.dur[leaf].sum()) or 1.0
    return causes_by_name(ctx, leaf, s.dur[leaf], busy, k=3)


# -- variation -------------------------------------------------------------------------------
#: Fewer steady iterations than this cannot tell jitter from noise.
JITTER_MIN_STEPS = 5
#: Slow = this much over the median; jitter needs at least this many / this share of them.
JITTER_SLOW, JITTER_MIN_SLOW, JITTER_MIN_SLOW_SHARE = 1.1, 3, 0.2
#: Isolated outliers count only up to the median + this many robust deviations (MAD).
JITTER_OUTLIER_MADS = 3.0
#: Below this fraction of the slow iterations' extra host time in extra calls, the slow
#: steps are the same work run slower: likely the machine, not the program.
JITTER_OWN_WORK = 1 / 3
SAME_CALLS = "the slow steps make the same calls as the others, slower: cause likely " \
             "outside the program"


@rule("iteration_jitter", "Unstable iteration times", 0.05, 0.20,
      "same grading as input-bound, on the time lost to slower-than-median iterations; "
      f">= {JITTER_MIN_STEPS} steady iterations, >= {JITTER_MIN_SLOW} slow ones or isolated "
      f"outliers clipped at {JITTER_OUTLIER_MADS:g} MADs")
def iteration_jitter(ctx: Ctx) -> Finding | None:
    fid = "iteration_jitter"
    bd = ctx.bd
    r = ctx.rows
    if bd.whole_trace or len(r) < JITTER_MIN_STEPS:
        return None
    dur_all = bd.durations.astype(np.float64)
    on_device = ctx.iters.device_step_times()  # a lagging device sets the pace: its clock,
    if on_device is not None and len(on_device) == len(dur_all):  # not host/device skew
        dur_all = on_device.astype(np.float64)
    dur = dur_all[r]
    med = float(np.median(dur))
    if med <= 0:  # zero-length iterations: nothing to measure variation against
        return None
    slow = dur > JITTER_SLOW * med
    isolated = int(slow.sum()) < max(JITTER_MIN_SLOW, JITTER_MIN_SLOW_SHARE * len(dur))
    counted = np.minimum(dur, _outlier_clip(dur, slow, med)) if isolated else dur
    excess = np.maximum(counted - med, 0.0)
    share = float(excess.sum() / counted.sum()) if counted.sum() else 0.0
    speedup = float(counted.sum() / np.minimum(counted, med).sum()) if med > 0 else 1.0
    evidence = _jitter_evidence(ctx, r, dur, dur_all, med)
    causes = grown_work(ctx, r[slow], r[~slow], "slow") if slow.any() else []
    cv = float(np.std(dur) / np.mean(dur)) if np.mean(dur) else 0.0
    summary = (f"Steady-state iteration times vary (coefficient of variation {pct(cv)}, median "
               f"{fmt_ns(med)}); iterations slower than the median lose {pct(share)} of the "
               f"time. The speed-up is what running every iteration at the median would give.")
    notes: tuple[str, ...] = ()
    assumption = 1.0
    if isolated:
        lost = float(np.maximum(dur - med, 0).sum() / dur.sum())
        summary += (f" Only {int(slow.sum())} of {len(dur)} iterations are slow (up to "
                    f"{dur.max() / med:.1f}x the median, {pct(lost)} of the time): isolated "
                    f"outliers (the OS, garbage collection, the profiler) that too few steps "
                    f"show to say they recur, so each counts only up to "
                    f"{JITTER_OUTLIER_MADS:g} median absolute deviations over the median.")
        notes, assumption = (f"{int(slow.sum())} isolated slow iteration(s)",), 0.3
    elif excess.max() > 0.5 * excess.sum():
        notes, assumption = ("one iteration makes most of it",), 0.6
    own = extra_calls_share(ctx, r[slow], r[~slow]) if slow.any() and (~slow).any() else 1.0
    if own < JITTER_OWN_WORK:
        summary += (f" The slow iterations make the same calls as the others, each slower "
                    f"(only {pct(own)} of their extra host time is calls the others lack): "
                    f"that points outside the program (other processes, CPU clock, the "
                    f"profiler), which the trace cannot show.")
        notes, assumption = notes + (SAME_CALLS,), assumption * 0.5
    return make_finding(ctx, fid, share, summary, evidence, speedup=speedup, causes=causes,
                        assumption=assumption, notes=notes,
                        tentative=SAME_CALLS if own < JITTER_OWN_WORK else "")


def _outlier_clip(dur: np.ndarray, slow: np.ndarray, med: float) -> float:
    """Median + a few robust deviations (MAD of the iterations that are not slow)."""
    rest = dur[~slow] if (~slow).any() else dur
    mad = 1.4826 * float(np.median(np.abs(rest - np.median(rest))))
    return med + JITTER_OUTLIER_MADS * mad


def _jitter_evidence(ctx: Ctx, r, dur, dur_all, med) -> list[Evidence]:
    """The slowest iterations, each with the breakdown category that grew most."""
    bd = ctx.bd
    excess = np.maximum(dur - med, 0.0)
    side_times, cats = bd.times(), bd.categories()
    m = int(r[np.argmin(np.abs(dur - med))])
    lanes = bd.device.lanes if bd.device is not None else ([bd.host.lane] if bd.host else [])
    ex_all = np.zeros(len(dur_all))
    ex_all[r] = np.where(dur > JITTER_SLOW * med, excess, 0.0)
    evidence = []
    for i in top_rows(ex_all):
        label = f"iteration {i}: {fmt_ns(dur_all[i])} (+{pct(ex_all[i] / med)} vs median)"
        if side_times.shape[1]:
            delta = side_times[i] - side_times[m]
            c = int(np.argmax(delta))
            if delta[c] > 0:
                label += f"; most of it in {cats[c]} (+{fmt_ns(delta[c])})"
        if bd.ranks is not None:
            label += (f"; slowest rank {int(bd.ranks.straggler[i])} "
                      f"(+{fmt_ns(bd.ranks.lag[i])} busy vs median rank)")
        evidence.append(Evidence(label, int(bd.starts[i]), int(bd.ends[i]), i, list(lanes)))
    return evidence


# -- unexplained idle ------------------------------------------------------------------------
@rule("gpu_idle_unexplained", "Device idle, cause not in the trace", 0.10, 0.30,
      "idle not attributed to input, copies, syncs or host work; 10 % / 30 % so that "
      "ordinary gaps stay quiet", partition="device_time")
def gpu_idle_unexplained(ctx: Ctx) -> Finding | None:
    fid = "gpu_idle_unexplained"
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
    return make_finding(ctx, fid, share, summary, evidence, assumption=0.7,
                        notes=("cause unknown",), causes=_idle_after(ctx, d, sel))


def _idle_after(ctx: Ctx, d: DeviceBreakdown, gaps: np.ndarray):
    """Unexplained gaps grouped by the device op that ends just before each: the place in
    the program where the device runs dry."""
    s = ctx.trace.slices
    g = d.gaps
    dev = _device_work(ctx, d.lanes)
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
