"""Ordinary loops read on their corpus captures: the optimizer's implementation read inside
its own step (``clip_grad_norm_``'s foreach ops are not AdamW's), a loader whose tiny
indexing ops only the profiler's cost makes count, a jitted function called once per
example many times a step (the step is the run of calls, not each call), a batch built
in Python and converted with ``tf.convert_to_tensor`` (the building is input), and the
constants ``train_on_batch`` writes into its metrics' variables between steps (not
input)."""

from __future__ import annotations

import functools
import json

import pytest
from tracedata import CORPUS
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.findings import evaluate_rules
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace


@functools.cache
def analyzed(case: str, k: int = 0):
    t = load_trace(capture(case, k), use_cache=False)
    return t, analyze(t)


def truth(case: str) -> dict:
    return json.loads((CORPUS / case / "truth.json").read_text())


def ids(a) -> set[str]:
    return {f.id for f in a.findings}


@pytest.mark.parametrize("k", [0, 1])
def test_clip_grad_norms_foreach_ops_are_not_the_optimizers(k):
    """AdamW's default per-tensor loop with ``clip_grad_norm_`` before it: the clip's
    ``_foreach_norm`` / ``_foreach_mul_`` run outside ``Optimizer.step``, whose own ops are
    per tensor, so the optimizer reads as its for-loop."""
    t, _ = analyzed("pt_train_clip_onecycle", k)
    f = run_facts(t).get("optimizer")
    assert f.value == "for_loop" and "Optimizer.step" in f.proof


def test_the_optimizers_loop_is_measured_overhead():
    """The truth measures ``AdamW(fused=True)`` beside the run: what it saves is the
    per-tensor loop's overhead, over 5% of the step, so the tiny-ops finding is no false
    positive; ``foreach``, which on CPU tensors runs the same per-tensor kernels, saves
    nothing measurable."""
    t = truth("pt_train_clip_onecycle")
    assert t["shares"]["host_overhead"] >= 0.05
    assert t["variants"]["foreach"]["speedup"] < 1.05 < t["variants"]["fused"]["speedup"]


@pytest.mark.parametrize("k", [0, 1])
def test_a_loaders_tiny_ops_count_without_the_profilers_cost(k):
    """A ``TensorDataset`` indexed per sample: 256 ``aten::select`` per batch, each with
    the profiler's cost, take the loading over 5% of the captured step (6.1% in one
    capture); without that cost it is under 5% (4.3% measured), so no input finding."""
    t, a = analyzed("pt_train_clip_onecycle", k)
    assert truth("pt_train_clip_onecycle")["shares"]["input"] < 0.05
    assert "input_pipeline_bound" not in ids(a)
    below = [f for f in evaluate_rules(t, a.iterations, a.breakdown)
             if f.id == "input_pipeline_bound"]
    assert not below or below[0].severity == "none"
    assert not below or below[0].summary.startswith("Without the profiler's own cost per op")


@pytest.mark.parametrize("k", [0, 1])
def test_a_jitted_function_called_per_example_is_one_step_per_run_of_calls(k):
    """64 calls of one jitted scorer a step, then the scores stacked and read: with or
    without the loop body's Python frames the capture's 4 steps are found, and the
    per-step run of calls is no periodic extra."""
    _, a = analyzed("jax_infer_per_sample_jit", k)
    assert len(a.iterations) == truth("jax_infer_per_sample_jit")["capture_steps"]
    assert "periodic_extra" not in ids(a)
    assert a.verdict.bound == "host_overhead"


@pytest.mark.parametrize("k", [0, 1])
def test_a_batch_built_in_python_and_converted_is_input(k):
    """Features engineered in Python each step and converted with
    ``tf.convert_to_tensor``: the trace records only the conversion, after time in which
    the loop's thread records nothing; that time and the conversion are the input's
    (0.66 of the step measured without the profiler)."""
    t, a = analyzed("tf_tape_numpy_convert", k)
    assert a.verdict.bound == "input"
    f = next(x for x in a.findings if x.id == "input_pipeline_bound")
    assert abs(f.share - truth("tf_tape_numpy_convert")["shares"]["input"]) < 0.1
    host = a.breakdown.host
    assert any(t.name_of(int(j)) == "tf.constant" for j in host.role_slices["data_loading"])


@pytest.mark.parametrize("k", [0, 1])
def test_constants_written_into_variables_are_not_input(k):
    """``model.train_on_batch`` resets its metrics before each step: ``tf.constant`` values
    written by ``AssignVariableOp``, after Keras's Python.  They set state, not a batch:
    the steady steps' input is the prefetched iterator's fetch alone (0.02 measured), so
    no input finding."""
    t, a = analyzed("tf_train_on_batch_cold", k)
    s = t.slices
    consts = [j for j in range(len(s.start)) if t.name_of(j) == "tf.constant"]
    assert len(consts) > 8  # the resets are in the trace
    loading = {int(j) for j in a.breakdown.host.role_slices["data_loading"]}
    assert not loading.intersection(consts)
    assert "input_pipeline_bound" not in ids(a)
    assert a.verdict.bound == "startup"
