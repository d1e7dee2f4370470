"""Ops dispatched one at a time beside a compiled step: a jitted CNN step fed by a Python
generator that augments each photo with un-jitted ``jax.numpy`` calls (captured with the
Python tracer off) makes its batch op by op between the step's calls. That is input, and
the fix compiles the augmentation, not the step; an un-jitted step, or a function jitted
per sample, stays per-op overhead. A jitted gradient whose hand-written Adam update runs
un-jitted over a dict of parameters dispatches only elementwise arithmetic between the
gradient's calls: the training state updated op by op, per-op overhead whose fix jits
the update with the gradient. Accuracy and confusion counts computed with ``jax.numpy``
after a jitted forward dispatch comparisons and reductions and make no data: metrics of
the compiled call's results, per-op overhead whose fix computes them inside the jitted
step."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id


@pytest.mark.parametrize("k", [0, 1])
def test_a_batch_augmented_op_by_op_beside_a_jitted_step_is_input(k):
    _, a = corpus_analysis("jax_train_jnp_augment", k)
    found = findings_by_id(a)
    assert a.verdict.bound == "input"  # measured without the profiler: input 0.61
    assert "op_overhead_bound" not in found
    f = found["eager_input_bound"]
    assert "one compiled program" in f.summary and "jax.jit)" not in f.summary
    # measured: jax.jit(jax.vmap(augment)) once per batch, 2.25x
    assert 2.25 / 1.25 <= f.estimated_speedup <= 2.25 * 1.25
    assert any("jax.vmap" in x.text for x in f.fixes)
    assert not any("jit the whole step" in x.text for x in f.fixes)


@pytest.mark.parametrize("k", [0, 1])
def test_a_state_updated_op_by_op_beside_a_jitted_gradient_is_per_op_overhead(k):
    _, a = corpus_analysis("jax_train_unjitted_optimizer", k)
    found = findings_by_id(a)
    assert a.verdict.bound == "host_overhead"  # measured without the profiler: 0.80
    assert "eager_input_bound" not in found
    f = found["op_overhead_bound"]
    assert "elementwise arithmetic" in f.summary and "update of the state" in f.summary
    # measured: the Adam update jitted with the gradient in one step, 4.67x
    assert 4.67 * 0.75 <= f.estimated_speedup <= 4.67 * 1.25  # the scorer's 25%
    assert [x.name for x in f.fixes][0] == "jit the update with the step"
    assert not any("jax.vmap" in x.text for x in f.fixes)


def test_the_update_reading_needs_arithmetic_only():
    """The augmenting generator's programs draw, slice, convert and stack: not an update."""
    _, a = corpus_analysis("jax_train_jnp_augment", 0)
    assert not any(x.name == "jit the update with the step"
                   for f in a.findings for x in f.fixes)


@pytest.mark.parametrize("case", ["jax_train_unjitted", "jax_infer_per_sample_jit"])
def test_a_step_not_compiled_once_a_step_stays_per_op_overhead(case):
    _, a = corpus_analysis(case)
    assert a.verdict.bound == "host_overhead"
    assert "eager_input_bound" not in findings_by_id(a)


@pytest.mark.parametrize("k", [0, 1])
def test_metrics_reduced_op_by_op_after_a_jitted_forward_are_per_op_overhead(k):
    _, a = corpus_analysis("jax_eval_flax_metrics_unjitted", k)
    found = findings_by_id(a)
    assert a.verdict.bound == "host_overhead"  # measured without the profiler: 0.73
    assert "eager_input_bound" not in found
    f = found["op_overhead_bound"]
    assert f.title == "Metrics computed op by op outside the compiled step"
    assert "compare and reduce" in f.summary
    names = [x.name for x in f.fixes]
    assert "metrics inside the jitted step" in names
    assert "jit the update with the step" not in names


def test_the_metrics_reading_needs_no_data_made():
    """The augmenting generator compares (a flip's coin) but draws, slices and converts
    data: a batch made, not metrics; the Adam update is arithmetic, not metrics; a step
    run op by op and a function jitted per sample are per-op overhead of other kinds."""
    for case in ("jax_train_jnp_augment", "jax_train_unjitted_optimizer", "jax_train_unjitted",
                 "jax_infer_per_sample_jit"):
        _, a = corpus_analysis(case, 0)
        assert not any(x.name == "metrics inside the jitted step"
                       for f in a.findings for x in f.fixes)
        assert not any(f.title.startswith("Metrics") for f in a.findings)
