"""PRNG keys split one at a time from Python beside a jitted step (a key per dropout
layer, ``key, sub = jax.random.split(key)`` in a Python loop) are per-call overhead, not
input: the programs between the step's calls are all key splits and their unpacking, with
key-sized outputs.  Eager work that draws or gathers the batch's data beside the step
(noise drawn and added per batch) stays input.

Cases of the diagnosis corpus (``tests/data/corpus``); a test is skipped when the corpus is
not checked out.
"""

from __future__ import annotations

import pytest
from tracedata import corpus_context as analyzed
from tracedata import corpus_fix_speedup

from sofa_gui.core.analysis.findings.eager_ops import measure

WITHIN = 0.25


@pytest.mark.parametrize("k", [0, 1])
def test_keys_split_per_layer_in_python_are_per_call_overhead(k):
    _, a, ctx = analyzed("jax_train_dropout_keys_loop", k)
    d = measure(ctx)
    assert d.compiled_step and d.splits_keys and not d.updates_state
    assert a.verdict.bound == "host_overhead"
    ids = {f.id for f in a.findings}
    assert "op_overhead_bound" in ids and "eager_input_bound" not in ids
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert "jax.random.split(key, n) inside jax.jit" in f.summary


def test_keys_split_estimate_on_the_first_capture():
    _, a, _ = analyzed("jax_train_dropout_keys_loop", 0)
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    measured = corpus_fix_speedup("jax_train_dropout_keys_loop")
    assert abs(f.estimated_speedup / measured - 1.0) <= WITHIN


@pytest.mark.parametrize("case", ["jax_train_diffusion_noise_loop", "jax_train_jnp_augment"])
def test_eager_work_that_makes_the_batch_stays_input(case):
    """Key splits among the draws, gathers and arithmetic that make the batch do not make
    the dispatches key handling."""
    _, a, ctx = analyzed(case, 0)
    assert not measure(ctx).splits_keys
    assert a.verdict.bound == "input"
