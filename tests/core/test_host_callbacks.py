"""Host callbacks inside a compiled step, on real captures of the diagnosis corpus
(``tests/data/corpus``): a ``jax.debug.callback`` per step is named as a host round trip
with its share (the callback's thunk and JAX's Python dispatch, which a compiled function
with callbacks takes every call), beside a verdict that stays compute; a jitted step
without callbacks has no such finding.  A test is skipped when the corpus is not checked
out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"


def analyzed(case: str, k: int = 0):
    truth = CORPUS / case / "truth.json"
    if not truth.exists():
        pytest.skip(f"corpus case {case} not in tests/data/corpus")
    path = CORPUS / case / json.loads(truth.read_text())["captures"][k]
    return analyze(load_trace(path, use_cache=False)), json.loads(truth.read_text())


@pytest.mark.parametrize("k", [0, 1])
def test_a_debug_callback_per_step_is_a_host_round_trip(k):
    a, truth = analyzed("jax_train_metrics_callback", k)
    f = next((f for f in a.findings if f.id == "host_callback_round_trip"), None)
    assert f is not None and f.confidence >= 0.5
    assert a.verdict.bound == "compute"
    measured = truth["shares"]["sync"]  # what the step without the callback saves
    assert abs(f.share / measured - 1) <= 0.25, (f.share, measured)
    assert "debug_callback" in f.summary and "Python dispatch" in f.summary
    assert any("every N steps" in x.text for x in f.fixes)
    assert any("ordered=False" in x.text for x in f.fixes)


def test_a_jitted_step_without_callbacks_has_no_round_trip():
    a, _ = analyzed("jax_train_jit")
    assert all(f.id != "host_callback_round_trip" for f in a.findings)


@pytest.mark.parametrize("k", [0, 1])
def test_a_callback_doing_the_hosts_work_is_host_overhead(k):
    """A ``jax.pure_callback`` to a SciPy blur in the jitted step: the step waits for the
    host function's own work (the frames under JAX's call of it), read as host overhead
    with its share, not as a round trip, nor as the call's fixed cost."""
    a, truth = analyzed("jax_train_pure_callback_blur", k)
    ids = [f.id for f in a.findings]
    assert "host_callback_round_trip" not in ids and "call_overhead_bound" not in ids
    f = next(f for f in a.findings if f.id == "host_callback_work")
    assert f.confidence >= 0.5 and "pure_callback" in f.summary
    assert a.verdict.bound == "host_overhead"
    measured = truth["shares"]["host_overhead"]
    assert abs(f.share / measured - 1) <= 0.25, (f.share, measured)
    assert abs(f.estimated_speedup / truth["fix"]["speedup"] - 1) <= 0.25
    assert any("jax.numpy" in x.text for x in f.fixes)


@pytest.mark.parametrize("k", [0, 1])
def test_a_logging_callback_is_no_host_work(k):
    a, _ = analyzed("jax_train_metrics_callback", k)
    assert all(f.id != "host_callback_work" for f in a.findings)
