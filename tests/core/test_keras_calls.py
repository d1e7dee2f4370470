"""A Keras ``evaluate`` / ``predict`` called once per step, on real captures: each call runs
several batches (the iterations found), and the last batch of a call holds the call's end
and the next call's set-up (a pipeline and iterator made, a function traced).  That set-up
is every step's own cost: no periodic extra work, no input bottleneck; an evaluation that
runs its own test steps every few iterations stays periodic extra work."""

from __future__ import annotations

import pytest
from tracedata import DATA, corpus_analysis, corpus_fix_speedup, findings_by_id

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


@pytest.mark.parametrize("k, speedup", [(0, 1.245), (1, 1.279)])
def test_batching_inside_each_predict_call_keeps_the_calls_set_up(k, speedup):
    """``predict(x, batch_size=1)`` on 16 rows: each row is a call of the predict function,
    each ``predict`` call sets up its pipeline and traces its function anew (every 16
    iterations).  The default batch size runs a call's 16 rows in one and keeps that
    set-up: estimated 1.2-1.3x where 1.26x is measured (44x and 21x with the 44 steps
    captured merged into one call, their set-ups left out)."""
    _, a = corpus_analysis("tf_predict_batch_size_1", k)
    f = finding(a, "op_overhead_bound")
    assert f.estimated_speedup == pytest.approx(speedup, abs=0.005)
    assert "the 16 steps of one high-level call" in f.summary
    assert "set-up" in f.summary and "kept before and after" in f.summary
    assert abs(f.estimated_speedup / corpus_fix_speedup("tf_predict_batch_size_1") - 1) <= 0.25
    assert a.verdict.bound == "host_overhead"


@pytest.mark.parametrize("k", [0, 1])
def test_calls_without_a_set_up_of_their_own_merge_whole(k):
    """A SavedModel's signature called once per request: no high-level call sets itself up
    every few iterations, so the calls captured merge into one, as before."""
    _, a = corpus_analysis("tf_infer_savedmodel_per_request", k)
    assert not any(x.per_call for x in a.iterations.periodic_extras)
    f = finding(a, "op_overhead_bound")
    assert f is not None and "high-level call" not in f.summary
    assert "steps captured (one request each) batched into one call" in f.summary


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
