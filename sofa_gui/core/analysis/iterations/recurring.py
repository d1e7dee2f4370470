"""Is there extra work that recurs in some iterations, or are they only slower?

Some iterations being slower on a schedule (every 2nd, every 6th) is not enough to call
them periodic extra work (checkpoint, evaluation, logging): two DataLoader workers that
hand over batches alternately make long and short steps, and machine noise can line up
with a period by chance.  Extra work recurs when the slow iterations make calls the
others do not make (a name absent from the others, or more calls of it than any regular
iteration makes), in most of them, and either there are at least
:data:`MIN_OCCURRENCES` of them or each stands out from the run's own noise
(:func:`stands_out`).  Waits (the same fetch or collective, longer) are not extra work,
nor is input: a step that starts its loader again (a new epoch's ``iter(loader)``) fetches
twice and runs the iterator's own ops (:mod:`..loader_restarts`), and those calls are left
out of the comparison.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind, Trace
from ..intervals import union
from ..loader_restarts import fetch_intervals, restarts
from ..roles import SETUP, step_marker_ids
from .dispatch import dispatch_ids

#: With this many slow iterations that share extra calls, the extra work recurs.
MIN_OCCURRENCES = 3
#: Fewer slow iterations must each exceed the regular median by this many robust SDs
#: (1.4826 x MAD of the regular iterations), and by this share of the median.
NOISE_SDS, MIN_EXCESS = 5.0, 0.05
#: A call is extra when it is in at least this share of the slow iterations.
IN_MOST = 2 / 3
#: Set-up in at most this share of the regular iterations (a call's first batch) is rare.
RARE = 0.1
_KINDS = (int(Kind.CPU_OP), int(Kind.ANNOTATION), int(Kind.RUNTIME), int(Kind.PYTHON))


def extra_calls(trace: Trace, lane: int, starts: np.ndarray, ends: np.ndarray,
                extra: np.ndarray, regular: np.ndarray) -> list[str]:
    """Names (trailing numbers stripped) that the ``extra`` iterations call more often than
    every-but-a-few ``regular`` ones do (median + max(1, 3 robust SDs) calls), in at least
    :data:`IN_MOST` of them; most time first.  Looked for on ``lane`` (the loop's thread)."""
    return [c.label for c in extra_call_stats(trace, lane, starts, ends, extra, regular)]


@dataclass(frozen=True)
class ExtraCall:
    """A name the extra iterations call more often than the regular ones: its label, its
    time in the extra iterations (ns) and whether no regular iteration calls it at all."""

    label: str
    ns: float
    theirs_only: bool


def extra_call_stats(trace: Trace, lane: int, starts: np.ndarray, ends: np.ndarray,
                     extra: np.ndarray, regular: np.ndarray) -> list[ExtraCall]:
    """The calls of :func:`extra_calls`, each with its time and whether it is absent from
    every regular iteration; most time first."""
    extra, regular = np.asarray(extra, np.int64), np.asarray(regular, np.int64)
    if lane < 0 or not len(extra) or not len(regular):
        return []
    s = trace.slices
    idx = trace.lane_slices(lane)
    idx = idx[np.isin(s.kind[idx], _KINDS) & ~np.isin(s.name[idx], step_marker_ids(trace))]
    idx = idx[~_loader_own(trace, lane, starts, ends, s.start[idx])]
    w = np.searchsorted(starts, s.start[idx], side="right") - 1
    ok = (w >= 0) & (s.start[idx] < ends[np.maximum(w, 0)])
    idx, w = idx[ok], w[ok]
    base = trace.memo("name_base", lambda: name_base(trace.names))
    names = base[s.name[idx]]
    in_extra = np.isin(w, extra)
    cand = np.unique(names[in_extra])
    if not len(cand):
        return []
    pos = {int(r): k for k, r in enumerate(np.concatenate([extra, regular]).tolist())}
    keep = np.isin(names, cand) & np.isin(w, list(pos))
    col = np.searchsorted(cand, names[keep])
    row = np.array([pos[int(x)] for x in w[keep].tolist()], np.int64)
    counts = np.zeros((len(pos), len(cand)), np.int64)
    np.add.at(counts, (row, col), 1)
    ex, reg = counts[:len(extra)], counts[len(extra):]
    med = np.median(reg, axis=0)
    mad = 1.4826 * np.median(np.abs(reg - med), axis=0)
    more = ex > (med + np.maximum(1.0, 3.0 * mad))[None, :]
    hit = more.mean(axis=0) >= IN_MOST
    if not hit.any():
        return []
    t = np.bincount(col, weights=s.dur[idx[keep]].astype(np.float64) * (row < len(extra)),
                    minlength=len(cand))
    labels = trace.memo("recurring.base_label", lambda: _base_label(trace.names, base))
    order = np.flatnonzero(hit)[np.argsort(-t[hit], kind="stable")]
    only = (reg.max(axis=0) == 0) & (ex.min(axis=0) > 0)
    return [ExtraCall(labels[int(cand[k])], float(t[k]), bool(only[k])) for k in order]


def _loader_own(trace: Trace, lane: int, starts: np.ndarray, ends: np.ndarray,
                t: np.ndarray) -> np.ndarray:
    """Per time ``t``: inside an input fetch or a restart of the loader between two
    fetches (:mod:`..loader_restarts`).  Fetching is the same call in every step, and a
    step that starts the loader again fetches more often and calls the iterator's own ops
    (its sampler's permutation): input, not extra work."""
    a, b = fetch_intervals(trace, lane)
    back = restarts(trace, lane, np.asarray(starts, np.int64), np.asarray(ends, np.int64))
    a, b = union(np.concatenate([a, back.gap_start]), np.concatenate([b, back.gap_end]))
    if not len(a):
        return np.zeros(len(t), bool)
    k = np.searchsorted(a, t, side="right") - 1
    return (k >= 0) & (t < b[np.maximum(k, 0)])


def stands_out(durations: np.ndarray, extra: np.ndarray, regular: np.ndarray) -> bool:
    """Every extra iteration is longer than the regular median by :data:`NOISE_SDS` robust
    SDs of the regular iterations and by :data:`MIN_EXCESS` of that median."""
    d = np.asarray(durations, np.float64)
    reg = d[np.asarray(regular, np.int64)]
    if not len(reg) or not len(extra):
        return False
    med = float(np.median(reg))
    sd = 1.4826 * float(np.median(np.abs(reg - med)))
    return bool(d[np.asarray(extra, np.int64)].min() - med > max(NOISE_SDS * sd,
                                                                 MIN_EXCESS * med))


def slowest(durations: np.ndarray, extra, regular) -> bool:
    """Every extra iteration is longer than every regular one."""
    d = np.asarray(durations, np.float64)
    ex, reg = np.asarray(extra, np.int64), np.asarray(regular, np.int64)
    return bool(len(ex) and len(reg) and d[ex].min() > d[reg].max())


def own_work(stats: list[ExtraCall]) -> bool:
    """Every extra iteration makes a call that no regular iteration makes (a checkpoint's
    ``device_get``, an evaluation loop): a code path of their own, which chance (a busy
    machine, the collector) does not add to a step, only slows."""
    return any(c.theirs_only for c in stats)


def recurs(trace: Trace, lane: int, starts: np.ndarray, ends: np.ndarray,
           durations: np.ndarray, extra, regular) -> tuple[bool, str]:
    """(whether the ``extra`` iterations hold recurring extra work, why in words)."""
    stats = extra_call_stats(trace, lane, starts, ends, extra, regular)
    calls = [c.label for c in stats]
    n = len(extra)
    if not calls:
        return False, (f"the {n} slower iterations make no call the others lack: the same "
                       f"work (or waits), slower")
    listed = ", ".join(calls[:3])
    if n >= MIN_OCCURRENCES:
        return True, f"{n} iterations make calls the others do not: {listed}"
    if stands_out(durations, extra, regular):
        return True, (f"{n} iterations make calls the others do not ({listed}) and each "
                      f"stands out from the run's noise")
    own = [c.label for c in stats if c.theirs_only]
    if n >= 2 and own_work(stats) and slowest(durations, extra, regular):
        return True, (f"{n} iterations, each slower than every other, make calls no other "
                      f"iteration makes ({', '.join(own[:3])}): the same extra work in each")
    return False, (f"only {n} slower iterations with extra calls ({listed}), within the "
                   f"run's noise: not shown to recur")


def new_calls(trace: Trace, lane: int, starts: np.ndarray, ends: np.ndarray, extra,
              regular) -> bool:
    """Each ``extra`` iteration starts a new high-level call, and that is all it adds: it
    builds an input pipeline or an iterator, or traces a function (:data:`..roles.SETUP`),
    which few regular iterations do (:data:`RARE`), and runs the step's own call (the name
    with most time in the regular iterations, step markers aside) no more often than a
    regular one.  A Keras ``evaluate`` / ``predict`` called once per step runs several
    batches, each an iteration: the last batch holds the call's end (its metrics'
    results) and the next call's set-up, every call.  That is each step's own cost, not
    work that some steps add and others lack; an evaluation that starts its own pipeline
    runs more of the step's calls (its test steps), and is extra work."""
    extra, regular = np.asarray(extra, np.int64), np.asarray(regular, np.int64)
    if lane < 0 or not len(extra) or not len(regular):
        return False
    s = trace.slices
    idx = trace.lane_slices(lane)
    idx = idx[np.isin(s.kind[idx], _KINDS)]
    w = np.searchsorted(starts, s.start[idx], side="right") - 1
    ok = (w >= 0) & (s.start[idx] < ends[np.maximum(w, 0)])
    idx, w = idx[ok], w[ok]
    setup = np.isin(s.name[idx], trace.name_ids(lambda n: bool(SETUP.search(n))))
    per = np.bincount(w[setup], minlength=len(starts))
    if not (per[extra] > 0).all() or (per[regular] > 0).mean() > RARE:
        return False
    reg = np.isin(w, regular) & ~np.isin(s.name[idx], step_marker_ids(trace))
    if not reg.any():
        return False
    t = np.bincount(s.name[idx[reg]], weights=s.dur[idx[reg]].astype(np.float64))
    calls = np.bincount(w[s.name[idx] == int(np.argmax(t))], minlength=len(starts))
    return bool(calls[extra].max() <= np.median(calls[regular]))


def opens_window(trace: Trace, lane: int, starts: np.ndarray, ends: np.ndarray, extra,
                 regular) -> str:
    """The compiled function (its dispatch name, "" where none) that every ``extra``
    iteration calls (but the window's last, where the window may end first), no regular
    one does, and the thread also calls before the first
    iteration: the profiled window opens with it as each cycle does.  A loop whose
    iterations are calls inside one step (a decoder step called once per output token)
    starts each step, the first included, with a call of its own (the request's encoder):
    each step's own start, not work a few steps add; an evaluation or a checkpoint every
    few steps comes after the steps it follows, not before the first."""
    extra, regular = np.asarray(extra, np.int64), np.asarray(regular, np.int64)
    if lane < 0 or not len(extra) or not len(regular) or not len(starts):
        return ""
    s = trace.slices
    idx = trace.lane_slices(lane)
    idx = idx[np.isin(s.name[idx], dispatch_ids(trace))]
    w = np.searchsorted(starts, s.start[idx], side="right") - 1
    inside = (w >= 0) & (s.start[idx] < ends[np.maximum(w, 0)])
    first = set(s.name[idx[s.start[idx] < starts[0]]].tolist())
    for name in first - set(s.name[idx[inside & np.isin(w, regular)]].tolist()):
        calls = np.bincount(w[inside & (s.name[idx] == name)], minlength=len(starts))
        if (calls[extra[extra < len(starts) - 1]] > 0).all():  # the window may end first
            return re.sub(r"^EagerLocalExecute: ", "", trace.names[int(name)])
    return ""


def name_base(names: list[str]) -> np.ndarray:
    """Name id -> id of the name without trailing digits and separators."""
    strip = [re.sub(r"[\s#._-]*\d+$", "", n) for n in names]
    _, inv = np.unique(np.asarray(strip, dtype=object), return_inverse=True)
    return inv.astype(np.int64)


def _base_label(names: list[str], base: np.ndarray) -> dict[int, str]:
    out: dict[int, str] = {}
    for i, b in enumerate(base.tolist()):
        out.setdefault(b, re.sub(r"[\s#._-]*\d+$", "", names[i]) or names[i])
    return out
