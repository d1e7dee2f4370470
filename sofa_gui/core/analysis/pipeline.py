"""One call that runs every analysis on a trace: iterations, breakdown, findings.

The GUI runs the steps one by one (to show iterations before findings); the CLI
and reports call :func:`analyze`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..progress import NullProgress, Progress, subrange
from ..trace import Trace
from .results import Finding, Iterations
from .run_facts import RunFacts


@dataclass
class Analysis:
    iterations: Iterations
    breakdown: object | None = None  # breakdown.TraceBreakdown
    findings: list[Finding] = field(default_factory=list)
    run: RunFacts | None = None

    def to_dict(self, trace: Trace | None = None) -> dict:
        it = self.iterations.to_dict()
        if self.breakdown is not None:
            self.breakdown.annotate_items(it["items"])
        out = {"run": self.run.to_dict(trace) if self.run is not None else None,
               "iterations": it, "findings": [f.to_dict() for f in self.findings]}
        if self.breakdown is not None:
            out["breakdown"] = self.breakdown.to_dict()
        return out


def analyze(trace: Trace, mode: str = "auto", progress: Progress | None = None) -> Analysis:
    """Detect iterations (``mode``: auto|annotations|pattern), then break down and advise."""
    from .breakdown import compute_breakdown
    from .findings import find_bottlenecks
    from .iterations import detect_iterations
    from .run_facts import run_facts

    progress = progress or NullProgress()
    iters = detect_iterations(trace, mode=mode, progress=subrange(progress, 0.0, 0.5))
    bd = compute_breakdown(trace, iters, progress=subrange(progress, 0.5, 0.9))
    facts = run_facts(trace)
    findings = find_bottlenecks(trace, iters, bd, facts)
    progress.report(1.0, "analysis done")
    return Analysis(iters, bd, findings, facts)
