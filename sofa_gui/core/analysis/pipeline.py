"""The one place the analyses run: iterations -> breakdown -> findings (-> whatever is added).

:func:`analyze` runs the :data:`STEPS` in order. Each step fills one field of
:class:`Analysis` and is handed to ``on_result(analysis, part)`` as soon as it is
ready, so the app shows iterations before findings exist. The CLI, the reports,
the diff and the app all read the same typed :class:`Analysis`. The verdict is
computed once, by the findings step (the findings' notes read it), and becomes its
part at the verdict step, in its turn. The iterations are handed over with the
detector's warm-up marks; once the run facts are known, the warm-up step marks the
advisor's warm-up on them instead (:func:`advisor_warmup`), and its part tells viewers
to refresh those marks: every surface shows the warm-up the verdict and findings use.

Adding a result is a change here only: a field on :class:`Analysis` and a step in
:data:`STEPS` (``analyze --json`` carries it via its ``to_dict()``). Panels subscribe
to the field by name: ``session.on_analysis("field", slot)``. See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from ..progress import NullProgress, Progress, subrange
from ..trace import Trace
from .aside import allowed
from .codec import register
from .results import Finding, Iterations

if TYPE_CHECKING:  # the steps import their modules when they run (app start-up stays fast)
    from .breakdown import TraceBreakdown
    from .run_facts import RunFacts
    from .tfdata import InputPipeline
    from .verdict import Verdict


@dataclass(frozen=True)
class Options:
    """What the user can choose about an analysis run."""

    iterations: str = "auto"  # how iterations are found: auto | annotations | pattern
    all_fixes: bool = False  # fixes for other frameworks than the run's too


@dataclass
class Analysis:
    """Every analysis result of one trace; a field is None until its step has run."""

    iterations: Iterations | None = None
    breakdown: TraceBreakdown | None = None
    findings: list[Finding] | None = None
    run: RunFacts | None = None  # what the program is (framework, device, ...), with proofs
    input_pipeline: InputPipeline | None = None  # tf.data stages and input wait (TF runs)
    verdict: Verdict | None = None  # what limits the run: bound, share, basis
    #: the advisor's leading warm-up rows, marked on ``iterations`` from its step on
    warmup: np.ndarray | None = None

    def to_dict(self, trace: Trace | None = None) -> dict:
        """JSON of every ready part (a new part's ``to_dict()`` is picked up by name);
        ``trace`` adds the proving events' names to the run facts."""
        it = self.iterations.to_dict() if self.iterations is not None else None
        if self.breakdown is not None and it is not None:
            self.breakdown.annotate_items(it["items"])
        out = {"run": self.run.to_dict(trace) if self.run is not None else None,
               "iterations": it, "findings": [f.to_dict() for f in self.findings or []]}
        for name in PARTS:
            value = getattr(self, name)
            if name not in out and name not in IN_ITERATIONS and value is not None:
                out[name] = value.to_dict() if hasattr(value, "to_dict") else value
        return out


#: Names of the parts of an :class:`Analysis` (its fields).
PARTS: tuple[str, ...] = tuple(f.name for f in fields(Analysis))
#: Parts whose JSON is the iterations' (the warm-up rows are their ``warmup`` marks).
IN_ITERATIONS = frozenset({"warmup"})

#: ``run(trace, analysis so far, options, progress) -> value of the step's field``
StepFn = Callable[[Trace, Analysis, Options, Progress], object]


@dataclass(frozen=True)
class Step:
    part: str  # the Analysis field this step fills
    message: str  # progress text while it runs
    weight: float  # share of the progress bar
    run: StepFn


def _iterations(trace: Trace, a: Analysis, opts: Options, progress: Progress):
    from .iterations import detect_iterations

    return detect_iterations(trace, mode=opts.iterations, progress=progress)


def _breakdown(trace: Trace, a: Analysis, opts: Options, progress: Progress):
    from .breakdown import compute_breakdown

    return compute_breakdown(trace, a.iterations, progress=progress)


def _run_facts(trace: Trace, a: Analysis, opts: Options, progress: Progress):
    from .run_facts import run_facts

    return run_facts(trace)


#: Where the findings step leaves the verdict it computed for the verdict step: an
#: attribute of the analysis outside its parts, so that no part shows before its turn
#: (:func:`analyze` removes it however the run ends, a cancellation included).
_AHEAD = "_verdict_ahead"


def _findings(trace: Trace, a: Analysis, opts: Options, progress: Progress):
    """The findings, with what the verdict says of them: the verdict is computed here,
    once, and left for the verdict step (the notes change no input it reads: they reword
    summaries and narrow the compute hypothesis, which moves no time)."""
    from .findings import find_bottlenecks
    from .verdict import fit_compute_hypothesis, note_small_findings

    found = find_bottlenecks(trace, a.iterations, a.breakdown, a.run,  # best first
                             all_frameworks=opts.all_fixes)
    verdict = verdict_of(a.iterations, a.breakdown, found, a.run)
    note_small_findings(found, verdict)
    fit_compute_hypothesis(found, verdict)
    setattr(a, _AHEAD, verdict)
    return found


def _verdict(trace: Trace, a: Analysis, opts: Options, progress: Progress):
    """The verdict the findings step computed."""
    verdict = a.__dict__.pop(_AHEAD, None)
    if verdict is None:
        return verdict_of(a.iterations, a.breakdown, a.findings, a.run)
    return verdict


def verdict_of(iterations, breakdown, findings, facts=None):
    """The verdict of an analysis's parts, over the advisor's warm-up rows
    (:func:`advisor_warmup`)."""
    from .verdict import compute_verdict

    return compute_verdict(breakdown, findings, advisor_warmup(iterations, breakdown, facts))


def advisor_warmup(iterations, breakdown, facts=None) -> np.ndarray | None:
    """The leading rows the advisor leaves out as warm-up (:func:`.findings.steady.phases`:
    the detector's marks, leading outliers, and, with the run's ``facts``, its loader's
    waits); None for a whole-trace breakdown (no rows to leave out)."""
    from .findings.steady import loader_waits, phases

    if breakdown is None or breakdown.whole_trace:
        return None
    return phases(iterations, breakdown.durations, False,
                  loader_waits(breakdown, facts)).warmup


def _warmup(trace: Trace, a: Analysis, opts: Options, progress: Progress):
    """The advisor's warm-up rows, from here on the iterations' marks too (its part tells
    the viewers of the iterations to redraw their marks). Rows that are not the
    iterations (a whole-trace breakdown) leave the detector's marks."""
    rows = advisor_warmup(a.iterations, a.breakdown, a.run)
    if rows is None or len(a.breakdown) != len(a.iterations):
        return np.zeros(0, np.int64)
    a.iterations.mark_warmup(len(rows))
    return rows


def _input_pipeline(trace: Trace, a: Analysis, opts: Options, progress: Progress):
    """The tf.data pipeline over the analyzed iterations, seen from the main thread."""
    from .tfdata import analyze_input_pipeline

    host = a.breakdown.host if a.breakdown is not None else None
    if host is None:
        return analyze_input_pipeline(trace)
    return analyze_input_pipeline(trace, host.starts, host.ends, host.lane)


#: The steps in the order they run; each may read the parts filled before it.
STEPS: tuple[Step, ...] = (
    Step("iterations", "Finding iterations", 0.4, _iterations),
    Step("breakdown", "Breaking down iterations", 0.4, _breakdown),
    Step("run", "Reading run facts", 0.05, _run_facts),
    Step("warmup", "Marking warm-up iterations", 0.01, _warmup),
    Step("findings", "Looking for bottlenecks", 0.15, _findings),
    Step("verdict", "Naming what limits the run", 0.01, _verdict),
    Step("input_pipeline", "Reading the tf.data pipeline", 0.02, _input_pipeline),
)

OnResult = Callable[[Analysis, str], None]


def preload() -> None:
    """Import what the steps import when they first run, for a caller with time to
    spare (the CLI, while the decode workers finish): ~50 ms off the path to the result."""
    from . import breakdown, findings, iterations, run_facts, tfdata, verdict  # noqa: F401


def analyze(trace: Trace, options: Options | None = None, progress: Progress | None = None,
            on_result: OnResult | None = None) -> Analysis:
    """Run every step on ``trace``; ``on_result(analysis, part)`` after each one."""
    options = options or Options()
    progress = progress or NullProgress()
    analysis = Analysis()
    total = sum(s.weight for s in STEPS)
    done = 0.0
    with allowed(on_result is None):  # side work in a child only when parts are not watched
        from .precision_facts import start_scans

        start_scans(trace)
        try:
            for step in STEPS:
                lo, hi = done / total, (done + step.weight) / total
                progress.update(lo, step.message)
                setattr(analysis, step.part, step.run(trace, analysis, options,
                                                      subrange(progress, lo, hi)))
                if on_result is not None:
                    on_result(analysis, step.part)
                done += step.weight
        finally:  # cancelled between the findings and the verdict: nothing left half-done
            analysis.__dict__.pop(_AHEAD, None)
    progress.update(1.0, "Analysis done")
    return analysis


register(Analysis)  # result types the analysis cache may store
