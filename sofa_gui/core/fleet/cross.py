"""Cross-rank analysis over the per-rank summaries: what only shows across ranks.

* **Alignment**: columns are iteration labels (``ProfilerStep#N``) when every rank has
  labels and at least half of the ranks share each kept label; else iteration order.
* **Own time** of a rank in an iteration = its wall time minus exposed communication:
  in synchronous data parallelism every rank waits for the slowest one inside the
  collectives, so wall times are nearly equal and the straggler is the rank that
  spends the *most time outside* collectives (the others wait for it there).
* **Stragglers**: own time above the iteration's median rank by more than
  ``max(5% of the median iteration, 4 robust SDs (1.4826 x MAD))``; with two ranks, above
  the faster one by more than 5% of the median iteration.  The *cause* is named as the
  balance model reads the straggling iterations (:mod:`..analysis.balance`): **op work
  that moves** (its ops take longer than the ranks' mean) or **time that is not work**
  (time outside ops above the typical rank's: Python outside the framework, a sleep, I/O,
  waits for input), with the breakdown category (communication excluded) of that kind
  in which its excess over the median rank is largest.
* **Run facts** of the job: those every rank that proves them agrees on
  (:mod:`.facts`); they choose the findings' fixes as ``analyze`` does.
* **Collective wait skew** per rank: median over iterations of how much longer the
  rank sits in exposed communication than the rank that waits least.
* **What balancing gains** (a straggler holding the collectives): the balanced step of
  :mod:`..analysis.balance` over the aligned iterations: the ranks' mean op work, the
  typical rank's time outside ops and the collective's own cost.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..analysis.balance import (
    MOVES,
    SHAPE_WORDS,
    STRAGGLER_MIN_FRACTION,
    WORK_CATEGORIES,
    Balanced,
    balance,
    excess_of,
    shape_of,
)
from ..analysis.facts_base import RunFacts
from ..analysis.findings.fleet_rules import FleetFinding, fleet_finding
from ..analysis.results import us
from .facts import job_facts
from .summary import RankSummary

#: A rank straggles in an iteration when its own time exceeds the median rank's by
#: more than :data:`STRAGGLER_MIN_FRACTION` of the median iteration (and more than the
#: rank-to-rank noise: this many robust SDs).
ROBUST_SDS = 4.0
#: Load imbalance: spread (p90 - p10) of ranks' own time, as a share of the iteration.
IMBALANCE_FRACTION = 0.10
#: A top finding shared by at least this share of ranks becomes a fleet finding.
COMMON_FINDING_SHARE = 0.5
WAIT = "communication"
#: Categories that only say "no op here": they name no cause beyond the shape's words.
UNNAMED = frozenset({"other", "idle_other", "unknown"})


@dataclass
class Straggler:
    """One straggling rank.  ``cause``: the shape of its extra time (:data:`MOVES`, op
    work that moves, or time that is not work), ``moved_ns`` / ``removed_ns`` its two
    kinds per straggling iteration; ``category``: the breakdown category of that kind
    with the largest excess over the median rank (``category_ns``)."""

    rank: int
    iterations: list[int]  # column indexes
    excess_ns: float  # mean own-time excess over the median rank, per straggling iteration
    total_excess_ns: float
    fraction: float  # excess / median iteration
    cause: str
    moved_ns: float  # op work above the ranks' mean, per straggling iteration
    removed_ns: float  # time outside ops above the typical rank's, per straggling iteration
    category: str
    category_ns: float
    others: dict[str, float]  # next categories' excess, ns

    def cause_text(self) -> str:
        """"time that is not work (+30.52 ms outside ops over the typical rank)" or "op
        work that moves (+22.00 ms of ops over the ranks' mean; its largest category:
        backward, +40.10 ms over the median rank)"."""
        amount = (f"+{self.moved_ns / 1e6:.2f} ms of ops over the ranks' mean"
                  if self.cause == MOVES else
                  f"+{self.removed_ns / 1e6:.2f} ms outside ops over the typical rank")
        named = (f"; its largest category: {self.category}, +{self.category_ns / 1e6:.2f} ms "
                 "over the median rank" if self.category not in UNNAMED else "")
        return f"{SHAPE_WORDS[self.cause]} ({amount}{named})"

    def to_dict(self, labels: list[str]) -> dict:
        explains = self.category_ns / self.excess_ns if self.excess_ns > 0 else 0.0
        return {"rank": self.rank, "iterations": list(self.iterations),
                "labels": [labels[j] for j in self.iterations],
                "excess_us": us(self.excess_ns), "total_excess_us": us(self.total_excess_ns),
                "excess_fraction": round(self.fraction, 4), "cause": self.cause,
                "cause_text": self.cause_text(), "moved_us": us(self.moved_ns),
                "removed_us": us(self.removed_ns), "category": self.category,
                "category_excess_us": us(self.category_ns),
                "category_explains": round(explains, 3),
                "other_categories_us": {k: us(v) for k, v in self.others.items()}}


@dataclass
class FleetResult:
    """Everything ``fleet`` prints; matrices are (ranks x columns) float ns, NaN = absent."""

    engine: dict
    summaries: list[RankSummary]
    alignment: str
    labels: list[str]
    categories: list[str]
    iteration: np.ndarray
    breakdown: np.ndarray  # (categories x ranks x columns)
    own: np.ndarray
    comm: np.ndarray
    stragglers: list[Straggler] = field(default_factory=list)
    findings: list[FleetFinding] = field(default_factory=list)
    facts: RunFacts = field(default_factory=RunFacts)  # the job's, agreed across ranks

    @property
    def ranks(self) -> list[int]:
        return [s.rank for s in self.summaries]

    def category(self, name: str) -> np.ndarray:
        return self.breakdown[self.categories.index(name)]

    def median_rank(self) -> int | None:
        """The rank whose median iteration time is the median of all ranks'."""
        med = _nanmedian_rows(self.iteration)
        ok = np.flatnonzero(~np.isnan(med))
        if not len(ok):
            return None
        order = ok[np.argsort(med[ok], kind="stable")]
        return self.ranks[int(order[(len(order) - 1) // 2])]

    def wait_skew(self) -> np.ndarray:
        """Per rank: median over iterations of exposed communication above the least-waiting
        rank's (ns; NaN for ranks without data)."""
        if not self.comm.size:
            return np.full(len(self.summaries), np.nan)
        with np.errstate(all="ignore"):
            low = np.nanmin(np.where(np.isnan(self.comm), np.inf, self.comm), axis=0)
            return _nanmedian_rows(self.comm - low[None, :])

    def to_dict(self) -> dict:
        def row(a):
            return [None if np.isnan(v) else us(float(v)) for v in a]

        skew = self.wait_skew()
        return {
            "engine": self.engine,
            "run": self.facts.to_dict(),
            "ranks": [_rank_dict(s) for s in self.summaries],
            "alignment": self.alignment,
            "iterations": list(self.labels),
            "iteration_us": [row(r) for r in self.iteration],
            "categories": list(self.categories),
            "breakdown_us": {c: [row(r) for r in self.breakdown[k]]
                             for k, c in enumerate(self.categories)},
            "own_us": [row(r) for r in self.own],
            "collective_wait": {
                "exposed_us": [row(r) for r in self.comm],
                "skew_us": row(skew),
            },
            "median_rank": self.median_rank(),
            "stragglers": [s.to_dict(self.labels) for s in self.stragglers],
            "findings": [f.to_dict() for f in self.findings],
        }


def _rank_dict(s: RankSummary) -> dict:
    return {"rank": s.rank, "path": s.path, "events": s.events, "error": s.error,
            "iterations": {"count": len(s.durations), "median_us": s.median_us(),
                           "method": s.method},
            "top_finding": s.findings[0] if s.findings else None,
            "worker": s.worker, "seconds": s.seconds, "cpu_seconds": s.cpu_seconds,
            "from_cache": s.from_cache}


def _nanmedian_rows(a: np.ndarray) -> np.ndarray:
    out = np.full(a.shape[0], np.nan)
    for i, r in enumerate(a):
        v = r[~np.isnan(r)]
        if len(v):
            out[i] = float(np.median(v))
    return out


def _nanmedian_cols(a: np.ndarray) -> np.ndarray:
    return _nanmedian_rows(a.T) if a.size else np.zeros(a.shape[1] if a.ndim == 2 else 0)


# -- ranks and alignment -------------------------------------------------------------------
def final_ranks(summaries: list[RankSummary]) -> list[RankSummary]:
    """Prefer ``distributedInfo.rank`` when every readable rank has a distinct one."""
    ok = [s for s in summaries if s.ok]
    hr = [s.header_rank for s in ok]
    taken = {s.rank for s in summaries if not s.ok}
    if ok and all(r is not None for r in hr) and len(set(hr)) == len(hr) \
            and not (set(hr) & taken):
        for s in ok:
            s.rank = int(s.header_rank)
    return sorted(summaries, key=lambda s: s.rank)


def _natural(label: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", label)]


def align(summaries: list[RankSummary]) -> tuple[str, list[str], list[list[int]]]:
    """("label"|"order", column labels, per rank: column -> its iteration index or -1)."""
    ok = [s for s in summaries if s.ok and len(s.durations)]
    if ok and all(s.labels for s in ok):
        counts = Counter(lb for s in ok for lb in set(s.labels))
        cols = sorted((lb for lb, c in counts.items() if c * 2 >= len(ok)), key=_natural)
        if cols:
            where = [{lb: i for i, lb in enumerate(s.labels)} for s in summaries]
            return "label", cols, [[w.get(c, -1) for c in cols] for w in where]
    n = max((len(s.durations) for s in ok), default=0)
    cols = [f"#{j}" for j in range(n)]
    return ("order" if n else "none"), cols, [
        [j if j < len(s.durations) else -1 for j in range(n)] for s in summaries]


def _fill(summaries, index, values) -> np.ndarray:
    """(ranks x columns) float ns from per-rank int lists, NaN where absent."""
    n = len(index[0]) if index else 0
    out = np.full((len(summaries), n), np.nan)
    for r, (s, idx) in enumerate(zip(summaries, index)):
        v = values(s)
        if v is None or not len(v):
            continue
        idx = np.asarray(idx, np.int64)
        ok = idx >= 0
        out[r, ok] = np.asarray(v, np.float64)[idx[ok]]
    return out


# -- the analysis ----------------------------------------------------------------------------
def cross_rank(summaries: list[RankSummary], engine: dict | None = None) -> FleetResult:
    """Align, build the matrices, find stragglers and fleet findings."""
    summaries = final_ranks(list(summaries))
    alignment, labels, index = align(summaries)
    cats = list(dict.fromkeys(c for s in summaries if s.ok for c in s.categories))
    iteration = _fill(summaries, index, lambda s: s.durations)
    bd = np.stack([_fill(summaries, index, lambda s, c=c: s.column(c) if s.ok else None)
                   for c in cats]) if cats else np.zeros((0, len(summaries), len(labels)))
    comm = bd[cats.index(WAIT)] if WAIT in cats else np.where(np.isnan(iteration), np.nan, 0.0)
    own = iteration - comm
    res = FleetResult(engine or {}, summaries, alignment, labels, cats, iteration, bd, own, comm,
                      facts=job_facts(summaries))
    res.stragglers = find_stragglers(res)
    res.findings = fleet_findings(res)
    return res


def find_stragglers(res: FleetResult) -> list[Straggler]:
    """Ranks whose own time stands out from the median rank's, worst (total excess) first."""
    own, it = res.own, res.iteration
    if own.shape[0] < 2 or not own.size:
        return []
    med = _nanmedian_cols(own)
    dev = np.abs(own - med[None, :])
    mad = _nanmedian_cols(dev)
    med_it = _nanmedian_cols(it)
    # two ranks have no median rank and no spread to measure noise by: the slower one is
    # compared with the faster one, on the fixed threshold alone
    pair = np.sum(~np.isnan(own), axis=0) == 2
    with np.errstate(all="ignore"):
        med = np.where(pair, np.nanmin(np.where(np.isnan(own), np.inf, own), axis=0), med)
    mad = np.where(pair, 0.0, mad)
    thresh = np.maximum(STRAGGLER_MIN_FRACTION * med_it, ROBUST_SDS * 1.4826 * mad)
    excess = own - med[None, :]
    with np.errstate(invalid="ignore"):
        flagged = (excess > thresh[None, :]) & (np.sum(~np.isnan(own), axis=0) >= 2)[None, :]
    out = []
    work = work_matrix(res)
    for r in np.flatnonzero(flagged.any(axis=1)).tolist():
        cols = np.flatnonzero(flagged[r]).tolist()
        ex = excess[r, cols]
        moved, removed = _kinds_of_excess(res.own[:, cols], work[:, cols], r)
        shape = shape_of(moved, removed)
        diffs = _category_excess(res, r, cols)
        mine = {k: v for k, v in diffs.items() if (k in WORK_CATEGORIES) == (shape == MOVES)}
        category = max(mine, key=mine.get) if mine else "unknown"
        others = dict(sorted(((k, v) for k, v in diffs.items() if k != category and v > 0),
                             key=lambda kv: -kv[1])[:3])
        frac = float(np.mean(ex / med_it[cols]))
        out.append(Straggler(res.ranks[r], cols, float(np.mean(ex)), float(np.sum(ex)), frac,
                             shape, moved, removed, category, diffs.get(category, 0.0),
                             others))
    out.sort(key=lambda s: -s.total_excess_ns)
    return out


def work_matrix(res: FleetResult) -> np.ndarray:
    """(ranks x columns) ns of op work: the breakdown's work categories."""
    return sum((res.breakdown[k] for k, c in enumerate(res.categories)
                if c in WORK_CATEGORIES), np.zeros_like(res.iteration))


def _kinds_of_excess(own: np.ndarray, work: np.ndarray, r: int) -> tuple[float, float]:
    """(moved, removed) ns per iteration of rank ``r`` in the columns of ``own`` and
    ``work`` (ranks x iterations) that every rank has: its op work above the ranks' mean
    and its time outside ops above the typical rank's
    (:func:`..analysis.balance.excess_of`)."""
    both = np.all(np.isfinite(own) & np.isfinite(work), axis=0)
    if not both.any():
        return 0.0, 0.0
    moved, removed = excess_of(r, np.maximum(own[:, both], 0.0), work[:, both])
    n = int(both.sum())
    return moved / n, removed / n


def _category_excess(res: FleetResult, r: int, cols: list[int]) -> dict[str, float]:
    """Mean excess of rank ``r`` over the median rank (of two ranks: the other one) per
    category, in ``cols``."""
    out = {}
    for k, c in enumerate(res.categories):
        if c == WAIT:
            continue
        m = res.breakdown[k]
        others = np.delete(m[:, cols], r, axis=0)
        med = others[0] if len(others) == 1 else _nanmedian_cols(m[:, cols])
        d = m[r, cols] - med
        if not np.all(np.isnan(d)):
            out[c] = float(np.nanmean(d))
    return out


# -- findings ---------------------------------------------------------------------------------
def fleet_findings(res: FleetResult) -> list[FleetFinding]:
    """Findings that only show across ranks; each says what it rests on and how sure."""
    out = []
    if res.stragglers:
        out.append(_straggler_finding(res, res.stragglers[0]))
    held = bool(out) and out[0].id == "straggler_holds_collectives"
    for f in (_imbalance_finding(res), _common_finding(res)):
        # the ranks' wait in collectives is the straggler's: its finding estimates what
        # balancing gains, a shared communication finding would count the wait as removable
        if f is not None and not (held and f.id == f"fleet_{WAIT}_bound"):
            out.append(f)
    return out


def _straggler_finding(res: FleetResult, s: Straggler) -> FleetFinding:
    r = res.ranks.index(s.rank)
    cols = s.iterations
    others = [i for i in range(len(res.ranks)) if i != r]
    wait = res.comm[others][:, cols] - res.comm[r, cols][None, :]
    extra_wait = float(np.nanmedian(wait)) if others and not np.all(np.isnan(wait)) else 0.0
    held = s.excess_ns > 0 and 0.5 <= extra_wait / s.excess_ns <= 1.5
    n = len(res.ranks)
    what = (f"rank {s.rank} spends {us(s.excess_ns) / 1000:.2f} ms ({s.fraction:.0%}) more per "
            f"iteration outside collectives than the median rank in {len(cols)} of "
            f"{len(res.labels)} iterations; the excess is {s.cause_text()}")
    share = round(s.fraction, 4)
    bal = balanced(res)
    if held:
        return fleet_finding(
            "straggler_holds_collectives", share,
            what + f"; the other ranks wait {extra_wait / 1e6:.2f} ms longer in "
                   "communication, matching the straggler's excess."
            + (f" {bal.basis()}" if bal is not None else ""),
            title=f"Rank {s.rank} holds the other {n - 1} ranks in collectives",
            factor="others_wait_for_it", category=s.category, shape=s.cause, ranks=[s.rank],
            iterations=cols, speedup=bal.speedup if bal is not None else None,
            facts=res.facts)
    return fleet_finding(
        "straggler", share,
        what + "; the other ranks' collective wait does not show a matching "
               f"wait ({max(extra_wait, 0.0) / 1e6:.2f} ms more), so whether it "
               "delays them is not shown by these traces.",
        title=f"Rank {s.rank} is slower than the median rank", factor="wait_not_matched",
        category=s.category, shape=s.cause, ranks=[s.rank], iterations=cols, facts=res.facts)


def balanced(res: FleetResult) -> Balanced | None:
    """The job's balanced step (:func:`..analysis.balance.balance`) over the aligned
    iterations every rank has."""
    if not res.breakdown.size:
        return None
    return balance(res.ranks, res.iteration, res.comm, work_matrix(res))


def _imbalance_finding(res: FleetResult) -> FleetFinding | None:
    """Broad spread of own time across many ranks (not one straggler)."""
    per_rank = _nanmedian_rows(res.own)
    ok = per_rank[~np.isnan(per_rank)]
    if len(ok) < 4:
        return None
    med_it = float(np.nanmedian(_nanmedian_rows(res.iteration)))
    p10, p90 = np.percentile(ok, [10, 90])
    spread = (p90 - p10) / med_it if med_it > 0 else 0.0
    if spread < IMBALANCE_FRACTION:
        return None
    slow = [res.ranks[i] for i in np.flatnonzero(per_rank > p90).tolist()]
    return fleet_finding(
        "load_imbalance", round(spread / 2, 4),
        f"ranks' own time per iteration spreads by {spread:.0%} of the iteration between the "
        f"10th and 90th percentile rank ({len(ok)} ranks); the fast ranks wait for the slow "
        "ones in every collective. Slowest: " + ", ".join(str(r) for r in slow[:8]),
        factor="spread_of_medians", ranks=slow, facts=res.facts)


def _common_finding(res: FleetResult) -> FleetFinding | None:
    tops = Counter(s.findings[0]["id"] for s in res.summaries if s.ok and s.findings)
    ok = sum(1 for s in res.summaries if s.ok)
    if not tops or ok < 2:
        return None
    fid, n = tops.most_common(1)[0]
    if n < COMMON_FINDING_SHARE * ok:
        return None
    first = next(s.findings[0] for s in res.summaries if s.ok and s.findings
                 and s.findings[0]["id"] == fid)
    shares = [s.findings[0]["share"] for s in res.summaries if s.ok and s.findings
              and s.findings[0]["id"] == fid]
    med = float(np.median(shares))
    return fleet_finding(
        f"fleet_{fid}", round(med, 4),
        f"the per-rank advisor's top finding is {fid} on {n} of {ok} readable ranks (median "
        f"share {med:.0%}): a fix applies to the whole job.",
        title=f"{first['title']} on {n} of {ok} ranks", graded_as=fid, confidence=n / ok,
        ranks=[s.rank for s in res.summaries if s.ok and s.findings
               and s.findings[0]["id"] == fid], fixes=[])
