"""Input rule: the device (or, on a CPU run, the main thread) waits for the next batch.

The share is the breakdown's ``idle_input`` (``data_loading`` on the host without a device);
each fix has its own estimate, bounded by the free cores it needs (:func:`parallel_bound`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import union
from ..results import Evidence, Finding
from ..roles import makes_iterator
from ..run_facts import handover_parts, send_parts
from . import list_conversion, loader_plan
from .causes import causes_by_name, nested_in, self_times
from .context import (
    BELOW,
    Ctx,
    amdahl,
    make_finding,
    severity,
    top_rows,
)
from .devices import INPUT_CATEGORIES, LAUNCH_CATEGORIES, TF_PROFILER
from .eager_input import eager_decoding_speedup
from .host_estimate import TINY_LOOP_UNPROFILED
from .input_estimate import ASSUMED_CORES, map_contention, tf_pipeline_speedup
from .input_pacing import loader_paces, unexplained_wait
from .input_removal import core_interference, removal_gain
from .input_restarts import restart_cost
from .loader_step import collate_tensors, unprofiled_step
from .registry import Rule, rule
from .tf_data import pipeline_note
from .work import TINY_NS, name_medians, outermost, starts_inside

#: The least share of the step the pipeline's threads must take from the compute's to be
#: told (below it the even-share reading is within the trace's noise).
TAKEN = 0.02
MODELLED_CONTENTION = ("the wait alone is under the moderate share: the cores the pipeline's "
                       "threads take count by an even share of the cores, not measured")


# -- input -----------------------------------------------------------------------------------
@rule("input_pipeline_bound", "Input pipeline bound", 0.05, 0.20,
      TF_PROFILER + " input-pipeline analysis (moderately/highly input-bound at {moderate} / "
      "{high})",
      partition="device_time", factors={"modelled_contention": 0.5})
def input_pipeline_bound(ctx: Ctx, spec: Rule) -> Finding | None:
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
    share, unmade = unexplained_wait(ctx, host, share)
    taken, took = _cores_taken(ctx, d is None)
    grade = {"high": "HIGHLY", "medium": "MODERATELY"}.get(
        severity(spec, share + taken), "NOT")
    paced = loader_paces(ctx, host, share, spec)
    back = restart_cost(ctx, host)
    summary = (f"{grade} input-bound: {pct(share)} of steady-state iteration time is spent "
               f"waiting for input; {where}.{took}{unmade}{tf_note}"
               f"{' ' + paced if paced else ''}"
               f"{back.sentence()} {spec.grading('input-bound', TF_PROFILER)} The estimate is "
               f"that of the best fix that fits this machine.")
    sev = None
    if d is None and (bare := _unprofiled_loading(ctx, host, dl, share)) + taken < spec.moderate:
        sev = BELOW  # the profiler's own cost per op is what makes it count
        summary = (f"Without the profiler's own cost per op the loading would take about "
                   f"{pct(bare)} of the step, under the {pct(spec.moderate)} that counts. "
                   + summary)
    elif taken:  # the wait may be short, the cores taken from the compute count too
        sev = severity(spec, share + taken)
    if d is None and sev != BELOW and (anew := _pipeline_per_call(ctx)):
        sev, summary = BELOW, anew + summary
    rest = max(share - back.share, 0.0)  # what the other fixes act on: the steady fetches
    assumption, notes = 1.0, ()
    if taken and share < spec.moderate <= share + taken and sev != BELOW:
        assumption, notes = spec.factor("modelled_contention"), (MODELLED_CONTENTION,)
    f = make_finding(ctx, spec, share, summary, evidence, causes=causes, sev=sev,
                     assumption=assumption, notes=notes, tentative=notes[0] if notes else "",
                     fix_gain=lambda fix: (back.gain() if fix.gain == "restarts" else
                                           _input_fix_gain(ctx, rest, fix)),
                     unseen=lambda fix: _unseen(ctx, back, fix))
    f.paced = paced
    return f


def _pipeline_per_call(ctx: Ctx) -> str:
    """Why the wait is no input bottleneck ("" where it may be one), on a CPU run: every few
    iterations a new high-level call starts (``Iterations.per_call``: a Keras ``predict`` /
    ``evaluate`` per step) and makes its input iterator anew.  Such a pipeline lives for one
    call: the wait is its start (the first element after the iterator is made) and one
    fetch per small batch, the call's own overhead, which fewer and larger calls remove;
    not a pipeline that a running loop outpaces."""
    rows = ctx.call_setups
    if not len(rows):
        return ""
    s = ctx.trace.slices
    made = np.flatnonzero(np.isin(s.name, ctx.trace.name_ids(makes_iterator)))
    k = np.searchsorted(ctx.bd.starts, s.start[made], side="right") - 1
    if not np.isin(rows, k).all():
        return ""
    every = ctx.iters.periodic_extras[0].every
    return (f"Each call builds its input pipeline and iterator anew (every {every} "
            f"iterations, with a new call's set-up): the wait is that short-lived "
            f"pipeline's start and a fetch per small batch, overhead of the call that "
            f"fewer and larger calls remove, not input a running loop waits for. ")


def _unseen(ctx: Ctx, back, fix) -> str:
    """Why a fix's cause is not in this trace ("" where it is): the loader's restarts, a
    batch converted from a list walked in Python."""
    if fix.gain == "restarts":
        return back.unseen()
    return list_conversion.unseen(ctx) if fix.gain == "list_conversion" else ""


def _cores_taken(ctx: Ctx, host_only: bool) -> tuple[float, str]:
    """(share of the step the input pipeline's threads take from the compute's threads on
    the shared cores, the sentence that says so; 0.0 and "" where the trace shows none or
    a device runs the compute): input time beside the wait (:func:`.map_contention`)."""
    c = map_contention(ctx) if host_only else None
    if c is None or c[0] < TAKEN:
        return 0.0, ""
    return c[0], (f" Beside it the pipeline's threads, busy {c[1]:.1f} cores on average, take "
                  f"about {pct(c[0])} of the step from the compute's threads on the shared "
                  f"cores, which a fix that takes their work off the machine gives back.")


def _unprofiled_loading(ctx: Ctx, host, dl: np.ndarray, share: float) -> float:
    """The loading's share of the step without the profiler's cost per op, on a CPU run:
    a loop of tiny framework ops the loader records (a ``TensorDataset``'s indexing op per
    sample and tensor), each op with the Python up to the next op of the same load, takes
    about :data:`TINY_LOOP_UNPROFILED` of its captured time without it, as the model's
    loops of tiny ops do; the rest of the loading keeps its time."""
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    ops = outermost(s.start, s.end, mine[s.kind[mine] == int(Kind.CPU_OP)])
    ops = ops[starts_inside(ctx, dl, ops)]
    if len(ops) < 2:
        return share
    a, b = union(s.start[dl], s.end[dl])
    load = np.searchsorted(a, s.start[ops], side="right")  # which load each op is of
    gap = np.append(np.where(load[1:] == load[:-1],
                             s.start[ops[1:]] - s.end[ops[:-1]], 0), 0)
    tiny = name_medians(s.name[ops], s.dur[ops]) <= TINY_NS
    loop = float((s.dur[ops] + np.clip(gap, 0, TINY_NS))[tiny].sum())
    r = ctx.rows
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    saved = (1.0 - TINY_LOOP_UNPROFILED) * loop
    return max(share * wall - saved, 0.0) / max(wall - saved, 1.0)


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
        return removal_gain(ctx, ctx.bd.host, share)
    if fix.gain == "list_conversion":
        return list_conversion.list_conversion_gain(ctx)
    if fix.gain == "cores" and fix.fact == "dataloader" and \
            ctx.facts.value("dataloader") == "single_process":
        return _loader_plan_gain(ctx, share)
    if fix.gain in ("cores", "core"):
        return tf_pipeline_speedup(ctx, share, fix) or eager_decoding_speedup(
            ctx, fix) or _parallel_speedup(
            ctx, share, one=fix.gain == "core")
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


def _parallel_speedup(ctx: Ctx, share: float, one: bool) -> tuple[float, str, float]:
    """Amdahl on the loading share, bounded by the cores that can take the loading over:
    with ``f`` free cores (cores, minus the main process, minus what other processes
    keep busy; at most 1 for one background thread) the step cannot get shorter than
    ``max(T - L, L / f)``; the rest of the step slows while the moved work runs beside it
    (:func:`_interference`), and work the workers already do hands each batch over."""
    slow, slow_why, slow_conf = _interference(ctx)
    moved, hand, moved_why, hand_conf = _moved_share(ctx, share)
    m = _machine(ctx)
    free = max(m.cores - 1 - m.busy, 0.0)
    if free < 0.05:
        return 1.0, m.none_free, 1.0
    use = min(free, 1.0) if one else free
    sp = parallel_bound(moved, use, slow, _host_paced(ctx, share), hand)
    return sp, (f"bounded by {use:.1f} free core{'s' if use != 1 else ''} ({m.what}); "
                f"{slow_why}{moved_why}"), m.conf * slow_conf * hand_conf


@dataclass(frozen=True)
class _Machine:
    """The cores a move of work to other cores can count on: ``cores`` (the trace's, else
    :data:`ASSUMED_CORES`), ``busy`` (held by other processes), ``what`` (the text that
    says where both come from) and ``conf`` (the confidence factor of those numbers)."""

    cores: int
    busy: float
    what: str
    conf: float

    @property
    def none_free(self) -> str:
        return (f"no CPU core is free for it ({self.what.split('; ')[0]}), so no speed-up is "
                f"expected")


def _machine(ctx: Ctx) -> _Machine:
    cores, other = ctx.facts.get("cpu_cores"), ctx.facts.get("cpu_other")
    if cores.known:
        n, proof, conf = int(cores.value), cores.proof, 1.0
    else:  # the least a machine with a core to spare for the loading has: no promise of
        # cores the machine may not have
        n, proof, conf = ASSUMED_CORES, (f"the trace does not say how many cores the machine "
                                         f"has: {ASSUMED_CORES} assumed, the main thread's and "
                                         f"one for the loading"), 0.8
    busy = float(other.value) if other.known else 0.0
    held = f", {busy:.1f} held by other processes ({other.proof})" if other.known else ""
    unsure = "" if other.known else "; other processes' load unknown"
    return _Machine(n, busy, f"{n} cores: {proof}{held}{unsure}",
                    conf * (1.0 if other.known else 0.9))


def _loader_plan_gain(ctx: Ctx, share: float) -> tuple[float, str, float, dict]:
    """Workers for a single-process DataLoader: the plan (:mod:`.loader_plan`) on the cores
    other processes leave free, with the measured (or assumed) interference and both
    sides of the hand-over; (speed-up, why, confidence factor, the plan's settings).  A
    plan under which no worker count helps promises no gain (1.0) and says what the best
    count would give."""
    m = _machine(ctx)
    free = m.cores - m.busy
    if free - 1.0 < 0.05:
        return 1.0, m.none_free, 1.0, {}
    slow, slow_why, slow_conf = _interference(ctx)
    recv, send, hand_why, hand_conf = _handover(ctx)
    bare = unprofiled_step(ctx)
    load = share * bare.load_factor  # the step's parts and the hand-over in one unit
    costs = loader_plan.LoaderCosts(load, 1.0 - load, _host_paced(ctx, load),
                                     recv * bare.step_factor, send * bare.step_factor, slow)
    p = loader_plan.plan(costs, free)
    where = (f"on {free:.1f} free cores ({m.what}); model: {p.figures()}; {slow_why}{hand_why}"
             f"; {bare.sentence()}"
             f"; while the main process and its workers outnumber the cores, "
             f"{loader_plan.TURNS:.0%} of the cores' time assumed to do work"
             f"{_MEMORY_NOT_COUNTED}")
    conf = m.conf * slow_conf * hand_conf
    if not p.helps:
        return 1.0, (f"no worker count is expected to help on this machine: the best, "
                     f"num_workers={p.best}, gives {p.speedup:.2f}x (under "
                     f"{loader_plan.HELPS:.2f}x), the step then set by {p.limit}, {where}"), \
            conf, p.settings()
    why = (f"num_workers={p.workers} with the main process at {p.main_threads} intra-op "
           f"thread{'s' if p.main_threads != 1 else ''} (torch.set_num_threads), the step then "
           f"set by {p.limit}, {where}; not counted: fewer main threads' effect on its own "
           f"compute, the main process's wait for a busy worker's GIL")
    return p.speedup, why, conf, p.settings()


def _interference(ctx: Ctx) -> tuple[float, str, float]:
    """(slow-down of the work left on the main core while another core works, why, its
    confidence factor).  1.0 when workers already run beside the step: the trace has the
    slow-down in it."""
    if ctx.facts.value("dataloader") == "workers":
        return 1.0, "the workers already running beside the step are in its times", 1.0
    return core_interference(ctx)


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
        recv, _, why, conf = _handover(ctx)
        return share, recv, why + _MEMORY_NOT_COUNTED, conf
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

#: The hand-over of one batch when the trace carries no calibration, µs per batch, per
#: tensor and per MB: the main thread's time receiving it and the worker's CPU time for it
#: beyond the loading, the middle of what ``recorder.calibrate.batch_handover`` measures
#: on an idle 2-core x86-64 VM (main: 1.0-1.4 ms for a one-tensor batch, 1.5-1.9 ms for
#: two, 0.2-0.35 ms per MB; worker: 0.9-1.1 ms for two tensors, 0.7-1.7 ms per MB).  Stated
#: assumptions, like :data:`.input_removal.DEFAULT_INTERFERENCE`, not figures fitted to any run.
DEFAULT_HANDOVER = (700.0, 500.0, 250.0)
DEFAULT_SEND = (300.0, 330.0, 850.0)


def _handover(ctx: Ctx) -> tuple[float, float, str, float]:
    """(share of the step the main thread spends receiving the batches workers hand over,
    share the workers spend on them beyond the loading, why, confidence factor): the
    calibration's costs of one batch (trace metadata ``cpu_batch_handover_*`` and
    ``cpu_batch_send_*``, or a recording's ``host.batch_handover``: per batch, per tensor,
    per MB) for the batches per step and the tensors per batch the trace shows
    (:func:`.loader_step.collate_tensors`), bytes from their shapes when recorded; shares
    of the captured step (the plan reads them in the unprofiled one).  Unmeasured:
    :data:`DEFAULT_HANDOVER` / :data:`DEFAULT_SEND`, said, confidence x0.9."""
    parts, send = handover_parts(ctx.trace), send_parts(ctx.trace)
    conf, what = 1.0, "calibration"
    if parts is None:
        parts = (*DEFAULT_HANDOVER, "", "not measured on this machine")
        conf, what = 0.9, "assumed"
    per_batch, per_tensor, per_mb, _, where = parts
    send_what = f"{what}, {where}" if send is not None else "assumed, not measured here"
    conf *= 1.0 if send is not None or what == "assumed" else 0.9
    send = send or DEFAULT_SEND
    host, r = ctx.bd.host, ctx.rows
    dl = host.role_slices.get("data_loading", np.zeros(0, np.int64)) if host else []
    if host is None or not len(r) or not len(dl):
        return 0.0, 0.0, "", 1.0
    dl = dl[ctx.in_steady(ctx.trace.slices.start[dl], host.starts, host.ends)]
    calls = np.array([j for j in dl.tolist() if _LOADER_NEXT.search(ctx.trace.name_of(j))],
                     np.int64)
    calls = calls if len(calls) else dl
    batches = len(calls) / len(r)
    tensors, mb, told = collate_tensors(ctx, calls)
    wall = float((host.ends[r] - host.starts[r]).mean()) or 1.0

    def cost(b: float, t: float, m: float) -> float:  # µs per batch
        return b + tensors * t + (mb or 0.0) * m
    recv, out = cost(*parts[:3]), cost(*send)
    size = (f"{mb:.2f} MB per batch from the collated tensors' shapes" if mb is not None else
            f"bytes not in the trace (no shapes): +{per_mb:.0f} µs per MB received and "
            f"+{send[2]:.0f} µs per MB sent not counted")
    share_in, share_out = recv * 1e3 * batches / wall, out * 1e3 * batches / wall
    return share_in, share_out, (
        f"; {tensors:.0f} tensor{'s' if tensors != 1 else ''} per batch ({told}), "
        f"{batches:.0f} batch{'es' if batches != 1 else ''} per step: the "
        f"main process spends {recv / 1e3:.1f} ms receiving each ({pct(share_in)} "
        f"of the step as captured; {what}: {per_batch:.0f} µs per batch + {per_tensor:.0f} µs per "
        f"tensor, {where}) and a worker {out / 1e3:.1f} ms of CPU sending it beyond the "
        f"loading ({send_what}: {send[0]:.0f} µs per batch + {send[1]:.0f} µs per tensor); "
        f"{size}"), conf
