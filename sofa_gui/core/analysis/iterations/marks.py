"""Per-iteration marks: micro-batches, device-side windows, periodic extras, warm-up.

Applied to every result (annotations or detected), so the advisor can use the
steady state only and knows which iterations hold extra work:

* ``micro_batches``: backward passes that start in the iteration;
* ``device_starts/ends``: span of the device work launched from inside the
  iteration (launch flows), which a lagging device runs later than the host;
* periodic extras: iterations that are heavy (more host ops, or much more host
  time outside any op) on a schedule ``i % every == phase``, and make calls the others
  do not (:mod:`.recurring`);
* warm-up: the leading run of heavy or far slower iterations that the extras
  schedule does not explain;
* ``repeats``: how many times the main thread's most repeated call (one every
  iteration makes) runs in each iteration: a step whose inner loop runs as many times
  as its data needs (a solver until it converges) is as long as that count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace import DEVICE_KINDS, Kind, Trace
from ..one_off import is_start_up
from ..results import Iterations, PeriodicExtra
from ..roles import step_marker_ids
from .landmarks import Landmarks
from .recurring import extra_call_stats, new_calls, opens_window, recurs

MAX_EVERY = 64  # longest extras period searched
WARMUP_SLOWER = 2.0  # a leading iteration this many times the steady median is warm-up
MAX_WARMUP_SHARE = 0.5


def mark_iterations(trace: Trace, iters: Iterations, lm: Landmarks | None = None) -> Iterations:
    """Fill the marks of ``iters`` in place (and return it)."""
    n = len(iters)
    if n == 0:
        return iters
    lm = lm or Landmarks.of(trace)
    iters.micro_batches = (_count_in(lm.backward[0], iters.starts, iters.ends)
                           if lm.has_backward else np.full(n, -1, np.int64))
    _device_windows(trace, iters)
    prof = Profile.of(trace, iters, lm.main_lane)
    heavy = prof.heavy()
    flag = heavy | prof.slow()
    lead = first_recurring(trace, iters, prof, flag, _leading(flag, n), lm.main_lane)
    extra = find_extra(trace, iters, prof, heavy, lead, lm)
    iters.periodic_extras = [extra] if extra is not None else []
    holders = set(extra.iterations) if extra is not None else set()
    warm = np.zeros(n, bool)
    for i in range(lead):
        if i in holders and not prof.slow()[i]:
            break  # the extras schedule explains it
        warm[i] = True
    iters.warmup = warm
    iters.steady_state_from = int(np.argmin(warm)) if not warm.all() else n
    iters.repeats = repeats(trace, iters, lm.main_lane)
    return iters


def repeats(trace: Trace, iters: Iterations, lane: int) -> np.ndarray | None:
    """Per iteration, how many times the main thread makes its most repeated call (the
    traced call, not a Python frame, that every iteration makes and that is made most
    often in the median iteration: a first step's compile calls do not count); None
    without a main thread or such a call."""
    n = len(iters)
    if lane < 0 or n == 0:
        return None
    s = trace.slices
    idx = trace.lane_slices(lane)
    idx = idx[s.kind[idx] != int(Kind.PYTHON)]
    st = s.start[idx]
    k = np.searchsorted(iters.starts, st, side="right") - 1
    inside = (k >= 0) & (st < iters.ends[np.maximum(k, 0)])
    if not inside.any():
        return None
    # (name, iteration) pairs counted sparsely: a name's pairs are contiguous, by iteration
    pairs, counts = np.unique(s.name[idx[inside]].astype(np.int64) * n + k[inside],
                              return_counts=True)
    name = pairs // n
    starts = np.flatnonzero(np.r_[True, name[1:] != name[:-1]])
    held = np.diff(np.r_[starts, len(name)])
    rows = [counts[a:a + n] for a in starts[held == n].tolist()]  # in every iteration
    if not rows:
        return None
    return rows[int(np.argmax([np.median(r) for r in rows]))].astype(np.int64)


def _count_in(times: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many of the sorted ``times`` fall in each window."""
    lo = np.searchsorted(times, starts, "left")
    hi = np.searchsorted(times, ends, "left")
    return (hi - lo).astype(np.int64)


def _device_windows(trace: Trace, iters: Iterations) -> None:
    """Span of the device work launched from inside each iteration's host window."""
    s, f = trace.slices, trace.flows
    n = len(iters)
    launch = f.kind == 0
    src, dst = f.src[launch], f.dst[launch]
    dev = np.isin(s.kind[dst], [int(k) for k in DEVICE_KINDS])
    src, dst = src[dev], dst[dev]
    if len(dst) == 0:
        iters.device_starts = iters.device_ends = None
        iters.device_lags = False
        return
    t = s.start[src]
    k = np.searchsorted(iters.starts, t, side="right") - 1
    ok = (k >= 0) & (t < iters.ends[np.maximum(k, 0)])
    k, dst = k[ok], dst[ok]
    lo = np.full(n, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n, -1, np.int64)
    np.minimum.at(lo, k, s.start[dst])
    np.maximum.at(hi, k, s.end[dst])
    none = hi < 0
    lo[none] = -1
    iters.device_starts, iters.device_ends = lo, hi
    iters.device_free_at = _device_free_at(s, int(iters.starts[0]), int(lo[0])) if n else -1
    late = (hi[:-1] > iters.starts[1:]) & ~none[:-1]
    iters.device_lags = bool(late.mean() >= 0.5) if n > 1 else False


def _device_free_at(s, host_start: int, first_work: int) -> int:
    """When the device could start iteration 0: its host start, or the end of device
    work launched earlier that still ran then (never past its own first work)."""
    if first_work < 0:
        return host_start
    dev = np.isin(s.kind, [int(k) for k in DEVICE_KINDS]) & (s.start < first_work)
    busy_until = int(s.end[dev].max()) if dev.any() else host_start
    return min(max(host_start, busy_until), first_work)


@dataclass
class Profile:
    """Per iteration: duration, main-thread op count and host time outside any op."""

    dur: np.ndarray
    ops: np.ndarray
    idle: np.ndarray
    op_idx: np.ndarray  # main-thread depth-0 ops (slice indexes), by start
    window: np.ndarray  # iteration of each op, -1 outside

    @classmethod
    def of(cls, trace: Trace, iters: Iterations, lane: int) -> Profile:
        s = trace.slices
        idx = trace.lane_slices(lane) if lane >= 0 else np.flatnonzero(s.depth == 0)
        idx = idx[(s.depth[idx] == 0) & (s.kind[idx] != int(Kind.PYTHON))]
        st = s.start[idx]
        if len(st) > 1 and not bool((st[1:] >= st[:-1]).all()):
            idx = idx[np.argsort(st, kind="stable")]
            st = s.start[idx]
        k = np.searchsorted(iters.starts, st, side="right") - 1
        k[(k < 0) | (st >= iters.ends[np.maximum(k, 0)])] = -1
        n = len(iters)
        inside = k >= 0
        ops = np.bincount(k[inside], minlength=n)
        busy_end = np.minimum(s.end[idx], iters.ends[np.maximum(k, 0)])
        busy = np.bincount(k[inside], weights=(busy_end - st)[inside], minlength=n)
        dur = iters.durations.astype(float)
        return cls(dur, ops, np.maximum(dur - busy, 0.0), idx, k)

    def heavy(self) -> np.ndarray:
        """More ops than a typical iteration, or much more time outside any op."""
        n_med, n_mad = _med_mad(self.ops)
        more_ops = self.ops > n_med + max(2.0, 0.1 * n_med, 3 * n_mad)
        d_med = float(np.median(self.dur))
        i_med, i_mad = _med_mad(self.idle)
        more_idle = self.idle > i_med + max(0.5 * d_med, 5 * i_mad)
        return more_ops | more_idle

    def slow(self) -> np.ndarray:
        return self.dur > WARMUP_SLOWER * float(np.median(self.dur))


def _med_mad(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, float)
    med = float(np.median(x))
    return med, 1.4826 * float(np.median(np.abs(x - med)))


def _leading(flag: np.ndarray, n: int) -> int:
    """Length of the leading run of ``flag`` (at most half the iterations)."""
    run = int(np.argmin(flag)) if not flag.all() else n
    return min(run, int(MAX_WARMUP_SHARE * n))


#: A later iteration this many times the median is slow enough to hold extra work.
LATER_SLOWER = 1.5
#: The slowest later iterations compared with a leading one, at most (recurring work such
#: as a checkpoint makes its iterations the slowest; more would only cost time).
MAX_LATER = 8
#: A leading iteration whose extra calls are at least this share (by time) calls a later
#: slow iteration makes on top of the regular ones too is that later work's first run.
RECURRING_SHARE = 0.5


def first_recurring(trace: Trace, iters: Iterations, prof: Profile, flag: np.ndarray,
                    lead: int, lane: int) -> int:
    """Where warm-up ends: at the first of the ``lead`` leading flagged iterations whose
    extra work recurs (a checkpoint, an evaluation on the first profiled step), not at
    ``lead``. A long first step is start-up only when its extra work is one-off: calls
    later steps do not make again (first-call set-up), or compile work (which recurs only
    when the program compiles anew). One that makes no call the others lack (the same
    calls, slower) stays warm-up: a slow start."""
    n = len(flag)
    if lead == 0:
        return 0
    later = np.arange(lead, n)
    slow = flag[lead:] | (prof.dur[lead:] > LATER_SLOWER * float(np.median(prof.dur)))
    later, regular = later[slow], later[~slow]
    if not len(later) or not len(regular):
        return lead
    later = later[np.argsort(-prof.dur[later], kind="stable")[:MAX_LATER]]
    again = {j: {c.label for c in extra_call_stats(trace, lane, iters.starts, iters.ends,
                                                   [j], regular)} for j in later.tolist()}
    for i in range(lead):
        mine = extra_call_stats(trace, lane, iters.starts, iters.ends, [i], regular)
        total = sum(c.ns for c in mine)
        if not mine or total <= 0 or any(is_start_up(c.label) for c in mine):
            continue
        if max(sum(c.ns for c in mine if c.label in got) for got in again.values()) \
                >= RECURRING_SHARE * total:
            return i
    return lead


def find_extra(trace: Trace, iters: Iterations, prof: Profile, heavy: np.ndarray, lead: int,
               lm: Landmarks) -> PeriodicExtra | None:
    """The schedule ``i % every == phase`` that the heavy iterations after warm-up follow."""
    n = len(heavy)
    idx = np.arange(n)
    h = idx[(idx >= lead) & heavy]
    if len(h) < 2:
        return None
    best = None
    for every in range(2, min(MAX_EVERY, n // 2) + 1):
        members_per = np.bincount(idx[lead:] % every, minlength=every)
        hits = np.bincount(h % every, minlength=every)
        phase = int(np.argmax(hits))
        hit, members = int(hits[phase]), int(members_per[phase])
        outside = len(h) - hit
        if hit >= max(2, 0.75 * members) and outside <= int(0.1 * n):
            score = hit - outside
            if best is None or score > best[0]:
                best = (score, every, phase)
    if best is None:
        return None
    _, every, phase = best
    holders = [int(i) for i in idx if i % every == phase and heavy[i]]
    regular = np.array([i for i in range(lead, n) if not heavy[i]], np.int64)
    if len(regular) == 0 or not recurs(trace, lm.main_lane, iters.starts, iters.ends,
                                       prof.dur, holders, regular)[0]:
        return None
    base = float(np.median(prof.dur[regular]))
    cost = float(np.mean(prof.dur[holders])) - base
    steady = prof.dur[lead:].sum()
    share = max(cost, 0.0) * len(holders) / steady if steady > 0 else 0.0
    name, rests = _extra_name(trace, iters, prof, holders, regular, lm)
    per_call = new_calls(trace, lm.main_lane, iters.starts, iters.ends, holders, regular)
    if per_call:
        name = f"a new call's set-up (input pipeline, iterator or traced function), {name}"
    elif opener := opens_window(trace, lm.main_lane, iters.starts, iters.ends, holders,
                                regular):
        per_call = True
        name = f"each cycle's own call of {opener} (the profiled window opens with it), {name}"
    return PeriodicExtra(every, phase, name, max(cost, 0.0), share, holders, rests, per_call)


def _extra_name(trace: Trace, iters: Iterations, prof: Profile, holders: list[int],
                regular: np.ndarray, lm: Landmarks) -> tuple[str, str]:
    """Best label of the extra work: untraced host time, forward-only passes, or its ops."""
    s = trace.slices
    hold = np.array(holders, np.int64)
    busy = prof.dur - prof.idle
    busy_x = float(np.median(busy[hold]) - np.median(busy[regular]))
    idle_x = float(np.median(prof.idle[hold]) - np.median(prof.idle[regular]))
    ops_x = float(prof.ops[hold].mean() - np.median(prof.ops[regular]))
    names, w = s.name[prof.op_idx], prof.window
    in_h, in_r = np.isin(w, hold), np.isin(w, regular)
    m = int(names.max(initial=-1)) + 1
    more = (np.bincount(names[in_h], minlength=m) / len(hold)
            - np.bincount(names[in_r], minlength=m) / len(regular)) >= 0.5
    steps = step_marker_ids(trace)
    more[steps[steps < m]] = False  # the step markers name steps, not what they do extra
    held_time = np.bincount(names[in_h], s.dur[prof.op_idx][in_h].astype(float), m)
    top = [int(i) for i in np.argsort(-np.where(more, held_time, -1.0))[:2] if more[i]]
    label = " / ".join(trace.names[i] for i in top)
    rests = (f"{len(holders)} iterations with {ops_x:+.0f} host ops and "
             f"{idle_x / 1e6:+.2f} ms outside any op (medians) vs a regular one")
    mb = iters.micro_batches
    same_bwd = mb is not None and lm.has_backward and (
        np.median(mb[hold]) == np.median(mb[regular]))
    seen = set(names[in_r].tolist())
    if same_bwd and ops_x >= 2 and top and all(i in seen for i in top):
        return f"forward without backward (evaluation?): {label}", rests
    if idle_x > max(busy_x, 0.0):  # more of the extra time is outside ops than in them
        what = "host time outside any profiled op (checkpoint save, I/O or logging?)"
        return (f"{what}, with {label}" if label else what), rests
    return label or "extra work", rests
