"""A Keras ``evaluate`` / ``predict`` called once per step, on real captures: each call runs
several batches (the iterations found), and the last batch of a call holds the call's end
and the next call's set-up (a pipeline and iterator made, a function traced).  That set-up
is every step's own cost: no periodic extra work, no input bottleneck; an evaluation that
runs its own test steps every few iterations stays periodic extra work."""

from __future__ import annotations

import pytest
from tracedata import DATA, corpus_analysis, findings_by_id

from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace

CONFIDENT = 0.5


def finding(a, fid: str):
    return findings_by_id(a).get(fid)


@pytest.mark.parametrize("k", [0, 1])
@pytest.mark.parametrize("case, every", [("tf_eval_metrics_dataset", 4),
                                         ("tf_predict_batch_size_1", 16)])
def test_a_new_calls_set_up_every_few_batches_is_no_periodic_extra(case, every, k):
    _, a = corpus_analysis(case, k)
    (x,) = a.iterations.periodic_extras
    assert x.every == every and x.per_call and x.name.startswith("a new call's set-up")
    assert a.iterations.to_dict()["periodic_extras"][0]["per_call"] is True
    assert finding(a, "periodic_extra") is None


@pytest.mark.parametrize("k", [0, 1])
def test_an_evaluation_with_its_own_test_steps_stays_periodic_extra(k):
    """``fit`` with ``validation_data``: the epoch's last batch builds the validation
    iterator and runs the test steps too (more calls of the step's function)."""
    _, a = corpus_analysis("tf_fit_validation_epochs", k)
    (x,) = a.iterations.periodic_extras
    assert not x.per_call
    f = finding(a, "periodic_extra")
    assert f is not None and f.confidence >= CONFIDENT


@pytest.mark.parametrize("k", [0, 1])
def test_a_pipeline_built_by_every_predict_call_is_no_input_bottleneck(k):
    _, a = corpus_analysis("tf_predict_batch_size_1", k)
    assert finding(a, "input_pipeline_bound") is None
    assert a.verdict.bound == "host_overhead"


def test_a_running_loops_slow_pipeline_stays_input_bound():
    _, a = corpus_analysis("tf_keras_fit_slow_map", 0)
    assert not any(x.per_call for x in a.iterations.periodic_extras)
    f = finding(a, "input_pipeline_bound")
    assert f is not None and f.confidence >= CONFIDENT


def test_keras_evaluate_is_inference_its_metrics_only_set_and_added_to():
    t, _ = corpus_analysis("tf_eval_metrics_dataset", 0)
    mode = run_facts(t).get("mode")
    assert mode.value == "inference" and "only set or added to" in mode.detail


@pytest.mark.parametrize("case", ["tf_fit_validation_epochs", "tf_gradient_tape",
                                  "tf_fit_run_eagerly", "tf_tape_ema_weights_by_hand"])
def test_training_stays_training(case):
    t, _ = corpus_analysis(case, 0)
    assert run_facts(t).get("mode").value == "training"


def test_keras_sgd_with_momentum_is_no_inference():
    """Keras 3 ``fit`` with ``SGD(momentum=0.9)`` of a model whose gradient no op is named
    for: the optimizer sets its slots and adds to its weights inside the train function,
    which metrics do not do in one place; the mode is left unknown, not inference."""
    path = next((DATA / "keras-sgd-momentum").rglob("*.xplane.pb.gz"))
    mode = run_facts(load_trace(path, use_cache=False)).get("mode")
    assert not mode.known



def test_a_new_calls_set_up_rows_are_named_only_where_the_rows_are_the_iterations():
    """The rows that start a new call are the iterations' indexes: the rules read them
    (no periodic extra, no input bottleneck) only where the breakdown's rows are those
    iterations, and none where its rows are others (the same count or none)."""
    import dataclasses
    from types import SimpleNamespace

    from tracedata import corpus_context

    _, a, ctx = corpus_context("tf_eval_metrics_dataset", 0)
    calls = a.iterations.per_call()
    assert len(calls) >= 2 and ctx.call_setups.tolist() == calls.tolist()
    other = dataclasses.replace(ctx, bd=SimpleNamespace(starts=ctx.bd.starts[:-1]),
                                memo={})
    assert not len(other.call_setups)
