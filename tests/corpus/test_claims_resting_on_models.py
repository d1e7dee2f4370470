"""A finding is confident only where the trace measures what makes it count.

- Start-up is one-off work: a report that calls Keras ``evaluate`` once per customer
  region builds a new ``tf.data`` pipeline, iterator and function in each call, so the
  window's first iteration holds the first of a set-up every few later iterations make
  again. It is not sold as paid once (the truth measures no start-up); a compile or a
  first call that later steps never repeat still is, and so is a warm-up that is mostly
  the loader workers' first fill, whatever else recurs beside them.
- An input wait under the moderate share is no input bottleneck by itself; the cores a
  pipeline's threads take from the step count by an even share of the cores, a model
  the trace does not measure. A finding that only that model lifts over the moderate
  share says so and stays under the confidence that counts (a bucketed ``from_generator``
  pipeline beside a compute-bound GradientTape step: input 0.02 measured).
"""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id

from sofa_gui.core.analysis.findings.run_rules import _may_recur

CONFIDENT = 0.5


@pytest.mark.parametrize("k", [0, 1])
def test_a_set_up_later_calls_make_again_is_not_one_off(k):
    _, a = corpus_analysis("tf_eval_per_segment_evaluate", k)
    st = findings_by_id(a)["startup_cost"]
    assert st.confidence < CONFIDENT
    assert st.tentative and "make again" in st.summary
    assert a.verdict.bound == "host_overhead"


@pytest.mark.parametrize("case", ["jax_compile_startup", "tf_train_on_batch_cold",
                                  "pt_train_compile_startup"])
def test_first_use_work_no_later_step_repeats_stays_one_off(case):
    _, a = corpus_analysis(case, 0)
    st = findings_by_id(a)["startup_cost"]
    assert st.confidence >= CONFIDENT and "make again" not in st.summary


def test_a_warm_up_with_a_compile_call_or_mostly_the_workers_fill_is_not_a_recurring_set_up():
    warm, extra = 40e6, 5e6
    assert _may_recur(warm, extra, named=False, fill=0.0)
    assert not _may_recur(warm, extra, named=True, fill=0.0)  # a compile call in it
    assert not _may_recur(warm, extra, named=False, fill=0.6 * warm)  # the workers' fill
    assert not _may_recur(extra, warm, named=False, fill=0.0)  # one-off calls outweigh it


@pytest.mark.parametrize("k", [0, 1])
def test_a_short_wait_lifted_only_by_modelled_contention_is_held_tentative(k):
    _, a = corpus_analysis("tf_tape_reduce_retracing_buckets", k)
    f = findings_by_id(a)["input_pipeline_bound"]
    assert f.share < 0.05 and f.confidence < CONFIDENT
    assert "not measured" in f.confidence_why
    assert "not measured" in f.tentative  # said, and ranked after the measured findings
    assert a.verdict.bound == "compute"


def test_a_wait_over_the_moderate_share_keeps_its_confidence():
    _, a = corpus_analysis("tf_keras_fit_slow_map", 0)
    f = findings_by_id(a)["input_pipeline_bound"]
    assert f.share >= 0.05 and f.confidence >= CONFIDENT
    assert "not measured" not in f.confidence_why
    assert not f.tentative
