"""The app's jobs: open then analyze, handing typed results over in order (no worker)."""

from __future__ import annotations

from tracedata import DATA

from sofa_gui.core.analysis.pipeline import PARTS, STEPS, Options
from sofa_gui.qt import jobs

TRACE = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


class _State:
    """The three calls a job makes on its state, recorded."""

    def __init__(self):
        self.results, self.fractions = [], []

    def update(self, fraction, message=""):
        self.fractions.append(fraction)

    def check_cancelled(self):
        pass

    def partial(self, payload):
        self.results.append(payload)


def test_open_job_hands_the_trace_then_each_analysis_part():
    state = _State()
    jobs.open_job(state, str(TRACE), Options(iterations="auto"), load_mode="thread")
    first, *parts = state.results
    assert isinstance(first, jobs.TraceReady) and first.prepared.trace is first.trace
    assert [type(p) for p in parts] == [jobs.AnalysisReady] * len(PARTS)
    assert [p.part for p in parts] == [s.part for s in STEPS]
    assert parts[0].analysis.findings is None  # a snapshot: later parts do not leak in
    assert parts[-1].analysis.findings is not None
    assert state.fractions == sorted(state.fractions) and state.fractions[-1] == 1.0


def test_analysis_job_reruns_with_the_given_options():
    state = _State()
    trace = jobs.load(_State(), str(TRACE), "thread")
    jobs.analysis_job(state, trace, Options(iterations="pattern"))
    assert [r.part for r in state.results] == [s.part for s in STEPS]
    assert state.results[0].analysis.iterations.method in ("pattern", "none")
