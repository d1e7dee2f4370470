"""Iterations cut at the loop's landmarks: one optimizer update per training step.

When the host thread that runs the loop records its optimizer steps, every
training step holds exactly one of them, however irregular the rest is (inner
loops, micro-batches, variable sequence lengths, evaluation every N steps). The
step before update k starts at its *head*: the input fetch before its first
forward op when the loop fetches through a data loader, else the ops that
usually precede the first forward op (read from the steps themselves). Work
between an update and the next head (evaluation, checkpointing, logging) stays
in the step it follows. Inference loops (no update, no backward) are cut at each
input fetch (a fetch the compiled step does not follow before the next joins the next
fetch's step); loops that record neither (JAX, TF functions) at each call of the loop
body's Python function, else at each dispatch of the compiled step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...nesting import assign_depths
from ...trace import Kind, Trace
from ..results import Iterations
from .dispatch import step_dispatches
from .landmarks import Landmarks
from .stream import is_step_name

MIN_STEPS = 2
LOOP_BODY = "loop-body call"
FETCH_SHARE = 0.8  # steps whose head is an input fetch, for the fetch to be the head
MIN_USUAL_CONTENT = 0.5  # a step running less of the usual ops than this looks unlike the rest


@dataclass
class MainOps:
    """Depth-0 host ops of the loop's thread (step annotations left out), by start."""

    start: np.ndarray
    end: np.ndarray
    name: np.ndarray  # name ids

    @classmethod
    def of(cls, trace: Trace, lane: int) -> MainOps:
        s = trace.slices
        idx = trace.lane_slices(lane)
        keep = np.isin(s.kind[idx], [int(Kind.CPU_OP), int(Kind.ANNOTATION), int(Kind.RUNTIME)])
        steps = trace.name_ids(is_step_name)
        if len(steps):
            keep &= ~np.isin(s.name[idx], steps)
        idx = idx[keep]
        idx = idx[np.argsort(s.start[idx], kind="stable")]
        # outermost among these (Python frames and step annotations may wrap them)
        depth, _ = assign_depths(s.start[idx], s.dur[idx], np.zeros(len(idx), np.int32), 1)
        idx = idx[depth == 0]
        return cls(s.start[idx].astype(np.int64), s.end[idx].astype(np.int64), s.name[idx])

    def __len__(self) -> int:
        return len(self.start)

    def at(self, t: np.ndarray) -> np.ndarray:
        """Index of the op that starts at or before each ``t`` (-1: none)."""
        return np.searchsorted(self.start, t, side="right") - 1


def landmark_iterations(trace: Trace, lm: Landmarks,
                        per_item: tuple[int, int] | None = None) -> Iterations | None:
    """Iterations anchored on optimizer updates (or input fetches); None without them.
    ``per_item`` (step dispatches per step, index of the first step's first one): the
    dispatches are cut in runs of that many (see :func:`same_calls_per_step`)."""
    if lm.main_lane < 0:
        return None
    ops = MainOps.of(trace, lm.main_lane)
    if len(ops) < 2 * MIN_STEPS:
        return None
    oa, ob = lm.optimizer
    if len(oa) >= MIN_STEPS:
        return _training_steps(trace, lm, ops)
    if not lm.has_backward and len(lm.loop[0]) >= MIN_STEPS:
        return _loop_steps(lm, ops)
    if not lm.has_backward and len(lm.fetch) >= MIN_STEPS:
        return _fetch_steps(lm, ops, per_item, _steps_run(trace, lm))
    return None


def _steps_run(trace: Trace, lm: Landmarks) -> np.ndarray:
    """Sorted starts of the compiled step's dispatches on the loop's thread when the loop
    fetches its input (a ``tf.function`` step fed by a ``tf.data`` iterator); empty
    otherwise, and for fewer than :data:`MIN_STEPS` of them."""
    if lm.fetch_kind != "input fetch":
        return np.zeros(0, np.int64)
    d = step_dispatches(trace, lm.main_lane)
    return d if len(d) >= MIN_STEPS else d[:0]


def _training_steps(trace: Trace, lm: Landmarks, ops: MainOps) -> Iterations | None:
    oa, ob = lm.optimizer
    k = len(oa)
    gap_lo = np.r_[np.iinfo(np.int64).min, ob[:-1]]  # each step's body lies in (gap_lo, oa)
    first_fwd, how, has_fwd = _first_forward(lm, ops, gap_lo, oa)
    lo_op = np.searchsorted(ops.start, gap_lo, side="right")  # first op after the last update
    head, rule = _heads(lm, ops, lo_op, first_fwd)
    starts = ops.start[head]
    if np.any(np.diff(starts) <= 0):
        return None
    ends = np.r_[starts[1:], _tail_end(ops, int(oa[-1]))]
    notes = [f"one iteration per optimizer update ({k} updates on the loop's thread); "
             f"each starts at {rule}; the first forward op found by {how}"]
    pattern = {"symbols": None, "occurrences": k, "evidence": "landmarks",
               "coverage": 1.0, "duration_cv": round(_cv(ends - starts), 4),
               "landmark": "optimizer step", "cut": rule}
    conf = 0.9 if how == "autograd links" else 0.8
    if k < 3:
        conf *= 0.85
    conf = _consistency(ops, starts, ends, has_fwd, conf, pattern, notes)
    return Iterations("pattern", f"host ops of {trace.lanes.name[lm.main_lane]} "
                      f"({len(ops):,} top-level ops)", starts.astype(np.int64),
                      ends.astype(np.int64), conf, pattern, None, "; ".join(notes))


def _first_forward(lm: Landmarks, ops: MainOps, lo: np.ndarray,
                   hi: np.ndarray) -> tuple[np.ndarray, str, np.ndarray]:
    """Per step: index of the first op of its forward pass (in ``(lo, hi)``), how it
    was found, and whether the step had one (all True when nothing can tell)."""
    if len(lm.forward_ops):
        fwd = np.unique(ops.at(lm.forward_ops))
        fwd = fwd[fwd >= 0]
        j = np.searchsorted(ops.start[fwd], lo, side="right")
        got = j < len(fwd)
        cand = np.where(got, fwd[np.minimum(j, len(fwd) - 1)], -1)
        ok = got & (ops.start[np.maximum(cand, 0)] < hi)
        if ok.mean() >= FETCH_SHARE:
            return np.where(ok, cand, ops.at(hi)), "autograd links", ok
    if lm.has_backward:
        ba = lm.backward[0]
        j = np.searchsorted(ba, lo, side="right")
        ok = (j < len(ba)) & (ba[np.minimum(j, len(ba) - 1)] < hi)
        t = np.where(ok, ba[np.minimum(j, len(ba) - 1)], hi)
        return np.maximum(ops.at(t), 0), "the first backward pass", ok
    return (np.searchsorted(ops.start, lo, side="right"), "the first op after the update",
            np.ones(len(lo), bool))


def _consistency(ops: MainOps, starts: np.ndarray, ends: np.ndarray, has_fwd: np.ndarray,
                 conf: float, pattern: dict, notes: list[str]) -> float:
    """Lower ``conf`` when steps look unlike each other: a step with no forward pass,
    or one holding under half of the op names most steps run (extra
    work, variable lengths and warm-up only add names, so they do not count).
    The confidence is multiplied by the squared share of consistent steps."""
    k = len(starts)
    same = _usual_content(ops, starts, ends) >= MIN_USUAL_CONTENT
    ok = same & has_fwd
    share = float(ok.mean()) if k else 1.0
    pattern["consistent_steps"] = round(share, 4)
    if share < 1.0:
        bad = np.flatnonzero(~ok)
        shown = ", ".join(f"#{i}" for i in bad[:6].tolist()) + (", ..." if len(bad) > 6 else "")
        what = []
        if (~has_fwd).any():
            what.append(f"{int((~has_fwd).sum())} without a forward pass")
        if (~same).any():
            what.append(f"{int((~same).sum())} with under {MIN_USUAL_CONTENT:.0%} of the ops "
                        "most steps run")
        notes.append(f"{len(bad)} of {k} steps look unlike the others ({shown}: "
                     f"{'; '.join(what)}): confidence x{share ** 2:.2f}")
    return conf * share ** 2


def _usual_content(ops: MainOps, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per step: share of the usual op names (those in at least half the steps) it runs."""
    k = len(starts)
    w = np.searchsorted(starts, ops.start, side="right") - 1
    inside = (w >= 0) & (ops.start < ends[np.maximum(w, 0)])
    if k == 0 or not inside.any():
        return np.ones(k)
    m = int(ops.name.max()) + 1
    pairs = np.unique(w[inside].astype(np.int64) * m + ops.name[inside])
    step, name = pairs // m, pairs % m
    steps_with = np.bincount(name, minlength=m)
    usual = steps_with >= 0.5 * k
    if not usual.any():
        return np.ones(k)
    return np.bincount(step[usual[name]], minlength=k) / int(usual.sum())


def _heads(lm: Landmarks, ops: MainOps, lo_op: np.ndarray,
           first_fwd: np.ndarray) -> tuple[np.ndarray, str]:
    """First op of each step: its last input fetch before the forward, else the forward
    minus the number of ops that usually come between an update and the next forward."""
    first_fwd = np.maximum(first_fwd, lo_op) if len(first_fwd) else first_fwd
    if len(lm.fetch):
        f = ops.at(lm.fetch)
        f = np.unique(f[f >= 0])
        j = np.searchsorted(f, first_fwd, side="right") - 1
        cand = np.where(j >= 0, f[np.maximum(j, 0)], -1)
        has = (cand >= lo_op) & (cand <= first_fwd)
        if has[1:].mean() >= FETCH_SHARE if len(has) > 1 else has.all():
            return np.where(has, cand, first_fwd), "the input fetch before its forward pass"
    c = _prelude(ops.name, lo_op, first_fwd)
    head = np.maximum(first_fwd - c, lo_op)
    what = f"the {c} op{'s' if c != 1 else ''} before its forward pass" if c else "its forward pass"
    return head, what


def _prelude(names: np.ndarray, lo_op: np.ndarray, first_fwd: np.ndarray) -> int:
    """How many ops before the forward pass belong to the step (input preparation).

    The ops between an update and the next forward pass are the previous
    step's tail (logging, per-sample loops, checkpoints) followed by the next
    step's preparation: the longest run of names that (nearly) all gaps end
    with. The first step's gap has no previous tail, so the preparation is at
    most as long as it (it may differ in kind: compilation, tracing).
    """
    gaps = [names[a:b][::-1] for a, b in zip(lo_op.tolist(), first_fwd.tolist())]
    if not gaps:
        return 0
    later = gaps[1:] or gaps
    need = FETCH_SHARE * len(later)
    c = 0
    while c < len(gaps[0]):
        col = np.array([g[c] for g in later if len(g) > c])
        if len(col) < need or np.unique(col, return_counts=True)[1].max() < need:
            break
        c += 1
    return c


def _fetch_steps(lm: Landmarks, ops: MainOps, per_item: tuple[int, int] | None = None,
                 runs: np.ndarray | None = None) -> Iterations | None:
    heads = np.unique(ops.at(lm.fetch))
    heads = heads[heads >= 0]
    alone = 0
    if runs is not None and len(runs):
        heads, alone = _with_step(ops, heads, runs)
    what = lm.fetch_kind
    per, first = per_item or ((burst_size(ops.start[heads]) if what == "step dispatch"
                               else 1), 0)
    heads = heads[first::per]
    if len(heads) < MIN_STEPS:
        return None
    starts = ops.start[heads]
    ends = np.r_[starts[1:], ops.end[heads[-1]:].max()]
    pattern = {"symbols": None, "occurrences": len(starts), "evidence": "landmarks",
               "coverage": 1.0, "duration_cv": round(_cv(ends - starts), 4),
               "landmark": what, "cut": f"at each {what}" if per == 1 else
               f"at the first of each run of {per} {what}es"}
    notes = [f"one iteration per {what} (no backward, no optimizer update)" if per == 1 else
             f"one iteration per run of {per} {what}es of one step function (a loop "
             f"calling it {per} times a step: " + (
                 "the repeated pattern holds that many, whose calls record the same "
                 "events)" if per_item else f"the runs are apart by over {BURST_GAP:g}x "
                 "the time between the calls of a run)")]
    if alone:
        notes.append(f"{alone} input fetch{'es' if alone > 1 else ''} with no step run "
                     "before the next one (an epoch's end found before a new iterator is "
                     "made, a second fetch of the step) start no step of their own")
    conf = _consistency(ops, starts, ends, np.ones(len(starts), bool), 0.7, pattern, notes)
    return Iterations("pattern", f"host ops of the loop's thread ({what}es)",
                      starts.astype(np.int64), ends.astype(np.int64), conf, pattern, None,
                      "; ".join(notes))


def _with_step(ops: MainOps, heads: np.ndarray, runs: np.ndarray) -> tuple[np.ndarray, int]:
    """(the fetch ops that start a step, how many others there were): a fetch after
    which the compiled step does not run (``runs``: its dispatches) before the next fetch
    is part of the next fetch's step (the fetch that finds the epoch's end, then the
    iterator made anew and its first fetch, all wait for the step's input); those at the
    end, however many, with no step after them, stay in the last step."""
    if len(heads) < 2:
        return heads, 0
    t = ops.start[heads]
    nxt = np.r_[t[1:], np.iinfo(np.int64).max]
    before = np.searchsorted(runs, t, "left")
    holds = np.searchsorted(runs, nxt, "left") > before
    keep = np.r_[True, holds[:-1]] & (before < len(runs))  # a step runs after it
    keep[0] |= not keep.any()
    return heads[keep], int((~keep).sum())


def same_calls_per_step(trace: Trace, lm: Landmarks, starts: np.ndarray,
                        ends: np.ndarray) -> tuple[int, int] | None:
    """(dispatches per step, index of the first whole step's first dispatch) when the
    windows (a repeated pattern's occurrences) each hold the same number (2 or more) of
    step dispatches and every call among them records the same host event names up to
    the next dispatch: one step calling its compiled function once per item (an
    ensemble's members, a batch's samples). The step's last call is the one that records
    most events in every window, the step releasing what it held after it; the next
    call starts a step. A periodic extra (a logged value, an evaluation every few steps)
    adds events to one of the calls, so the dispatches stay the steps; None then, and
    when no one call is the heaviest in every window."""
    marks = np.sort(lm.fetch)
    per = holds_same_each(starts, ends, marks)
    if per < 2 or lm.fetch_kind != "step dispatch":
        return None
    lo = np.searchsorted(marks, starts, "left")
    lo = lo[lo + per < len(marks)]  # each call's events reach the next dispatch
    if len(lo) < 2:
        return None
    ops = MainOps.of(trace, lm.main_lane)
    at = np.searchsorted(ops.start, marks, "left")  # first op of each call
    calls = lo[:, None] + np.arange(per)[None, :]
    names = {frozenset(ops.name[at[j]:at[j + 1]].tolist()) for j in calls.ravel().tolist()}
    events = at[calls + 1] - at[calls]
    last = events.argmax(axis=1)
    unique = (events == events.max(axis=1, keepdims=True)).sum(axis=1) == 1
    if len(names) != 1 or not unique.all() or (last != last[0]).any():
        return None
    return per, int(lo[0] + last[0] + 1) % per


#: Dispatches apart by more than this many times the median time between dispatches
#: end a run of calls (a loop inside the step) and begin the next step's.
BURST_GAP = 10.0


def burst_size(marks: np.ndarray) -> int:
    """How many of the sorted ``marks`` (step dispatches) each step holds: the number in
    each run of calls that longer pauses (over :data:`BURST_GAP` times the median
    interval: the step's own work after its loop) split them into, when every run has
    the same number, at least 2, and there are :data:`MIN_STEPS` runs or more; else 1
    (each dispatch a step, as when a loop calls its compiled step once an iteration).
    A run may hold one longer pause of its own (its first call waits for what the step
    did after the previous loop, the input generator starts a new epoch): over
    :data:`BURST_GAP` times the median yet far shorter than the pauses between runs.
    Then the runs are split where the pauses are over :data:`BURST_GAP` times every
    pause inside a run (a jump of that size in the sorted pauses, above the first cut)."""
    gaps = np.diff(marks)
    if len(gaps) < 2 * MIN_STEPS:
        return 1
    floor = BURST_GAP * max(float(np.median(gaps)), 1.0)
    g = np.sort(gaps).astype(np.float64)
    inside = [float(a) for a, b in zip(g[:-1], g[1:]) if a > floor and b > BURST_GAP * a]
    for cut_above in [floor, *inside]:
        per = _run_size(gaps, cut_above)
        if per > 1:
            return per
    return 1


def _run_size(gaps: np.ndarray, cut_above: float) -> int:
    """Calls per run when the pauses over ``cut_above`` split the calls into runs of one
    size (2 or more, :data:`MIN_STEPS` runs or more); else 1."""
    cut = np.flatnonzero(gaps > cut_above)
    sizes = np.diff(np.r_[-1, cut, len(gaps)])
    if len(sizes) < MIN_STEPS or sizes[0] < 2 or not (sizes == sizes[0]).all():
        return 1
    return int(sizes[0])


def _loop_steps(lm: Landmarks, ops: MainOps) -> Iterations:
    """One iteration per call of the loop body: from its start to the next call's."""
    starts, ends = lm.loop
    ends = np.r_[starts[1:], ends[-1]]
    what = LOOP_BODY
    pattern = {"symbols": None, "occurrences": len(starts), "evidence": "landmarks",
               "coverage": 1.0, "duration_cv": round(_cv(ends - starts), 4),
               "landmark": what, "cut": f"at each {what}"}
    notes = [f"one iteration per {what} ({len(starts)} calls of the Python function that "
             "runs the loop's body)"]
    conf = _consistency(ops, starts, ends, np.ones(len(starts), bool), 0.8, pattern, notes)
    return Iterations("pattern", f"Python frames of the loop's thread ({what}s)",
                      starts.astype(np.int64), ends.astype(np.int64), conf, pattern, None,
                      "; ".join(notes))


def _tail_end(ops: MainOps, last_update: int) -> int:
    """End of the last step: the last op of the loop's thread from its last update on."""
    j = int(np.searchsorted(ops.start, last_update, side="left"))
    return int(ops.end[j:].max()) if j < len(ops) else int(ops.end.max())


def _cv(d: np.ndarray) -> float:
    d = d.astype(float)
    return float(d.std() / d.mean()) if len(d) > 1 and d.mean() > 0 else 0.0


def holds_one_each(starts: np.ndarray, ends: np.ndarray, marks: np.ndarray) -> float:
    """Share of windows that hold exactly one of the sorted ``marks``."""
    if len(starts) == 0:
        return 0.0
    lo = np.searchsorted(marks, starts, "left")
    hi = np.searchsorted(marks, ends, "left")
    return float(((hi - lo) == 1).mean())


def holds_same_each(starts: np.ndarray, ends: np.ndarray, marks: np.ndarray) -> int:
    """How many of the sorted ``marks`` every window holds, when it is the same number
    for all (0 otherwise, or without windows)."""
    if len(starts) == 0:
        return 0
    n = np.searchsorted(marks, ends, "left") - np.searchsorted(marks, starts, "left")
    return int(n[0]) if bool((n == n[0]).all()) else 0


#: Marks whose 90th-percentile interval is under this many times their 10th are evenly spaced.
EVEN_SPREAD = 2.0


def evenly_spaced(marks: np.ndarray) -> bool:
    """Whether the sorted ``marks`` follow each other at about equal intervals (as steps
    do; the several dispatches of one primitive in a step run op by op do not)."""
    gaps = np.diff(marks).astype(float)
    if len(gaps) < 2:
        return True
    lo, hi = np.quantile(gaps, [0.1, 0.9])
    return bool(hi < EVEN_SPREAD * max(lo, 1.0))
