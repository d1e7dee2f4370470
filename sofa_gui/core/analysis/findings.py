"""The advisor: name the bottlenecks of a run from its breakdown, with proof and remedies.

One rule function per finding id.  A rule returns a :class:`Finding` whose
``share`` is the fraction of the analysed iteration time its fixes could remove,
and whose ``estimated_speedup`` follows Amdahl's law on that share,
``1 / (1 - share)``.  Shares are measured on the device side where there is a
device (the host side otherwise), on the device where the share is largest.

Thresholds (fraction of iteration time; a finding below ``moderate`` is not
emitted, at or above ``high`` it is "high" severity):

================================  ========  =====  ============================================
id                                moderate  high   grounded on
================================  ========  =====  ============================================
input_pipeline_bound              5 %       20 %   TensorFlow profiler input-pipeline analysis
                                                   ("MODERATELY"/"HIGHLY input-bound", infeed
                                                   thresholds 5/20 %)
host_device_copy_bound            5 %       20 %   same: TF counts host-to-device time as input
launch_overhead_bound             3 %       15 %   TF profiler kernel-launch bound thresholds
synchronization_stalls            3 %       15 %   TF profiler "all other time" / host-idle
                                                   thresholds (3 %, 15 %)
communication_bound               10 %      20 %   PyTorch TensorBoard plugin (communication >
                                                   10 % of step -> compression/accumulation)
compute_bound                     50 %      80 %   TB plugin (GPU utilisation < 50 % -> not
                                                   device-bound); applied to compute share
iteration_jitter                  5 %       20 %   same grading as input-bound, on the time lost
                                                   to iterations slower than the median
cpu_contention                    5 %       20 %   same grading; from counters only (other
                                                   processes hold a saturated CPU)
cpu_bound                         5 %       20 %   same grading; from counters only (one thread
                                                   pegged, the other cores idle)
================================  ========  =====  ============================================

Device-side shares come from disjoint breakdown categories: input = ``idle_input``;
copies = ``memcpy_h2d`` + ``memcpy_d2h`` + ``idle_copy``; launch = ``idle_launch`` +
``idle_host``; sync = ``idle_sync``; communication = exposed ``communication``.
``compute_bound`` cannot be "removed": its share is the time saved if compute
kernels ran 2x faster (the usual FP32 -> mixed-precision / tensor-core gain),
i.e. half the compute share.  ``iteration_jitter``'s share is the time lost to
iterations slower than the median.  No finding is emitted without evidence.

Runs without a device trace are also judged from their utilisation counters
(GPU SM %, per-core CPU %, process CPU %): see :mod:`.counter_findings` for
``input_pipeline_bound`` (GPU starved while the host is busy), ``cpu_contention``
and ``cpu_bound``.  When a trace rule and a counter rule name the same id, the
larger share is kept and the other's evidence is appended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..summary import fmt_ns
from ..trace import CopyKind, Kind, Trace
from .breakdown import TraceBreakdown
from .device_side import COPY_DIRECTIONS, DeviceBreakdown
from .fixes import fixes_for
from .host_side import HostBreakdown, window_of
from .intervals import measure_in, union
from .results import Evidence, Finding, Iterations

THRESHOLDS = {
    "input_pipeline_bound": (0.05, 0.20),
    "host_device_copy_bound": (0.05, 0.20),
    "launch_overhead_bound": (0.03, 0.15),
    "synchronization_stalls": (0.03, 0.15),
    "communication_bound": (0.10, 0.20),
    "compute_bound": (0.50, 0.80),
    "iteration_jitter": (0.05, 0.20),
    "cpu_contention": (0.05, 0.20),
    "cpu_bound": (0.05, 0.20),
}
#: Assumed compute speed-up behind the compute_bound estimate.
COMPUTE_GAIN = 2.0
#: Device categories behind each device-side finding (disjoint, so shares add up).
INPUT_CATEGORIES = ("idle_input",)
COPY_CATEGORIES = ("memcpy_h2d", "memcpy_d2h", "idle_copy")
LAUNCH_CATEGORIES = ("idle_launch", "idle_host")
SYNC_CATEGORIES = ("idle_sync",)
COMM_CATEGORIES = ("communication",)
MAX_EVIDENCE = 5
BELOW = "none"  # severity of a rule result under its threshold (never shown as a finding)


@dataclass
class _Ctx:
    trace: Trace
    iters: Iterations
    bd: TraceBreakdown

    def host_of(self, rank: int) -> HostBreakdown | None:
        return next((h for h in self.bd.hosts if h.rank == rank), None)


def find_bottlenecks(trace: Trace, iters: Iterations, breakdown: TraceBreakdown) -> list[Finding]:
    """All findings above their thresholds, with evidence, largest share first."""
    out = [f for f in evaluate_rules(trace, iters, breakdown)
           if f.severity != BELOW and f.evidence]
    out.sort(key=lambda f: -f.share)
    return out


def evaluate_rules(trace: Trace, iters: Iterations, breakdown: TraceBreakdown) -> list[Finding]:
    """Every rule that applies, including those below threshold (severity ``"none"``);
    used by the diff to follow a share across runs."""
    from .counter_findings import counter_rules

    ctx = _Ctx(trace, iters, breakdown)
    found = [f for f in (rule(ctx) for rule in RULES) if f is not None]
    return _merge_same_id(found + counter_rules(ctx))


def _merge_same_id(found: list[Finding]) -> list[Finding]:
    """One finding per id: the larger share wins (above-threshold first) and carries the
    other's evidence after its own."""
    out: dict[str, Finding] = {}
    for f in found:
        g = out.get(f.id)
        if g is None:
            out[f.id] = f
            continue
        win, lose = (f, g) if _rank(f) > _rank(g) else (g, f)
        win.evidence = (win.evidence + lose.evidence)[:MAX_EVIDENCE]
        out[f.id] = win
    return list(out.values())


def _rank(f: Finding) -> tuple[bool, float]:
    return f.severity != BELOW and bool(f.evidence), f.share


# -- helpers ---------------------------------------------------------------------------
def _wall(obj) -> int:
    return int((obj.ends - obj.starts).sum())


def _share(obj, categories) -> float:
    wall = _wall(obj)
    return float(sum(int(obj.column(c).sum()) for c in categories)) / wall if wall else 0.0


def _severity(fid: str, share: float) -> str:
    moderate, high = THRESHOLDS[fid]
    if share < moderate:
        return BELOW
    return "high" if share >= high else "medium"


def _amdahl(share: float) -> float:
    return 1.0 / max(1.0 - share, 1e-6)


def _best_device(ctx: _Ctx, categories) -> tuple[DeviceBreakdown | None, float]:
    best, best_share = None, 0.0
    for d in ctx.bd.devices:
        s = _share(d, categories)
        if best is None or s > best_share:
            best, best_share = d, s
    return best, best_share


def _finding(fid: str, title: str, share: float, summary: str, evidence: list[Evidence],
             speedup: float | None = None, severity: str | None = None) -> Finding:
    severity = severity or _severity(fid, share)
    return Finding(fid, title, severity, share, speedup or _amdahl(share), summary,
                   evidence[:MAX_EVIDENCE], fixes_for(fid))


def _top_iterations(values: np.ndarray, k: int = MAX_EVIDENCE) -> list[int]:
    order = np.argsort(-values, kind="stable")
    return [int(i) for i in order[:k] if values[i] > 0]


def _it(bd: TraceBreakdown, i: int) -> int | None:
    return None if bd.whole_trace else i


def _lanes(*groups) -> list[int]:
    """Lane ids in order of first appearance, without repeats."""
    return list(dict.fromkeys(int(x) for g in groups for x in g))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


# -- rules -----------------------------------------------------------------------------
def input_pipeline_bound(ctx: _Ctx) -> Finding | None:
    fid = "input_pipeline_bound"
    d, share = _best_device(ctx, INPUT_CATEGORIES)
    host = ctx.host_of(d.rank) if d is not None else ctx.bd.host
    if host is None:
        return None
    host_share = _share(host, ["data_loading"])
    if d is None:
        share = host_share
        per_iter = host.column("data_loading")
        where = "the main thread spends it loading data (no accelerator in the trace)"
    else:
        per_iter = d.column("idle_input")
        where = (f"{d.label} sits idle while the main thread loads the next batch "
                 f"(data loading is {_pct(host_share)} of host time)")
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64))
    evidence = []
    s = ctx.trace.slices
    lanes = [host.lane] + (d.lanes if d is not None else [])
    for i in _top_iterations(per_iter):
        lo, hi = host.starts[i], host.ends[i]
        mine = dl[(s.start[dl] < hi) & (s.end[dl] > lo)]
        if not len(mine):
            continue
        a, b = max(int(s.start[mine].min()), int(lo)), min(int(s.end[mine].max()), int(hi))
        name = ctx.trace.name_of(int(mine[0]))
        evidence.append(Evidence(
            f"iteration {i}: {fmt_ns(per_iter[i])} waiting for input in {name}",
            a, b, _it(ctx.bd, i), lanes))
    grade = {"high": "HIGHLY", "medium": "MODERATELY"}.get(_severity(fid, share), "NOT")
    summary = (f"{grade} input-bound: {_pct(share)} of iteration time is spent waiting for "
               f"input; {where}. Thresholds: >= 5% moderately, >= 20% highly input-bound "
               f"(TensorFlow profiler).")
    return _finding(fid, "Input pipeline bound", share, summary, evidence)


def host_device_copy_bound(ctx: _Ctx) -> Finding | None:
    fid = "host_device_copy_bound"
    d, share = _best_device(ctx, COPY_CATEGORIES)
    if d is None:
        return None
    s = ctx.trace.slices
    idx = _device_slices(ctx, d, Kind.MEMCPY)
    idx = idx[np.isin(s.copy_kind[idx], [int(CopyKind.H2D), int(CopyKind.D2H)])]
    host = ctx.host_of(d.rank)
    calls = host.role_slices.get("memcpy", np.zeros(0, np.int64)) if host else np.zeros(0, int)
    cand = np.concatenate([idx, calls]).astype(np.int64)
    evidence = []
    for j in cand[np.argsort(-s.dur[cand], kind="stable")][:MAX_EVIDENCE].tolist():
        it = int(window_of(s.start[j:j + 1], d.starts, d.ends)[0])
        evidence.append(Evidence(_copy_label(ctx.trace, j), int(s.start[j]), int(s.end[j]),
                                 None if it < 0 else _it(ctx.bd, it), [int(s.lane[j])]))
    c = d.copies
    pageable = int(c.pageable_bytes[:, :2].sum())
    total = int(c.bytes[:, :2].sum())
    extra = (f"; {_pct(pageable / total)} of the bytes come from pageable (unpinned) memory"
             if total and pageable else "")
    staged = _share(d, ["idle_copy"])
    bw = ", ".join(f"{k.upper()} {c.bandwidth_gbps(k):.1f} GB/s" for k in ("h2d", "d2h")
                   if c.count[:, COPY_DIRECTIONS.index(k)].sum())
    summary = (f"Host<->device copies stall the device {_pct(share)} of iteration time on "
               f"{d.label}: copies no kernel hides, plus {_pct(staged)} idle while the host "
               f"is inside copy calls (staging pageable memory)."
               + (f" Achieved {bw}{extra}." if bw else ""))
    return _finding(fid, "Host-device copies on the critical path", share, summary, evidence)


def _copy_label(trace: Trace, j: int) -> str:
    s = trace.slices
    dur = int(s.dur[j])
    if s.kind[j] != int(Kind.MEMCPY):
        return f"{trace.name_of(j)} holds the host {fmt_ns(dur)}"
    nbytes = int(s.bytes[j])
    bw = f", {nbytes / dur:.2f} GB/s" if nbytes > 0 and dur > 0 else ""
    size = f" {nbytes / 1e6:.2f} MB" if nbytes > 0 else ""
    return f"{trace.name_of(j)}{size} in {fmt_ns(dur)}{bw}"


def launch_overhead_bound(ctx: _Ctx) -> Finding | None:
    fid = "launch_overhead_bound"
    d, share = _best_device(ctx, LAUNCH_CATEGORIES)
    if d is None:
        return None
    g = d.gaps
    sel = np.concatenate([g.of("idle_launch"), g.of("idle_host")])
    gw = window_of(g.start[sel], d.starts, d.ends)
    short, hostb = d.column("idle_launch"), d.column("idle_host")
    evidence = []
    for i in _top_iterations(short + hostb):
        mine = sel[gw == i]
        if not len(mine):
            continue
        evidence.append(Evidence(
            f"iteration {i}: device waits {fmt_ns(short[i] + hostb[i])} for the host "
            f"({fmt_ns(short[i])} in gaps <= 50 µs, {fmt_ns(hostb[i])} in longer gaps while "
            f"the host runs framework code); {int(d.kernel_count[i])} kernels",
            int(g.start[mine].min()), int(g.end[mine].max()), _it(ctx.bd, i), list(d.lanes)))
    host = ctx.host_of(d.rank)
    launches = calls = ""
    if host is not None:
        launches = (f" The host made {int(host.launches.sum())} runtime calls and spent "
                    f"{_pct(_share(host, ['runtime']))} of its time in them.")
        calls, top = _runtime_in_gaps(ctx, d, host)
        evidence = top + evidence
    summary = (f"The device waits for the host to issue work {_pct(share)} of iteration time: "
               f"{_pct(_share(d, ['idle_launch']))} in short gaps between kernels (launch "
               f"latency; median kernel {fmt_ns(d.kernel_median_ns)}) and "
               f"{_pct(_share(d, ['idle_host']))} while per-op framework/Python overhead on the "
               f"host is slower than the kernels it launches.{launches}{calls} Thresholds: "
               f">= 3% moderately, >= 15% highly kernel-launch bound (TensorFlow profiler).")
    return _finding(fid, "Launch and framework overhead (host-bound)", share, summary, evidence)


#: A runtime call this long and this many times its name's median is a one-off.
ONE_OFF_NS = 10_000_000
ONE_OFF_RATIO = 100
#: Runtime calls that allocate or set up rather than launch work (CUDA/HIP).
_SETUP_CALL = re.compile(r"Malloc|Free|HostAlloc|HostRegister|StreamCreate|EventCreate|"
                         r"GetStreamPriorityRange|GetDeviceProperties|DeviceGetAttribute|"
                         r"ModuleLoad|FuncGetAttributes|CtxCreate|DevicePrimaryCtx", re.I)


def _runtime_in_gaps(ctx: _Ctx, d: DeviceBreakdown,
                     host: HostBreakdown) -> tuple[str, list[Evidence]]:
    """What the main thread does while the device idles in long gaps: its outermost ops
    by time in the gaps, and the runtime calls when they cover a quarter of it; plus the
    slice that holds the host longest in a gap."""
    g = d.gaps
    sel = g.of("idle_host")
    gs, ge = union(g.start[sel], g.end[sel])
    gap_ns = int((ge - gs).sum())
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    # ops and calls name the work; Python frames only when nothing else is traced
    # (the outermost frames are wrappers such as the script's main loop)
    ops = mine[np.isin(s.kind[mine], [int(Kind.CPU_OP), int(Kind.RUNTIME)])]
    mine = ops if len(ops) else mine[s.kind[mine] == int(Kind.PYTHON)]
    if not gap_ns or not len(mine):
        return "", []
    end = s.end[mine]
    reach = np.maximum.accumulate(end)
    outer = mine[np.concatenate([[True], end[1:] > reach[:-1]])]  # not inside another
    text, j = _top_in_gaps(ctx, outer, gs, ge, gap_ns, "the host runs")
    calls = mine[s.kind[mine] == int(Kind.RUNTIME)]
    if len(calls):
        inside = measure_in(gs, ge, s.start[calls], s.end[calls])
        if 4 * int(inside.sum()) >= gap_ns:
            more, j = _top_in_gaps(ctx, calls, gs, ge, gap_ns, "it is inside runtime calls")
            text += more + _runtime_notes(ctx, calls, j)
    it = int(window_of(s.start[j:j + 1], d.starts, d.ends)[0])
    ev = Evidence(f"{ctx.trace.name_of(j)} holds the host {fmt_ns(int(s.dur[j]))} while "
                  f"{d.label} idles", int(s.start[j]), int(s.end[j]),
                  None if it < 0 else _it(ctx.bd, it), _lanes([host.lane], d.lanes))
    return text, [ev]


def _top_in_gaps(ctx: _Ctx, idx: np.ndarray, gs, ge, gap_ns: int, what: str) -> tuple[str, int]:
    """" In the long gaps <what> x% of the time: a 1 ms, b 2 ms." and the slice of ``idx``
    with the most time in the gaps."""
    s = ctx.trace.slices
    inside = measure_in(gs, ge, s.start[idx], s.end[idx])
    by_name = np.bincount(s.name[idx], weights=inside.astype(np.float64))
    top = [int(n) for n in np.argsort(-by_name)[:3] if by_name[n] > 0]
    listed = ", ".join(f"{ctx.trace.names[n]} {fmt_ns(by_name[n])}" for n in top)
    text = (f" In the long gaps {what} {_pct(inside.sum() / gap_ns)} of the time"
            + (f": {listed}." if listed else "."))
    return text, int(idx[np.argmax(inside)])


def _runtime_notes(ctx: _Ctx, calls: np.ndarray, j: int) -> str:
    """Allocation/initialisation calls and one-off long calls, said plainly."""
    s = ctx.trace.slices
    name = ctx.trace.name_of(j)
    text = ""
    if _SETUP_CALL.search(name):
        text += (f" {name} allocates or initialises rather than launching work: keep "
                 "allocations out of the loop (no torch.cuda.empty_cache(), stable shapes so the "
                 "caching allocator reuses blocks) and warm up before profiling.")
    same = calls[s.name[calls] == s.name[j]]
    typical = float(np.median(s.dur[same]))
    if len(same) > 2 and s.dur[j] >= ONE_OFF_NS and s.dur[j] > ONE_OFF_RATIO * typical:
        text += (f" The longest {name} ({fmt_ns(int(s.dur[j]))}) is "
                 f"{s.dur[j] / max(typical, 1):,.0f}x its median ({fmt_ns(typical)}): a one-off "
                 "such as lazy module loading or initialisation on first use; leave warm-up "
                 "steps out of the profile (torch.profiler.schedule(wait=1, warmup=1, ...)).")
    return text


def synchronization_stalls(ctx: _Ctx) -> Finding | None:
    fid = "synchronization_stalls"
    d, share = _best_device(ctx, SYNC_CATEGORIES)
    if d is None:
        return None
    g = d.gaps
    sel = g.of("idle_sync")
    sel = sel[np.argsort(-(g.end[sel] - g.start[sel]), kind="stable")][:MAX_EVIDENCE]
    s = ctx.trace.slices
    evidence = []
    for j in sel.tolist():
        sync = int(g.sync_slice[j])
        if sync < 0:
            continue
        it = int(window_of(g.start[j:j + 1], d.starts, d.ends)[0])
        evidence.append(Evidence(
            f"{ctx.trace.name_of(sync)} returns, then {d.label} idles "
            f"{fmt_ns(g.end[j] - g.start[j])}",
            int(min(s.start[sync], g.start[j])), int(g.end[j]),
            None if it < 0 else _it(ctx.bd, it), _lanes([int(s.lane[sync])], d.lanes)))
    summary = (f"The device idles after host synchronisations {_pct(share)} of iteration "
               f"time: the host blocks until the queue drains (explicit syncs, .item(), "
               f"blocking copies), then has to refill it.")
    return _finding(fid, "Synchronisation stalls", share, summary, evidence)


def communication_bound(ctx: _Ctx) -> Finding | None:
    fid = "communication_bound"
    d, share = _best_device(ctx, COMM_CATEGORIES)
    if d is None:
        return None
    s = ctx.trace.slices
    comm = _device_slices(ctx, d, Kind.COMMUNICATION)
    cw = window_of(s.start[comm], d.starts, d.ends)
    exposed = d.column("communication")
    evidence = []
    for i in _top_iterations(exposed):
        mine = comm[cw == i]
        if not len(mine):
            continue
        j = int(mine[np.argmax(s.dur[mine])])
        hidden = d.comm_overlap[i] / d.comm_total[i] if d.comm_total[i] else 0.0
        evidence.append(Evidence(
            f"iteration {i}: {fmt_ns(exposed[i])} exposed communication "
            f"({_pct(hidden)} hidden behind compute); longest {ctx.trace.name_of(j)}",
            int(s.start[j]), int(s.end[j]), _it(ctx.bd, i), [int(s.lane[j])]))
    total = int(d.comm_total.sum())
    overlap = int(d.comm_overlap.sum()) / total if total else 0.0
    straggle = ""
    if ctx.bd.ranks is not None:
        straggle = (f" Slowest rank per iteration: {ctx.bd.ranks.straggler.tolist()}; "
                    "exposed collectives on the other ranks are partly waiting for it.")
    summary = (f"Collectives not overlapped with compute take {_pct(share)} of iteration time "
               f"on {d.label}; {_pct(overlap)} of all communication time is hidden behind "
               f"compute.{straggle}")
    return _finding(fid, "Communication bound", share, summary, evidence)


def compute_bound(ctx: _Ctx) -> Finding | None:
    fid = "compute_bound"
    d, busy = _best_device(ctx, ["compute"])
    if d is not None:
        evidence = _top_kernels(ctx, d)
        what = f"compute kernels keep {d.label} busy"
    else:
        host = ctx.bd.host
        if host is None:
            return None
        busy = _share(host, ["forward", "backward", "optimizer"])
        evidence = _top_host_ops(ctx, host)
        what = "framework ops keep the main thread busy (no accelerator in the trace)"
    severity = {"high": "medium", "medium": "low"}.get(_severity(fid, busy), BELOW)
    share = busy * (1.0 - 1.0 / COMPUTE_GAIN)
    summary = (f"{what} {_pct(busy)} of iteration time. The share and speed-up assume the "
               f"compute becomes {COMPUTE_GAIN:g}x faster (typical of FP32 -> mixed precision "
               f"on tensor cores, or of kernel fusion), not that it disappears.")
    return _finding(fid, "Compute bound", share, summary, evidence, severity=severity)


def _top_kernels(ctx: _Ctx, d: DeviceBreakdown) -> list[Evidence]:
    s = ctx.trace.slices
    k = _device_slices(ctx, d, Kind.KERNEL)
    if not len(k):
        return []
    names = s.name[k]
    tot = np.bincount(names, weights=s.dur[k].astype(np.float64))
    cnt = np.bincount(names)
    busy = float(d.column("compute").sum()) or 1.0
    out = []
    for nid in np.argsort(-tot)[:3].tolist():
        if tot[nid] <= 0:
            break
        inst = k[names == nid]
        j = int(inst[np.argmax(s.dur[inst])])
        it = int(window_of(s.start[j:j + 1], d.starts, d.ends)[0])
        out.append(Evidence(
            f"{ctx.trace.names[nid]}: {fmt_ns(tot[nid])} in {int(cnt[nid])} launches "
            f"({_pct(tot[nid] / busy)} of compute time); longest instance",
            int(s.start[j]), int(s.end[j]), None if it < 0 else _it(ctx.bd, it),
            [int(s.lane[j])]))
    return out


def _top_host_ops(ctx: _Ctx, host: HostBreakdown) -> list[Evidence]:
    """Leaf framework ops (no op nested inside) of the main thread with the most time."""
    s = ctx.trace.slices
    idx = ctx.trace.lane_slices(host.lane)
    idx = idx[s.kind[idx] == int(Kind.CPU_OP)]
    if not len(idx):
        return []
    has_child = np.zeros(len(idx), bool)
    has_child[:-1] = (s.start[idx[1:]] < s.end[idx[:-1]]) & (s.depth[idx[1:]] > s.depth[idx[:-1]])
    leaf = idx[~has_child]
    names = s.name[leaf]
    tot = np.bincount(names, weights=s.dur[leaf].astype(np.float64))
    out = []
    for nid in np.argsort(-tot)[:3].tolist():
        if tot[nid] <= 0:
            break
        inst = leaf[names == nid]
        j = int(inst[np.argmax(s.dur[inst])])
        it = int(window_of(s.start[j:j + 1], host.starts, host.ends)[0])
        out.append(Evidence(f"{ctx.trace.names[nid]}: {fmt_ns(tot[nid])} in {len(inst)} calls",
                            int(s.start[j]), int(s.end[j]),
                            None if it < 0 else _it(ctx.bd, it), [host.lane]))
    return out


def iteration_jitter(ctx: _Ctx) -> Finding | None:
    fid = "iteration_jitter"
    bd = ctx.bd
    if bd.whole_trace or len(bd) < 3:
        return None
    dur = bd.durations.astype(np.float64)
    med = float(np.median(dur))
    excess = np.maximum(dur - med, 0.0)
    share = float(excess.sum() / dur.sum()) if dur.sum() else 0.0
    speedup = float(dur.sum() / np.minimum(dur, med).sum()) if med > 0 else 1.0
    evidence = []
    side_times, cats = bd.times(), bd.categories()
    m = bd.median_iteration
    lanes = bd.device.lanes if bd.device is not None else ([bd.host.lane] if bd.host else [])
    for i in _top_iterations(np.where(dur > 1.1 * med, excess, 0.0)):
        label = f"iteration {i}: {fmt_ns(dur[i])} (+{_pct(excess[i] / med)} vs median)"
        if side_times.shape[1] and m >= 0:
            delta = side_times[i] - side_times[m]
            c = int(np.argmax(delta))
            if delta[c] > 0:
                label += f"; most of it in {cats[c]} (+{fmt_ns(delta[c])})"
        if bd.ranks is not None:
            label += (f"; slowest rank {int(bd.ranks.straggler[i])} "
                      f"(+{fmt_ns(bd.ranks.lag[i])} busy vs median rank)")
        evidence.append(Evidence(label, int(bd.starts[i]), int(bd.ends[i]), i, list(lanes)))
    cv = float(np.std(dur) / np.mean(dur)) if np.mean(dur) else 0.0
    summary = (f"Iteration times vary (coefficient of variation {_pct(cv)}, median "
               f"{fmt_ns(med)}); iterations slower than the median lose {_pct(share)} of the "
               f"time. The speed-up is what running every iteration at the median would give.")
    return _finding(fid, "Unstable iteration times", share, summary, evidence, speedup=speedup)


def _device_slices(ctx: _Ctx, d: DeviceBreakdown, kind: Kind) -> np.ndarray:
    """Slices of ``kind`` on ``d``'s lanes, in time order."""
    s = ctx.trace.slices
    return np.flatnonzero((s.kind == int(kind)) & np.isin(s.lane, d.lanes))


RULES = [input_pipeline_bound, host_device_copy_bound, launch_overhead_bound,
         synchronization_stalls, communication_bound, compute_bound, iteration_jitter]
