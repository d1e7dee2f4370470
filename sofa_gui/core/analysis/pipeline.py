"""One call that runs every analysis on a trace: iterations, breakdown, findings.

The GUI runs the steps one by one (to show iterations before findings); the CLI
and reports call :func:`analyze`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..progress import NullProgress, Progress, subrange
from ..trace import Trace
from .results import Finding, Iterations


@dataclass
class Analysis:
    iterations: Iterations
    breakdown: object | None = None  # breakdown.TraceBreakdown
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict:
        it = self.iterations.to_dict()
        if self.breakdown is not None:
            self.breakdown.annotate_items(it["items"])
        out = {"iterations": it, "findings": [f.to_dict() for f in self.findings]}
        if self.breakdown is not None:
            out["breakdown"] = self.breakdown.to_dict()
        return out


def analyze(trace: Trace, mode: str = "auto", progress: Progress | None = None) -> Analysis:
    """Detect iterations (``mode``: auto|annotations|pattern), then break down and advise."""
    from .breakdown import compute_breakdown
    from .findings import find_bottlenecks
    from .iterations import detect_iterations

    progress = progress or NullProgress()
    iters = detect_iterations(trace, mode=mode, progress=subrange(progress, 0.0, 0.5))
    bd = compute_breakdown(trace, iters, progress=subrange(progress, 0.5, 0.9))
    findings = find_bottlenecks(trace, iters, bd)
    progress.report(1.0, "analysis done")
    return Analysis(iters, bd, findings)
