"""What every rule gets (:class:`Ctx`) and the helpers they share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...trace import Kind, Trace
from ..breakdown import TraceBreakdown
from ..device_side import DeviceBreakdown
from ..host_side import HostBreakdown
from ..results import Cause, Evidence, Finding, Fix, Iterations
from ..run_facts import RunFacts
from .fixes import choose_fixes
from .registry import RULES, Rule
from .steady import Phases

MAX_EVIDENCE = 5
MAX_CAUSES = 5
BELOW = "none"  # severity of a rule result under its threshold (never shown as a finding)

#: Confidence factors every finding gets from how it was measured (a rule's own
#: assumptions are :attr:`.registry.Rule.factors`):
#: measured from the events themselves, with / without evidence;
MEASURED_DIRECTLY, DIRECT_WITHOUT_EVIDENCE = 0.9, 0.3
#: no iterations (the whole trace is one window), or iterations without a confidence;
WHOLE_TRACE = 0.5
#: one / two steady-state iterations only;
ONE_STEADY, TWO_STEADY = 0.5, 0.7
#: no evidence at all; a single piece of evidence over several iterations.
NO_EVIDENCE, ONE_EVIDENCE = 0.3, 0.8


@dataclass
class Ctx:
    trace: Trace
    iters: Iterations
    bd: TraceBreakdown
    facts: RunFacts
    ph: Phases
    all_frameworks: bool = False
    #: Arrays several rules derive from this analysis (its iterations), computed once.
    memo: dict = field(default_factory=dict, repr=False)

    def once(self, key, make: Callable[[], object]):
        """``make()``, made once per analysis under ``key``: a reading several rules
        share (a rule's measure that another rule's check reads too)."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def host_of(self, rank: int) -> HostBreakdown | None:
        return next((h for h in self.bd.hosts if h.rank == rank), None)

    @property
    def rows(self) -> np.ndarray:
        """Steady-state rows of the breakdown."""
        return np.flatnonzero(self.ph.steady)

    @property
    def call_setups(self) -> np.ndarray:
        """Rows that start a new high-level call (``Iterations.per_call``: a Keras
        ``evaluate`` / ``predict`` per step), every step's own set-up, not extra work; none
        where the breakdown's rows are not the iterations (their indexes name other
        rows)."""
        if len(self.iters) != len(self.bd.starts):
            return np.zeros(0, np.int64)
        return self.iters.per_call()

    def call_ns(self, wall: float, steps: int) -> float:
        """Main-thread time per call of the step in ``wall`` ns over ``steps`` steps: the
        step's length, or its share where a step makes several identical calls (the
        iterations' ``calls_per_step``): the thread returns to the loop's Python after
        each, so a part a fix removes keeps it away from the rest one call at a time."""
        calls = int((self.iters.pattern or {}).get("calls_per_step", 1))
        return wall / max(steps * calls, 1)

    def share(self, obj, categories) -> float:
        """Fraction of steady-state time of ``obj`` (device or host breakdown) in
        ``categories``."""
        r = self.rows
        wall = int((obj.ends[r] - obj.starts[r]).sum())
        if not wall:
            return 0.0
        return float(sum(int(obj.column(c)[r].sum()) for c in categories)) / wall

    def steady_only(self, values: np.ndarray) -> np.ndarray:
        """``values`` per row with non-steady rows zeroed (for evidence picking)."""
        return np.where(self.ph.steady, values, 0)

    def it(self, i: int) -> int | None:
        return None if self.bd.whole_trace else i

    def best_device(self, categories) -> tuple[DeviceBreakdown | None, float]:
        best, best_share = None, 0.0
        for d in self.bd.devices:
            s = self.share(d, categories)
            if best is None or s > best_share:
                best, best_share = d, s
        return best, best_share

    def device_slices(self, d: DeviceBreakdown, kind: Kind) -> np.ndarray:
        """Slices of ``kind`` on the device's lanes (several rules ask the same)."""
        key = ("device_slices", tuple(d.lanes), int(kind))
        if key not in self.memo:
            s = self.trace.slices
            idx = np.flatnonzero((s.kind == int(kind)) & np.isin(s.lane, d.lanes))
            idx.flags.writeable = False  # shared between rules
            self.memo[key] = idx
        return self.memo[key]

    def steady_slices(self, host: HostBreakdown, kind: Kind | None = None) -> np.ndarray:
        """The slices of ``host``'s thread that start in a steady-state row, in start
        order; of ``kind`` only when given (``Kind.CPU_OP``: the framework ops the step
        ran).  Many rules read the same selection: it is made once per analysis."""
        key = ("steady_slices", host.lane, id(host), None if kind is None else int(kind))
        if key not in self.memo:
            s = self.trace.slices
            idx = self.trace.lane_slices(host.lane)
            if kind is not None:
                idx = idx[s.kind[idx] == int(kind)]
            idx = idx[self.in_steady(s.start[idx], host.starts, host.ends)]
            idx.flags.writeable = False  # shared between rules
            self.memo[key] = (host, idx)  # the host kept: its id stays its own
        return self.memo[key][1]

    def in_steady(self, t_ns: np.ndarray, starts, ends) -> np.ndarray:
        """Bool per time: inside a steady-state row."""
        from ..host_side import window_of
        w = window_of(np.asarray(t_ns), starts, ends)
        ok = w >= 0
        out = np.zeros(len(w), bool)
        out[ok] = self.ph.steady[w[ok]]
        return out

    #: Below this the iterations are "uncertain" and every finding
    #: that rests on them says so.
    UNCERTAIN = 0.5

    @property
    def iters_uncertain(self) -> float | None:
        """The iterations' confidence when it is below :attr:`UNCERTAIN`, else None."""
        c = self.iters.confidence
        if self.bd.whole_trace or not c or c >= self.UNCERTAIN:
            return None
        return float(c)

    def confidence(self, n_evidence: int, assumption: float = 1.0,
                   notes: tuple[str, ...] = (), direct: bool = False) -> tuple[float, str]:
        """0..1 and why: iteration detection, steady iterations, evidence, assumptions.
        ``direct``: the finding rests on the events themselves, not on the iterations."""
        why = list(notes)
        if direct:
            c = MEASURED_DIRECTLY if n_evidence else DIRECT_WITHOUT_EVIDENCE
            return round(c * assumption, 2), "; ".join(why or ["measured from the events"])
        if self.bd.whole_trace:
            c = WHOLE_TRACE
            why.append("no iterations: whole trace")
        else:
            c = float(self.iters.confidence) if self.iters.confidence else WHOLE_TRACE
            if c < 0.8:
                why.append(f"iterations found with confidence {c:.2f}")
        n = self.ph.n_steady
        if not self.bd.whole_trace and n < 3:
            c *= ONE_STEADY if n <= 1 else TWO_STEADY
            why.append(f"{n} steady-state iteration{'s' if n != 1 else ''}")
        if n_evidence == 0:
            c *= NO_EVIDENCE
            why.append("no evidence")
        elif n_evidence == 1 and n >= 2:
            c *= ONE_EVIDENCE
            why.append("one piece of evidence")
        c *= assumption
        return round(min(max(c, 0.0), 1.0), 2), "; ".join(why)


def rule_of(fid: str | Rule) -> Rule:
    return fid if isinstance(fid, Rule) else RULES[fid]


def severity(fid: str | Rule, share: float) -> str:
    r = rule_of(fid)
    if share < r.moderate:
        return BELOW
    return "high" if share >= r.high else "medium"


def amdahl(share: float) -> float:
    return 1.0 / max(1.0 - share, 1e-6)


#: (speed-up or None when not estimated, why in words, confidence factor of its assumption)
FixGain = tuple  # (speed-up or None, why, confidence factor[, the fix's settings])


def make_finding(ctx: Ctx, fid: str | Rule, share: float, summary: str, evidence: list[Evidence],
                 *, speedup: float | None = 0.0, sev: str | None = None,
                 causes: list[Cause] | None = None, title: str | None = None,
                 assumption: float = 1.0, notes: tuple[str, ...] = (),
                 one_off_ns: int = 0, direct: bool = False, tentative: str = "",
                 fix_gain: Callable[[Fix], FixGain] | None = None,
                 unseen: Callable[[Fix], str] | None = None) -> Finding:
    """A finding with its rule's title and fixes chosen by the run facts.  ``speedup`` 0.0
    means Amdahl on ``share``; None means no per-iteration gain (one-off work).
    ``fix_gain``: each shown fix's own estimate (see :func:`best_fix`); the finding's
    estimate is then that of the best fix, named.  ``tentative``: why its reading is
    unproven (it then ranks after the hypotheses).  ``unseen``: why a fix's cause is not in
    this trace ("" when it is); such a fix is not shown."""
    rule = rule_of(fid)
    fid = rule.id
    if speedup == 0.0:
        speedup = amdahl(share) if rule.per_step else None
    shown, hidden = choose_fixes(rule.fixes, ctx.facts, ctx.all_frameworks)
    if unseen is not None:
        why = [unseen(f) for f in shown]
        hidden = hidden + [(f, w) for f, w in zip(shown, why) if w]
        shown = [f for f, w in zip(shown, why) if not w]
    by = ""
    if fix_gain is not None:
        best, factor = best_fix(shown, fix_gain)
        if best is not None:
            speedup, by = best.estimate, best.name
            assumption *= factor
            if factor < 1:
                notes = notes + (f"estimate from '{best.name}': {best.estimate_why}",)
        summary += per_fix_sentence(shown)
    conf, why = ctx.confidence(len(evidence), assumption, notes, direct)
    unsure = ctx.iters_uncertain
    if unsure is not None and not direct:
        summary = (f"Iterations uncertain (found with confidence {unsure:.2f}): the shares and "
                   f"the estimate below rest on them. " + summary)
    return Finding(fid, title or rule.title, sev or severity(fid, share), share, speedup,
                   summary, evidence[:MAX_EVIDENCE], shown, causes=(causes or [])[:MAX_CAUSES],
                   confidence=conf, confidence_why=why, hidden_fixes=hidden,
                   one_off_ns=one_off_ns, estimated_by=by, tentative=tentative)


def best_fix(fixes: list[Fix], fix_gain: Callable[[Fix], FixGain]) -> tuple[Fix | None, float]:
    """Fill each fix's ``estimate``/``estimate_why`` in place; return the one with the
    largest expected gain (time saved x its assumption's confidence; the first on ties) and
    that confidence factor."""
    best, best_key, best_factor = None, 0.0, 1.0
    for fix in fixes:
        if not fix.gain or fix.conditional:  # a condition unproven: no estimate
            continue
        est, why, factor, *settings = fix_gain(fix)
        fix.estimate, fix.estimate_why = est, why
        fix.settings = settings[0] if settings else {}
        if est is None:
            continue
        key = (1.0 - 1.0 / max(est, 1e-9)) * factor
        if best is None or key > best_key + 1e-9:
            best, best_key, best_factor = fix, key, factor
    return best, best_factor


def per_fix_sentence(fixes: list[Fix]) -> str:
    """" Per fix: loader workers 1.00x (no free core ...); cache ... 1.64x (...)." (fixes
    without an estimate say so in their own line)."""
    groups: dict[tuple[str, str], list[str]] = {}  # same figure and reason: said once
    for x in fixes:
        if x.gain and x.estimate is not None:
            groups.setdefault((f"{x.estimate:.2f}x", x.estimate_why), []).append(x.name)
    parts = [f"{' / '.join(names)} {est} ({why})" for (est, why), names in groups.items()]
    return f" Per fix: {'; '.join(parts)}." if parts else ""


def cause_evidence(causes: list[Cause]) -> list[Evidence]:
    """The causes' clickable instances: a finding grouped by cause shows one of each."""
    return [c.instance for c in causes if c.instance is not None]


def top_rows(values: np.ndarray, k: int = MAX_EVIDENCE) -> list[int]:
    order = np.argsort(-values, kind="stable")
    return [int(i) for i in order[:k] if values[i] > 0]


def lanes_of(*groups) -> list[int]:
    """Lane ids in order of first appearance, without repeats."""
    return list(dict.fromkeys(int(x) for g in groups for x in g))
