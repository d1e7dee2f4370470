"""The advisor: name the bottlenecks of a run, with proof, causes, confidence and fixes.

Each finding id is a :class:`.registry.Rule` (title, share thresholds, the partition of
iteration time it measures, whether it has a per-step gain, its fixes).  Shares are
measured on steady-state iterations only (:mod:`.steady`: warm-up and every-N-th
extras are left out and reported as ``startup_cost`` / ``periodic_extra``), on the
device side where there is a device, on the host otherwise.  ``estimated_speedup`` is
Amdahl's ``1 / (1 - share)`` over steady-state time, bounded by what the fix needs
(loader workers need free cores, caching needs none: each such fix has its own estimate
and the finding takes the best); one-off work has none.  Every finding has
``causes`` (what makes up its time), ``confidence`` (iterations, evidence,
assumptions) and fixes chosen by the run's facts (:mod:`..run_facts`); findings are
ranked by expected gain x confidence in tiers (:func:`rank_tier`): measured findings,
then hypotheses (``compute_bound`` assumes a 2x faster compute that nothing in the trace
proves), then tentative ones (slow steps that make the same calls as the others: the
cause is likely outside the program), then whatever is under the noise floor (gain x
confidence < :data:`NOISE_FLOOR`, 5%).

Adding a rule
    Write one function ``check(ctx, rule) -> Finding | None`` (``ctx``:
    :class:`.context.Ctx` with the trace, iterations, breakdown, run facts and steady
    phases; ``rule``: its own :class:`.registry.Rule`), decorate it with
    ``@rule(id, title, moderate, high, grounded_on, partition=..., per_step=...,
    factors={name: confidence factor})`` in a module imported below, build the result with
    ``make_finding(ctx, rule, ...)`` (:mod:`.context`: it attaches title, severity,
    confidence and fixes; sentences quote ``rule.moderate`` / ``rule.grading(...)``),
    and add its fixes to :data:`.fixes.FIXES` under the same id.  A counter check
    ``(ctx, signals, state)`` is added to an id with ``@counter_rule(id)``.

Adding a fix
    Append a :class:`~..results.Fix` to ``FIXES[id]`` with the framework
    (pytorch / tensorflow / jax / "tensorflow/jax" / any), the ``devices`` and
    ``modes`` it fits, and the run fact it changes (``fact``) with the values under which
    it is already applied (``unless``).  A new run fact is a ``@probe`` function in
    :mod:`..run_facts`.  A fix whose gain differs from the finding's (it needs free
    cores, or removes the work without any) sets ``gain`` and ``name``; its rule passes
    ``fix_gain`` to ``make_finding``, which estimates each fix and gives the finding the
    best one (``input_pipeline_bound`` does).

Rules (share thresholds; "partition" rules measure disjoint time, so their savings
add up in ``diff``):

"""

from __future__ import annotations

from importlib import import_module

from ...trace import Trace
from .. import aside
from ..breakdown import TraceBreakdown
from ..results import Finding, Iterations
from ..run_facts import RunFacts, run_facts

# isort: on
from .context import BELOW, MAX_EVIDENCE, Ctx
from .registry import RULES, disjoint_ids, rules_table, thresholds
from .steady import loader_waits, phases
from .work import confirm_extras

#: Modules of rules by family, in the order they register (evaluation and listing order).
RULE_MODULES = ("input_rules", "launch_rules", "sync_rules", "dispatch_rules", "compute_rules",
                "jitter_rules", "idle_rules", "counter_rules", "fleet_rules", "run_rules",
                "recompile_rules", "read_rules", "copy_rules", "program_copies", "small_batch",
                "eager_dispatch", "call_setup", "callback_rules", "anomaly_mode",
                "call_overhead", "wrapped_calls", "sequence_loop")
for _name in RULE_MODULES:
    import_module(f".{_name}", __name__)
counter_findings = import_module(".counter_rules", __name__).counter_rules

__doc__ += rules_table() + "\n"

THRESHOLDS = thresholds()
__all__ = ["BELOW", "HYPOTHESIS", "MEASURED", "MINOR", "NOISE_FLOOR", "RULES", "TENTATIVE",
           "THRESHOLDS", "disjoint_ids", "evaluate_rules",
           "find_bottlenecks", "make_context", "rank_tier"]


def make_context(trace: Trace, iters: Iterations, breakdown: TraceBreakdown,
                 facts: RunFacts | None = None, all_frameworks: bool = False) -> Ctx:
    facts = facts or run_facts(trace)
    ph = phases(iters, breakdown.durations, breakdown.whole_trace,
                loader_waits(breakdown, facts))
    ctx = Ctx(trace, iters, breakdown, facts, ph, all_frameworks)
    confirm_extras(ctx)
    return ctx


def find_bottlenecks(trace: Trace, iters: Iterations, breakdown: TraceBreakdown,
                     facts: RunFacts | None = None,
                     all_frameworks: bool = False) -> list[Finding]:
    """All findings above their thresholds, with evidence, best expected gain x
    confidence first."""
    out = [f for f in evaluate_rules(trace, iters, breakdown, facts, all_frameworks)
           if f.severity != BELOW and f.evidence]
    for f in out:
        if rank_tier(f) == MINOR:
            f.confidence_why = "; ".join(x for x in (f.confidence_why, (
                f"expected gain x confidence {100 * f.rank_key:.1f}% is under the "
                f"{100 * NOISE_FLOOR:.0f}% noise floor: ranked after the others")) if x)
    out.sort(key=lambda f: (rank_tier(f), -f.rank_key))
    for f in out:  # findings of one partition measure disjoint time: say which
        part = RULES[f.id].partition if f.id in RULES else ""
        f.disjoint_with = [g.id for g in out if g is not f and part
                           and g.id in RULES and RULES[g.id].partition == part]
    return out


#: A finding whose expected gain x confidence is under this (it would save under 5% of the
#: time at the confidence it has: the "moderate" threshold of most rules at full confidence)
#: is within what a few profiled steps vary by on their own.
NOISE_FLOOR = 0.05
#: Ranking tiers: measured findings (per-step, and one-off work the program does), then
#: hypotheses (their gain assumes a change the trace does not show), then tentative
#: findings (their reading is unproven: slow steps that make the same calls as the
#: others), then everything under the noise floor.
MEASURED, HYPOTHESIS, TENTATIVE, MINOR = range(4)


def rank_tier(f: Finding) -> int:
    if f.rank_key < NOISE_FLOOR:
        return MINOR
    if f.tentative:
        return TENTATIVE
    return HYPOTHESIS if RULES[f.id].hypothesis else MEASURED


def evaluate_rules(trace: Trace, iters: Iterations, breakdown: TraceBreakdown,
                   facts: RunFacts | None = None,
                   all_frameworks: bool = False) -> list[Finding]:
    """Every rule that applies, including those below threshold (severity ``"none"``);
    used by the diff to follow a share across runs."""
    ctx = make_context(trace, iters, breakdown, facts, all_frameworks)
    checks = _checks()
    side = [i for i, (rid, _) in enumerate(checks) if rid in BESIDE]
    job = aside.start(_run_checks, (ctx, side)) if side else None
    out: list = [None] * len(checks)
    for i, (rid, check) in enumerate(checks):
        if job is None or rid not in BESIDE:
            out[i] = check(ctx, RULES[rid])
    counters = counter_findings(ctx)
    if job is not None:
        for i, f in job.result():
            out[i] = f
    return _merge_same_id([f for f in out if f is not None] + counters)


#: Rules evaluated in a forked child while this process evaluates the others, when the
#: analysis may fork (:mod:`..aside`). Both need the exclusive time of the main thread's
#: ops (computed once, where they run): ``input_pipeline_bound`` for its loader causes
#: (~half the findings' CPU on a 1M-event trace), ``iteration_jitter`` for the work the
#: slow steps add (~0.2 s with 78 steps; nothing below 5 steady steps). Same findings, in
#: the same order, either way.
BESIDE = frozenset({"input_pipeline_bound", "iteration_jitter"})


def _checks() -> list:
    """(rule id, check) in evaluation order."""
    return [(r.id, check) for r in RULES.values() for check in r.checks]


def _run_checks(ctx: Ctx, which: list[int]) -> list:
    """(position, finding or None) of the checks at positions ``which``."""
    checks = _checks()
    return [(i, checks[i][1](ctx, RULES[checks[i][0]])) for i in which]


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
