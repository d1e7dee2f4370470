"""Python around each compiled call: Flax NNX's ``nnx.jit`` splits and merges the model's,
the optimizer's and the metrics' object graph in Python on every call, thousands of
frames around a program a plain ``jax.jit`` would call alone.  The wrapper is the frame
between the loop's body and the call; a loop body that calls its jitted step itself has
none, and a Flax ``TrainState`` step jitted with ``jax.jit`` has none either."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id

#: measured without the profiler: a jax.jit of a pure step over nnx.split state, 2.79x
NNX_FIX = 2.787


@pytest.mark.parametrize("k", [0, 1])
def test_python_around_each_nnx_jit_call_is_host_overhead_with_its_fix(k):
    _, a = corpus_analysis("jax_train_nnx_jit_optimizer", k)
    assert a.verdict.bound == "host_overhead"  # measured: 0.64
    f = findings_by_id(a)["wrapper_overhead_bound"]
    assert f is a.findings[0]
    assert "compilation.py" in f.summary and "nnx_train_step" in f.summary
    assert NNX_FIX * 0.75 <= f.estimated_speedup <= NNX_FIX * 1.25  # the scorer's 25%
    assert [x.name for x in f.fixes][0] == "jit a pure function"
    # its share is what the breakdown counts as Python, no more
    assert f.share <= a.verdict.shares["host_overhead"] + 1e-6


@pytest.mark.parametrize("case", ["jax_train_jit", "jax_train_flax_trainstate_multisteps",
                                  "jax_keras_fit_pydataset_records", "tf_fit_numpy_small_batch",
                                  "tf_gradient_tape"])
def test_a_jitted_step_called_from_the_loop_body_has_no_wrapper(case):
    _, a = corpus_analysis(case, 0)
    assert "wrapper_overhead_bound" not in findings_by_id(a)
