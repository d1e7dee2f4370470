"""Communication and compute rules: exposed collectives, and compute that keeps the device
(or the main thread) busy -- a hypothesis of :data:`COMPUTE_GAIN` x faster compute."""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..balance import STRAGGLER_MIN_FRACTION, Balanced, balance, peer_input
from ..device_side import DeviceBreakdown
from ..host_side import HostBreakdown, window_of
from ..results import Evidence, Finding
from .augment_layers import estimate_augment_in_step
from .bucket_chain import estimate_buckets
from .causes import causes_by_name
from .comm_hook import estimate_hook
from .context import (
    Ctx,
    lanes_of,
    make_finding,
    severity,
    top_rows,
)
from .devices import COMM_CATEGORIES
from .fixes import choose_fixes
from .fleet_rules import SHAPE_FIXES
from .float64_compute import estimate_float32
from .frozen_part import estimate_frozen
from .grad_recording import estimate_inference_mode
from .recompiles import recompiles
from .registry import Rule, rule
from .sharded_optimizer import estimate_sharding
from .work import outermost

#: Assumed compute speed-up behind the compute_bound estimate.
COMPUTE_GAIN = 2.0
#: Collectives that gather or reduce results (predictions gathered, metric counts summed):
#: what "gather results less often" spaces out.  Sends, receives, broadcasts and
#: all-to-alls move a model's own tensors (pipeline or expert parallelism).
RESULTS_COLLECTIVE = re.compile(r"gather|reduce(?![-_ ]?scatter)", re.I)


# -- communication / compute -----------------------------------------------------------------
@rule("communication_bound", "Communication bound", 0.10, 0.20,
      "PyTorch TensorBoard plugin (communication > {moderate} of step)",
      partition="device_time")
def communication_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    d, share = ctx.best_device(COMM_CATEGORIES)
    if d is None:
        return _host_communication(ctx, spec)
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
    mine = comm[ctx.in_steady(s.start[comm], d.starts, d.ends)]
    causes = causes_by_name(ctx, mine, s.dur[mine], float(s.dur[mine].sum()) or 1.0,
                            label=lambda n, j: n + (f" ({int(s.bytes[j]) / 1e6:.2f} MB)"
                                                    if s.bytes[j] > 0 else ""))
    summary = (f"Collectives not overlapped with compute take {pct(share)} of steady-state "
               f"iteration time on {d.label}; {pct(overlap)} of all communication time is "
               f"hidden behind compute.")
    f = _ranks_finding(ctx, spec, share, summary, evidence, causes, mine=mine)
    estimate_buckets(ctx, f, None)
    return f


def _host_communication(ctx: Ctx, spec: Rule) -> Finding | None:
    """CPU collectives (gloo, MPI, UCC): the main thread of the rank that waits most, in
    a collective, for one another thread runs, or copying DDP's gradient buckets (host
    category ``communication``)."""
    hosts = [h for h in ctx.bd.hosts if h.column("communication").any()]
    if not hosts:
        return None
    host = max(hosts, key=lambda h: ctx.share(h, COMM_CATEGORIES))
    share = ctx.share(host, COMM_CATEGORIES)
    s = ctx.trace.slices
    comm = host.role_slices.get("communication", np.zeros(0, np.int64))
    cw = window_of(s.start[comm], host.starts, host.ends)
    waits = host.column("communication")
    evidence = []
    for i in top_rows(ctx.steady_only(waits)):
        mine = comm[cw == i]
        if not len(mine):
            continue
        j = int(mine[np.argmax(s.dur[mine])])
        evidence.append(Evidence(
            f"iteration {i}: the main thread spends {fmt_ns(waits[i])} on collectives; "
            f"longest {ctx.trace.name_of(j)} ({fmt_ns(int(s.dur[j]))})", int(s.start[j]),
            int(s.end[j]), ctx.it(i), lanes_of([host.lane], [int(s.lane[j])])))
    mine = comm[ctx.in_steady(s.start[comm], host.starts, host.ends)]
    causes = causes_by_name(ctx, mine, s.dur[mine], float(s.dur[mine].sum()) or 1.0)
    summary = (f"The main thread of {host.label} is in, waits for or fills the buffers of "
               f"collectives {pct(share)} of steady-state iteration time (CPU collectives: "
               f"the wait is the time until every rank has sent its part).")
    f = _ranks_finding(ctx, spec, share, summary, evidence, causes, host, mine)
    estimate_buckets(ctx, f, host)
    estimate_hook(ctx, f, host)
    estimate_sharding(ctx, f, host)
    return f


def _ranks_finding(ctx: Ctx, spec: Rule, share: float, summary: str, evidence, causes,
                   host: HostBreakdown | None = None, mine: np.ndarray | None = None):
    """The communication finding; when a slow rank holds the others in the collectives,
    its estimate is what balancing the ranks gains (not the whole wait: the collective's
    own cost stays and moved work still runs somewhere), with the remedies of the slow
    rank's kind of extra time first.  Its confidence is the share of the wait it removes
    that is not input seen through the collective (:func:`_peer_input`)."""
    bal = _balanced(ctx)
    summary += _straggler_sentence(ctx, bal)
    sure, words = _peer_input(ctx, host, bal)
    summary += words
    notes = (f"{pct(1.0 - sure)} of the wait it removes is the last rank waiting for its "
             f"batch",) if words else ()
    unseen = _gathers_results(ctx, mine)
    if bal is None:
        return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                            assumption=sure, notes=notes, unseen=unseen)
    f = make_finding(ctx, spec, share, summary, evidence, causes=causes, speedup=bal.speedup,
                     assumption=sure, notes=notes, unseen=unseen)
    shown, hidden = choose_fixes(SHAPE_FIXES[bal.shape], ctx.facts, ctx.all_frameworks)
    f.fixes[:0] = shown
    f.hidden_fixes[:0] = hidden
    return f


def _gathers_results(ctx: Ctx, mine: np.ndarray | None):
    """``unseen`` for the communication finding's fixes: "gather results less often" only
    where the steady collectives (``mine``) gather or reduce (:data:`RESULTS_COLLECTIVE`);
    a serving run whose collectives only send, receive or broadcast the model's own
    tensors has no results to gather less often."""
    names = {ctx.trace.name_of(int(j)) for j in (mine if mine is not None else [])}
    gathers = any(RESULTS_COLLECTIVE.search(n) for n in names)

    def unseen(fix) -> str:
        if fix.name == "gather less often" and not gathers:
            return "no collective in the steady steps gathers or reduces results"
        return ""
    return unseen


def _peer_input(ctx: Ctx, host: HostBreakdown | None, bal: Balanced | None) -> tuple[float,
                                                                                    str]:
    """(the share of the wait the finding removes that is not input seen through the
    collective, the sentence saying so; 1.0 and "" when none is).  In the steady
    iterations of a host-only job, the part of ``host``'s collective wait that the rank
    arriving last spent waiting for its own batch (``balance.peer_input``) is that rank's
    loader, not the collective: a faster loader removes it.  The finding removes the wait
    beyond the collective's own cost when a straggler sets its estimate (balancing), the
    whole wait otherwise."""
    if host is None:
        return 1.0, ""
    through, beyond = peer_input(ctx.bd, host)
    r = ctx.rows[ctx.rows < len(through)]
    t = float(through[r].sum())
    removed = float(beyond[r].sum()) if bal is not None else \
        float(host.column("communication")[r].sum())
    if t <= 0 or removed <= 0:
        return 1.0, ""
    part = min(t / removed, 1.0)
    n = max(len(r), 1)
    return 1.0 - part, (
        f" Of the wait {'balancing removes' if bal is not None else 'in the collectives'}, "
        f"{fmt_ns(t / n)} a step ({pct(part)}) is the rank arriving last still waiting for "
        f"its own batch: input seen through the collective, which a faster loader shortens "
        f"and a faster collective does not; the confidence is the rest's share.")


def _balanced(ctx: Ctx) -> Balanced | None:
    """The balanced step over the steady iterations of several ranks, when the slow rank's
    extra time is a straggler's (at least :data:`STRAGGLER_MIN_FRACTION` of the step)."""
    rs = ctx.bd.ranks
    if rs is None:
        return None
    r = ctx.rows[ctx.rows < rs.durations.shape[1]]
    bal = balance(rs.ranks, rs.durations[:, r], rs.comm[:, r], rs.work[:, r]) if len(r) \
        else None
    return bal if bal is not None and bal.excess_fraction() >= STRAGGLER_MIN_FRACTION else None


def _straggler_sentence(ctx: Ctx, bal: Balanced | None) -> str:
    """" Rank 1 is the slowest in 12 of 12 iterations, +40 ms of its own work per iteration
    over the median rank, mostly backward (+35 ms): the others wait for it." ("" with one
    rank); with a straggler's balanced step, that step's basis in place of the lag."""
    rs = ctx.bd.ranks
    if rs is None or not len(rs.straggler):
        return ""
    r = ctx.rows if len(ctx.rows) and ctx.rows.max() < len(rs.straggler) else \
        np.arange(len(rs.straggler))
    ranks, counts = np.unique(rs.straggler[r], return_counts=True)
    slow = int(ranks[np.argmax(counts)])
    n = int(counts.max())
    if bal is not None:
        return (f" Rank {slow} is the slowest in {n} of {len(r)} steady iterations: the other "
                f"ranks' collectives wait for it. {bal.basis()}")
    lag = float(np.median(rs.lag[r][rs.straggler[r] == slow]))
    cause = _straggler_cause(ctx, slow, r)
    return (f" Rank {slow} is the slowest in {n} of {len(r)} steady iterations, "
            f"+{fmt_ns(lag)} of its own work per iteration over the median rank{cause}: "
            f"the other ranks' collectives wait for it.")


def _straggler_cause(ctx: Ctx, slow: int, rows: np.ndarray) -> str:
    """", mostly backward (+35 ms)": the breakdown category (communication and idle
    left out) in which the slow rank spends most more than the fastest rank."""
    by_rank = {h.rank: h for h in ctx.bd.hosts}
    by_rank.update({d.rank: d for d in ctx.bd.devices})
    mine = by_rank.get(slow)
    others = [x for k, x in by_rank.items() if k != slow and type(x) is type(mine)]
    if mine is None or not others:
        return ""
    skip = {"communication", "other", "idle_other", "idle_input", "idle_sync", "idle_host",
            "idle_launch", "idle_copy"}
    best, best_ns = "", 0.0
    for cat in mine.categories:
        if cat in skip:
            continue
        extra = float(np.median(mine.column(cat)[rows])) - min(
            float(np.median(o.column(cat)[rows])) for o in others)
        if extra > best_ns:
            best, best_ns = cat, extra
    return f", mostly {best} (+{fmt_ns(best_ns)} over the fastest rank)" if best else ""


@rule("compute_bound", "Compute bound", 0.50, 0.80,
      "TB plugin (GPU utilisation < {moderate} -> not device-bound), on the compute share",
      factors={"hypothesis_on_device": 0.5, "hypothesis_on_cpu": 0.25},
      hypothesis=True)
def compute_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    d, busy = ctx.best_device(["compute"])
    if d is not None:
        causes = _top_kernels(ctx, d)
        what = f"compute kernels keep {d.label} busy"
    else:
        host = ctx.bd.host
        if host is None:
            return None
        busy = ctx.share(host, ["forward", "backward", "optimizer"])
        rc = recompiles(ctx)  # compiling in every step is start-up work, not compute
        busy = max(busy - (rc.share if rc is not None else 0.0), 0.0)
        causes = (_runtime_pool_ops(ctx, host)
                  if ctx.facts.value("framework") in ("tensorflow", "jax") else [])
        causes = causes or _top_host_ops(ctx, host)
        what = "framework ops keep the main thread busy (no accelerator in the trace)" + (
            ", the step's recurring compiles left out (see recompile)," if rc is not None
            else "")
    sev = {"high": "medium", "medium": "low"}.get(severity(spec, busy), "none")
    share = busy * (1.0 - 1.0 / COMPUTE_GAIN)
    evidence = [c.instance for c in causes if c.instance is not None]
    # a hypothesis, not a measured waste: half confidence on an accelerator (tensor cores
    # make 2x common), a quarter on a CPU (bf16/threads rarely give 2x)
    trust = spec.factor("hypothesis_on_device" if d is not None else "hypothesis_on_cpu")
    typical = ("FP32 -> mixed precision on tensor cores" if d is not None else
               "bf16 on a CPU with bf16 instructions, or more intra-op threads")
    summary = (f"{what} {pct(busy)} of steady-state iteration time. The share and speed-up "
               f"assume the compute becomes {COMPUTE_GAIN:g}x faster (typical of {typical}, "
               f"or of kernel fusion), not that it disappears: a hypothesis, so its "
               f"confidence is {trust:g}x that of measured findings.")
    f = make_finding(ctx, spec, share, summary, evidence, sev=sev, causes=causes,
                     assumption=trust, notes=(f"assumes {COMPUTE_GAIN:g}x faster compute",))
    f.covers = busy  # the compute's share; ``share`` is what the faster compute saves
    f.estimate_assumes = f"{COMPUTE_GAIN:g}x faster compute"
    estimate_inference_mode(ctx, f)  # its own estimate, where the fix is shown
    estimate_float32(ctx, f)
    estimate_augment_in_step(ctx, f)
    estimate_frozen(ctx, f)
    f.summary += _hypothesis_not_a_fix(f.fixes)
    return f


def _hypothesis_not_a_fix(fixes) -> str:
    """" The estimate is the hypothesis's, not a fix's: ..." -- the 2x is claimed for no
    fix of the compute finding; those with an estimate of their own (from what the trace
    shows they remove) and those shown on a condition the trace does not prove are named."""
    if not fixes:
        return ""
    cond = [x.name for x in fixes if x.conditional and x.name]
    own = [x.name for x in fixes if x.estimate is not None and x.name]
    which = "of none of the fixes below" + (f" but {', '.join(own)}, estimated on its own"
                                            if own else "")
    return (" The estimate is the hypothesis's, not a fix's: the trace measures the gain "
            + which + (f" ({', '.join(cond)} only on a condition it does not prove)"
                       if cond else "") + ".")


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
                           r"np\.asarray|DevicePut|ParseArguments|Iterator|(multi|one)_step_on_|"
                           r"(train|test|predict)_(step|function)$)")


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
    idx = ctx.steady_slices(host, Kind.CPU_OP)
    if not len(idx):
        return []
    has_child = np.zeros(len(idx), bool)
    has_child[:-1] = (s.start[idx[1:]] < s.end[idx[:-1]]) & (s.depth[idx[1:]] > s.depth[idx[:-1]])
    leaf = idx[~has_child]
    busy = float(s.dur[leaf].sum()) or 1.0
    return causes_by_name(ctx, leaf, s.dur[leaf], busy, k=3)



