"""Which analyzed iterations are steady state, warm-up or periodic extras.

Findings are measured on steady-state iterations only: warm-up (first calls that
compile, allocate, autotune) is one-off work with no per-step speed-up, and every
N-th-step extras (checkpoint, evaluation) are reported on their own.  When the
iteration detector marks warm-up and extras itself (``Iterations.detector_from``
and ``periodic_extras``), those are used, together with a simple rule it lacks:
leading iterations each more than :data:`OUTLIER` x the median of the rest, and slower
than any of them, are warm-up (the detector needs several iterations to compare); later
iterations that recur every p-th step and are all clearly slower than the rest are
extras (one slow iteration is jitter). Where the later steps run their inner loop a
varying number of times (:attr:`.results.Iterations.repeats` differ by more than
:data:`REPEATS_VARY`: a k-means fit that runs until it converges, 18 to 38 jitted
updates a photo), a step is as long as its count: leading steps are warm-up only when
they are also slower per repetition (a first step of 38 updates at 14.1 ms beside
steps of 18 and 26 at 7.8 and 10.9 ms is a longer step, not start-up).

A loader that never gets ahead makes a slow step anywhere: where DataLoader workers (or an
uncached tf.data pipeline's threads) feed the run and the steady steps wait for their batch
:data:`BEHIND` of the time or more, no prefetch queue fills, so a leading step slower by its
wait for the next batch (at least :data:`BY_WAIT` of its excess in the fetch) is one of the
loader's slow steps, not a start (a capture of one-file-per-sample loading holds a 24 ms
first step that way, and its other capture a 26 ms last one, among steps of 2.5-12 ms).
Those leading steps stay steady state (:func:`loader_waits` gives the waits).

The warm-up found here is the one every surface shows: the analysis marks it on the
iterations (:func:`..pipeline.advisor_warmup`), keeping the detector's own start, which is
what this rule reads (``Iterations.detector_from``), so reading it again is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: An iteration this many times the median of the others is not steady state.
OUTLIER = 1.5
#: The steady steps wait for the loader's workers at least this share of their time: the
#: workers are behind (the share :data:`.input_removal.BEHIND` uses for the wait until a
#: batch's first element; here the steps' data-loading column).
BEHIND = 0.2
#: A leading step is slow by its wait when at least this share of its excess over the
#: steady median is wait beyond the steady steps' median wait.
BY_WAIT = 0.5
#: Later steps' inner-loop counts vary when they part by more than this share of their
#: median and by more than :data:`REPEATS_CALLS` calls: the step's length follows its data.
REPEATS_VARY = 0.1
REPEATS_CALLS = 2


@dataclass
class Phases:
    steady: np.ndarray  # bool per analyzed row
    warmup: np.ndarray  # int row indexes (leading)
    extras: np.ndarray  # int row indexes (later, slow)
    source: str  # how they were found, in words

    @property
    def n_steady(self) -> int:
        return int(self.steady.sum())


def phases(iters, durations: np.ndarray, whole_trace: bool,
           waits: np.ndarray | None = None) -> Phases:
    """The rows' phases; ``waits``: per row, the main thread's wait for DataLoader
    workers (:func:`loader_waits`), None where no workers feed the run."""
    n = len(durations)
    none = np.zeros(0, np.int64)
    if whole_trace or n == 0:
        return Phases(np.ones(n, bool), none, none, "whole trace")
    return _paced_start(_phases(iters, durations), durations, waits)


def _phases(iters, durations: np.ndarray) -> Phases:
    n = len(durations)
    own = _leading_outliers(iters, durations)
    marked = _marked(iters, n)
    if marked is None:
        return own
    # the detector's marks, plus any leading outlier it kept (it marks warm-up only with
    # enough iterations to compare; a 4.9 s first step next to a 79 ms one is warm-up too)
    k = max(len(marked.warmup), len(own.warmup))
    steady = marked.steady.copy()
    steady[:k] = False
    extras = np.union1d(marked.extras, own.extras).astype(np.int64)
    steady[extras] = False
    if not steady.any():
        return marked
    return Phases(steady, np.arange(k), extras, f"{marked.source}; {own.source}")


def loader_waits(breakdown, facts) -> np.ndarray | None:
    """Per row, the main thread's time in its loader's fetches, where DataLoader worker
    processes make the batches (run fact ``dataloader``) or a tf.data pipeline without a
    cache stage makes them on its own threads (``tf_data``, ``tf_data_cache``: no first
    pass fills anything later passes read); else None."""
    host = breakdown.host if breakdown is not None else None
    if host is None or facts is None:
        return None
    beside = facts.value("dataloader") == "workers" or (
        facts.value("tf_data") is not None and facts.value("tf_data_cache") == "none")
    return host.column("data_loading").astype(np.float64) if beside else None


def _paced_start(ph: Phases, durations: np.ndarray, waits: np.ndarray | None) -> Phases:
    """``ph`` with the trailing warm-up rows that are slow by their wait for workers that
    are behind in the steady steps (see the module docstring) made steady."""
    k = len(ph.warmup)
    if waits is None or not k or len(waits) != len(durations) or not ph.steady.any():
        return ph
    d = durations.astype(np.float64)
    st = ph.steady
    if waits[st].sum() < BEHIND * d[st].sum():
        return ph
    excess = d[ph.warmup] - np.median(d[st])
    waited = waits[ph.warmup] - np.median(waits[st])
    by_wait = (excess > 0) & (waited >= BY_WAIT * excess)
    j = k
    while j > 0 and by_wait[j - 1]:
        j -= 1
    if j == k:
        return ph
    steady = st.copy()
    steady[ph.warmup[j:]] = True
    return Phases(steady, ph.warmup[:j], ph.extras,
                  f"{ph.source}; leading steps slow by their wait for workers that are behind "
                  f"in the steady steps stay steady")


def _leading_outliers(iters, durations: np.ndarray) -> Phases:
    n = len(durations)
    d = durations.astype(np.float64)
    k = _warmup_count(d)
    rep = getattr(iters, "repeats", None)
    if k and rep is not None and len(rep) == n and _varies(rep[k:]):
        k = _warmup_count(d / np.maximum(rep, 1))  # slower per repetition, or not warm-up
    steady = np.ones(n, bool)
    steady[:k] = False
    rest = np.arange(k, n)
    extras = _periodic(d, rest)
    steady[extras] = False
    return Phases(steady, np.arange(k), extras,
                  f"leading iterations > {OUTLIER:g}x the median of the rest and slower than "
                  f"all of them are warm-up; "
                  f"later ones > {OUTLIER:g}x the median are extras")


def _varies(counts: np.ndarray) -> bool:
    """The counts part by more than :data:`REPEATS_VARY` of their median and
    :data:`REPEATS_CALLS` calls (a last step cut short by the capture's end parts by 2)."""
    if len(counts) < 2:
        return False
    spread = float(counts.max() - counts.min())
    return spread > max(REPEATS_CALLS, REPEATS_VARY * float(np.median(counts)))


def _warmup_count(d: np.ndarray) -> int:
    """The longest leading group (at most half the run) that is warm-up: even its fastest
    step is slower than every later one and than OUTLIER x their median (with widely
    varying steps, a 27 ms step between 4 ms and 46 ms ones is not warm-up).

    When the first j steps are all slower than the rest they are the j largest values, so
    the rest is the sorted tail and its median two sorted entries: O(n log n) for every j
    at once, not a median per j."""
    n = len(d)
    if n < 2:
        return 0
    j = np.arange(1, max(n // 2, 1) + 1)
    j = j[j < n]
    head_min = np.minimum.accumulate(d)[j - 1]
    tail_max = np.maximum.accumulate(d[::-1])[::-1][j]
    ok = head_min > tail_max
    if not ok.any():
        return 0
    j, head_min, tail_max = j[ok], head_min[ok], tail_max[ok]
    desc = np.sort(d)[::-1]
    m = n - j  # length of each tail; its median is the mean of its two middle entries
    median = (desc[j + (m - 1) // 2] + desc[j + m // 2]) / 2
    good = head_min > np.maximum(OUTLIER * median, tail_max)
    return int(j[good].max()) if good.any() else 0


#: Every-N-th iterations are extras when even the fastest of them is this much slower
#: than the median of the others, and their median this much.
PERIODIC_MIN, PERIODIC_MEDIAN = 1.2, 1.25
#: Fewer steady iterations than this cannot show a period.
MIN_FOR_PERIOD = 6


def _periodic(d: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Rows of ``rest`` that recur every p-th iteration (p >= 2, at least two of them) and
    are all slower than every other iteration and clearly slower than their median; the
    period with the largest excess wins.

    Being slower than every other iteration makes such a class the k slowest rows for
    its size k, so only the n/2 top-k sets are tried (each checked for being one whole
    residue class), not every (period, phase) pair. A set of k positions is every p-th
    one exactly when the gcd of their distances to one of them is p and they span
    (k - 1) p, so running gcd / min / max pick the few candidate sizes in O(n log n)."""
    if len(rest) < MIN_FOR_PERIOD:
        return np.zeros(0, np.int64)
    dr = d[rest]
    order = np.argsort(-dr, kind="stable")
    best, best_key = np.zeros(0, np.int64), (0.0, 0, 0)
    for k in _class_sizes(dr, order):
        cls = _residue_class(np.sort(order[:k]), len(rest))
        if cls is None:
            continue
        hold, other = dr[cls[2]], np.delete(dr, cls[2])
        med = float(np.median(other))
        if hold.min() > PERIODIC_MIN * med and np.median(hold) > PERIODIC_MEDIAN * med:
            key = (float((hold - med).sum()), -cls[0], -cls[1])
            if key > best_key:
                best, best_key = rest[cls[2]], key
    return best


def _class_sizes(dr: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The sizes k whose k slowest rows (``order[:k]``) are strictly slower than the rest
    and form one residue class (period 2 to n/2, none missing at either end)."""
    n = len(order)
    ks = np.arange(2, (n + 1) // 2 + 1)
    gap = np.gcd.accumulate(np.abs(order - order[0]))[ks - 1]
    lo = np.minimum.accumulate(order)[ks - 1]
    hi = np.maximum.accumulate(order)[ks - 1]
    ok = (dr[order[ks - 1]] > dr[order[ks]]) & (gap >= 2) & (gap <= n // 2)
    ok &= (lo < gap) & (hi + gap >= n) & (hi - lo == (ks - 1) * gap)
    return ks[ok]


def _residue_class(pos: np.ndarray, n: int) -> tuple[int, int, np.ndarray] | None:
    """(period, phase, pos) when the sorted positions are every p-th of ``range(n)`` from
    their first (p from 2 to n/2, none missing at either end); else None."""
    p = int(pos[1] - pos[0])
    if p < 2 or p > n // 2 or pos[0] >= p or pos[-1] + p < n:
        return None
    if not np.all(np.diff(pos) == p):
        return None
    return p, int(pos[0]), pos


def _marked(iters, n: int) -> Phases | None:
    """The detector's own marking (its ``Iterations.detector_from`` and
    ``periodic_extras``), when it made one for these rows: its start, not the warm-up
    shown, which is this rule's own result once the analysis has marked it."""
    if getattr(iters, "warmup", None) is None or len(iters) != n:
        return None
    start = min(int(iters.detector_from), n - 1)
    extras = sorted({int(i) for x in iters.periodic_extras for i in x.iterations
                     if start <= int(i) < n})
    steady = np.ones(n, bool)
    steady[:start] = False
    steady[extras] = False
    if not steady.any():
        return None
    return Phases(steady, np.arange(start), np.asarray(extras, np.int64),
                  "marked by the iteration detector")
