"""Compilation that recurs in steady state is a recompilation, bound ``startup``: on real
captures of a jitted JAX step whose batch shape changes every step and of a
``torch.compile(dynamic=False)`` model trained on a new batch size every step, against
one-time start-up (``jax.jit`` and ``torch.compile`` captured from their first call) and
steps that never compile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tracedata import SHARED
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.one_off import COMPILE, is_compile
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

LOOPS = Path(__file__).resolve().parents[1] / "data" / "torch-loops"


def analyzed(case: str, k: int = 0):
    return analyze(load_trace(capture(case, k), use_cache=False))


@pytest.mark.parametrize("k", [0, 1])
def test_a_step_that_compiles_again_every_step_is_start_up_bound_with_a_fixed_shape_fix(k):
    a = analyzed("jax_train_shape_recompile", k)
    assert a.verdict.bound == "startup" and a.verdict.share > 0.9
    top = a.findings[0]
    assert top.id == "recompile" and top.confidence >= 0.5
    assert "(PjitFunction(train))" in top.summary and "3 of 3" in top.summary
    # the estimate is the step without its compiles: its other work as profiled
    assert 20 < top.estimated_speedup < 200
    assert any("pad every batch" in f.text for f in top.fixes)
    assert all(f.framework in ("jax", "any") for f in top.fixes)
    assert {c.label.split(":")[0] for c in top.causes} >= {"backend_compile_and_load"}
    assert top.evidence and all(e.iteration is not None for e in top.evidence)
    # the compiles are not also claimed as compute
    assert not any(f.id == "compute_bound" for f in a.findings)


def test_torch_compile_guard_failures_every_step_are_a_recompilation_beside_the_first_compile():
    a = analyze(load_trace(LOOPS / "compile_recompile.json.gz", use_cache=False))
    assert a.verdict.bound == "startup"
    ids = [f.id for f in a.findings]
    assert ids[0] == "recompile"  # each new batch size compiles the frame again
    assert "startup_cost" in ids  # the first compile, in the warm-up step, is one-off
    top = a.findings[0]
    assert "(dynamo)" in top.summary and top.share > 0.5 and top.estimated_speedup > 2
    assert any("dynamic=True" in f.text and "mark_dynamic" in f.text for f in top.fixes)
    assert all(f.framework in ("pytorch", "any") for f in top.fixes)


@pytest.mark.parametrize("case", ["jax_compile_startup", "pt_train_compile_startup",
                                  "pt_infer_compile_startup", "pt_infer_compile_encoder"])
def test_one_time_compilation_stays_start_up_and_is_no_recompilation(case):
    a = analyzed(case)
    assert a.verdict.bound == "startup"
    ids = [f.id for f in a.findings]
    assert "recompile" not in ids and "startup_cost" in ids


@pytest.mark.parametrize("case", ["jax_train_jit", "jax_train_unjitted", "tf_jit_step_noise",
                                  "pt_train_variable_length"])
def test_steps_that_never_compile_have_no_recompilation(case):
    a = analyzed(case)
    assert "recompile" not in [f.id for f in a.findings]
    assert a.verdict.shares["startup"] < 0.05


def test_compile_spans_are_compiles_not_runs_of_compiled_code():
    compiles = ["backend_compile_and_load", "PjRtCpuClient::Compile",
                "_compile.compile_inner (dynamo_timed)", "lower_sharding_computation",
                "trace_to_jaxpr_dynamic", "dynamo", "entire_frame_compile"]
    runs = ["CompiledFunction", "CompiledFunctionBackward", "Torch-Compiled Region: 0/0",
            "TorchDynamo Cache Lookup", "ExecuteReplicated.__call__", "aten::mm"]
    assert all(COMPILE.search(n) for n in compiles)
    assert not any(COMPILE.search(n) for n in runs)



def test_a_python_frame_is_compile_work_by_its_function_not_its_file():
    # torch/_compile.py's ``inner`` is the wrapper that keeps TorchDynamo out of a call
    # (activation checkpointing, the optimizer's step): it runs in every step, compiling
    # nothing
    assert not is_compile("torch/_compile.py(22): inner")
    assert is_compile("torch/_dynamo/convert_frame.py(700): _compile")
    assert is_compile("backend_compile_and_load")


ACT_CHECKPOINT = SHARED / "tracelens" / "mi300" / "resnet_act_checkpoint.json.gz"


@pytest.mark.skipif(not ACT_CHECKPOINT.exists(), reason="public traces not present")
def test_activation_checkpointing_under_the_dynamo_wrapper_is_no_recompilation():
    a = analyze(load_trace(ACT_CHECKPOINT, use_cache=False))
    assert not any(f.id == "recompile" for f in a.findings)

def test_the_verdict_moves_only_the_recurring_compile_time():
    a = analyzed("jax_train_shape_recompile")
    f = next(f for f in a.findings if f.id == "recompile")
    shares = a.verdict.shares
    assert np.isclose(shares["startup"], f.share, atol=0.02)
    assert np.isclose(shares["startup"] + shares["compute"] + shares["host_overhead"], 1.0,
                      atol=0.02)


@pytest.mark.parametrize("k", [0, 1])
def test_a_tf_function_traced_again_every_step_is_recompilation(k):
    """A ``tf.function`` handed a new Python number each step (a decayed learning rate)
    traces a new graph each step, runs it as a new concrete function
    (``__inference_train_step_<n>``, a new ``n``) and instantiates it on its first call:
    start-up work repeated, not per-call framework set-up."""
    a = analyzed("tf_tape_retrace_python_lr", k)
    assert a.verdict.bound == "startup" and a.verdict.share > 0.8
    top = a.findings[0]
    assert top.id == "recompile" and top.confidence >= 0.5
    assert "setup_overhead_bound" not in [f.id for f in a.findings]
    labels = [c.label for c in top.causes]
    assert labels[0].startswith("tf.function-graph_building")
    assert any("__inference_train_step_" in x for x in labels)  # the new graph's first call
    assert any("not Python numbers" in f.text for f in top.fixes)
    assert all(f.framework in ("tensorflow", "any") for f in top.fixes)


@pytest.mark.parametrize("case", ["tf_predict_per_sample", "tf_fit_per_batch"])
def test_graph_building_for_a_step_function_traced_once_is_no_recompilation(case):
    """Keras' per-call set-up builds graphs of its input pipeline's functions every call,
    while its step function (one concrete function) is traced once: set-up, not
    recompilation."""
    a = analyzed(case)
    ids = [f.id for f in a.findings]
    assert "recompile" not in ids and ids[0] == "setup_overhead_bound"
