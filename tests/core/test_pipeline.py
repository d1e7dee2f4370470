"""The analysis pipeline: one place runs the steps, each typed part handed over when ready."""

from __future__ import annotations

import dataclasses

import pytest
from tracedata import DATA

from sofa_gui.core.analysis import pipeline
from sofa_gui.core.analysis.breakdown import TraceBreakdown
from sofa_gui.core.analysis.pipeline import PARTS, STEPS, Analysis, Options, Step, analyze
from sofa_gui.core.analysis.results import Finding, Iterations
from sofa_gui.core.importers import load_trace
from sofa_gui.core.progress import Cancelled, CancelToken


@pytest.fixture(scope="module")
def trace():
    return load_trace(DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                      use_cache=False)


def test_every_part_is_filled_by_exactly_one_step():
    assert sorted(s.part for s in STEPS) == sorted(PARTS)
    assert PARTS == tuple(f.name for f in dataclasses.fields(Analysis))


def test_parts_are_handed_over_in_order_as_typed_snapshots(trace):
    seen = []

    def on_result(a, part):
        seen.append((part, {p for p in PARTS if getattr(a, p) is not None}))

    a = analyze(trace, Options(iterations="pattern"), on_result=on_result)
    order = [s.part for s in STEPS]
    optional = {"input_pipeline"}  # None when the run has no tf.data pipeline
    assert [part for part, _ in seen] == order
    for i, (_, filled) in enumerate(seen):
        assert set(order[:i + 1]) - optional <= filled <= set(order[:i + 1])
    assert isinstance(a.iterations, Iterations) and a.iterations.method in ("pattern", "none")
    assert isinstance(a.breakdown, TraceBreakdown)
    assert all(isinstance(f, Finding) for f in a.findings)
    assert [f.rank_key for f in a.findings] == sorted((f.rank_key for f in a.findings),
                                                      reverse=True)


def test_progress_rises_to_one_with_each_steps_message(trace):
    reports = []
    token = CancelToken(lambda f, m: reports.append((f, m)))
    analyze(trace, progress=token)
    fractions = [f for f, _ in reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    messages = {m for _, m in reports}
    assert {s.message for s in STEPS} <= messages


def test_a_new_step_is_one_entry_in_steps(trace, monkeypatch):
    # what a new part costs: a field on Analysis and a Step (here the field is reused)
    extra = Step("findings", "Counting", 0.1, lambda t, a, o, p: [] if a.breakdown else None)
    monkeypatch.setattr(pipeline, "STEPS", STEPS[:2] + (extra,))
    parts = []
    a = analyze(trace, on_result=lambda _a, part: parts.append(part))
    assert parts == ["iterations", "breakdown", "findings"] and a.findings == []
    assert a.run is None  # a part no step fills stays None


def test_to_dict_carries_each_part_and_tolerates_missing_ones(trace):
    a = analyze(trace)
    doc = a.to_dict()
    assert set(doc) == {"run", "iterations", "findings", "breakdown", "verdict"}
    assert len(doc["iterations"]["items"]) == len(a.iterations)
    assert Analysis(a.iterations).to_dict()["findings"] == []


def test_the_verdict_is_computed_once_and_shown_in_its_turn(trace, monkeypatch):
    """The findings step computes the verdict its notes read; the verdict step hands that
    one over (not a second computation), and nothing of it is left on the analysis."""
    made = []
    real = pipeline.verdict_of
    monkeypatch.setattr(pipeline, "verdict_of", lambda *a: made.append(1) or real(*a))
    a = analyze(trace)
    assert len(made) == 1 and a.verdict is not None and a.verdict.bound
    assert set(vars(a)) == set(PARTS)


def test_a_run_cancelled_between_the_findings_and_the_verdict_leaves_only_whole_parts(trace):
    """Cancelled after the findings step, the analysis holds the parts done and nothing of
    the verdict the findings step computed ahead of its turn."""
    token = CancelToken()
    seen = []

    def on_result(a, part):
        seen.append(a)
        if part == "findings":
            token.cancel()

    with pytest.raises(Cancelled):
        analyze(trace, progress=token, on_result=on_result)
    a = seen[-1]
    assert a.findings is not None and a.verdict is None
    assert set(vars(a)) == set(PARTS)
