"""The rule registry: one :class:`Rule` record per finding id.

Everything that lists findings reads it: the package docstring's table, ``diff``'s
set of disjoint findings (:func:`disjoint_ids`), the report's threshold note and the
fix lists.  A rule registers its check functions with :func:`rule` (trace side) and
:func:`counter_rule` (utilisation counters); its fixes come from :data:`.fixes.FIXES`.
Each check receives its own :class:`Rule`, so its id, thresholds and confidence factors
are written once, where it is registered, and its sentences quote them from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..results import Fix
from .fixes import FIXES


@dataclass
class Rule:
    """What a finding id means and how it is graded.

    ``moderate``/``high``: share thresholds (below ``moderate`` nothing is shown).
    ``partition``: rules of one partition measure disjoint slices of iteration time
    (their savings add up); "" means it overlaps others.  ``per_step`` is False for
    one-off work, which gets no per-iteration speed-up.  ``hypothesis``: the gain assumes
    a change nothing in the trace shows to be possible (e.g. 2x faster compute); such
    findings rank after every measured one.  ``factors``: the named confidence factors its
    check applies (an assumption it makes, a reading it cannot prove), by name.
    ``grounded`` may quote the thresholds as ``{moderate}`` / ``{high}``.
    """

    id: str
    title: str
    moderate: float
    high: float
    grounded: str
    partition: str = ""
    per_step: bool = True
    hypothesis: bool = False
    factors: dict[str, float] = field(default_factory=dict)
    checks: list[Callable] = field(default_factory=list)
    counter_checks: list[Callable] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.grounded = self.grounded.format(moderate=f"{100 * self.moderate:g}%",
                                             high=f"{100 * self.high:g}%")

    def factor(self, name: str) -> float:
        """The confidence factor ``name`` (KeyError for one the rule did not declare)."""
        return self.factors[name]

    def grading(self, what: str, source: str = "") -> str:
        """The sentence stating the thresholds ("Thresholds: >= 5% moderately, ...")."""
        by = f" ({source})" if source else ""
        return (f"Thresholds: >= {100 * self.moderate:g}% moderately, >= {100 * self.high:g}% "
                f"highly {what}{by}.")

    @property
    def fixes(self) -> list[Fix]:
        return list(FIXES.get(self.id, []))


RULES: dict[str, Rule] = {}


def rule(fid: str, title: str, moderate: float, high: float, grounded: str,
         partition: str = "", per_step: bool = True, hypothesis: bool = False,
         factors: dict[str, float] | None = None):
    """Decorator registering a trace check ``(ctx, rule) -> Finding | None``."""
    def deco(fn):
        r = RULES.get(fid)
        if r is None:
            r = RULES[fid] = Rule(fid, title, moderate, high, grounded, partition, per_step,
                                  hypothesis, dict(factors or {}))
        r.checks.append(fn)
        return fn
    return deco


def declare(fid: str, title: str, moderate: float, high: float, grounded: str,
            partition: str = "", per_step: bool = True,
            factors: dict[str, float] | None = None) -> Rule:
    """Register an id whose checks are all counter checks (or computed elsewhere)."""
    return RULES.setdefault(fid, Rule(fid, title, moderate, high, grounded, partition,
                                      per_step, factors=dict(factors or {})))


def counter_rule(fid: str):
    """Decorator adding a counter check (runs on counters, see :mod:`.counter_rules`) to an
    already registered id."""
    def deco(fn):
        RULES[fid].counter_checks.append(fn)
        return fn
    return deco


def thresholds() -> dict[str, tuple[float, float]]:
    return {r.id: (r.moderate, r.high) for r in RULES.values()}


def disjoint_ids(partition: str = "device_time") -> tuple[str, ...]:
    """Ids whose shares are disjoint slices of iteration time (their savings add up)."""
    return tuple(r.id for r in RULES.values() if r.partition == partition)


def rules_table() -> str:
    """The reStructuredText table of every rule (appended to the package docstring)."""
    rows = [(r.id, f"{100 * r.moderate:g} %", f"{100 * r.high:g} %",
             r.partition or "-", r.grounded) for r in RULES.values()]
    head = ("id", "moderate", "high", "partition", "grounded on")
    widths = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
    sep = "  ".join("=" * w for w in widths)
    fmt = "  ".join(f"{{:{w}s}}" for w in widths)
    lines = [sep, fmt.format(*head).rstrip(), sep]
    lines += [fmt.format(*row).rstrip() for row in rows]
    return "\n".join(lines + [sep])
