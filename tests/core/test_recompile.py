"""Compilation that recurs in steady state is a recompilation, bound ``startup``: on real
captures of a jitted JAX step whose batch shape changes every step and of a
``torch.compile(dynamic=False)`` model trained on a new batch size every step, against
one-time start-up (``jax.jit`` and ``torch.compile`` captured from their first call) and
steps that never compile; the loading of each new program counted with its compile, and the
first run of a program just compiled read as cold (the estimate a lower bound where the
trace holds no warm run of it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tracedata import SHARED
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.findings.first_runs import FirstRuns, _xla_runs, first_runs
from sofa_gui.core.analysis.findings.recompile_rules import _estimate
from sofa_gui.core.analysis.findings.recompiles import Recompiles, _slow_path, recompiles
from sofa_gui.core.analysis.iterations.dispatch import function_module
from sofa_gui.core.analysis.one_off import COMPILE, is_compile
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.text import gain_text
from sofa_gui.core.importers import load_trace
from sofa_gui.core.query.tables import findings_table

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
    assert top.fixes[0].name != "jit once before the loop"  # a new shape, not a new function


@pytest.mark.parametrize("k", [0, 1])
def test_a_lambda_jitted_anew_every_step_is_told_to_jit_once_before_the_loop(k):
    a = analyzed("jax_train_jit_lambda_in_loop", k)
    top = a.findings[0]
    assert a.verdict.bound == "startup" and top.id == "recompile"
    assert "PjitFunction(<lambda>)" in top.summary
    assert top.fixes[0].name == "jit once before the loop"
    # measured without the profiler: 839x for sgd_step jitted once; the trace holds no
    # warm run of the program, so the estimate is a floor that holds
    assert top.estimate_floor and top.estimated_speedup <= 839


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


@pytest.mark.parametrize("k", [0, 1])
def test_a_tf_function_defined_in_the_request_handler_is_told_to_make_it_once(k):
    """Measured without the profiler: the tf.function made once at load, 4.32x."""
    a = analyzed("tf_infer_function_per_request", k)
    top = a.findings[0]
    assert a.verdict.bound == "startup" and top.id == "recompile"
    assert "tf.function made once" in [f.name for f in top.fixes]


@pytest.mark.parametrize("case", ["tf_predict_per_sample", "tf_fit_per_batch"])
def test_graph_building_for_a_step_function_traced_once_is_no_recompilation(case):
    """Keras' per-call set-up builds graphs of its input pipeline's functions every call,
    while its step function (one concrete function) is traced once: set-up, not
    recompilation."""
    a = analyzed(case)
    ids = [f.id for f in a.findings]
    assert "recompile" not in ids and ids[0] == "setup_overhead_bound"


def steady_work(case: str, k: int = 0):
    """(trace, context, recurring compiles) of a corpus capture."""
    t = load_trace(capture(case, k), use_cache=False)
    a = analyze(t)
    ctx = make_context(t, a.iterations, a.breakdown)
    return t, ctx, recompiles(ctx)


def named(t, name: str) -> np.ndarray:
    s = t.slices
    return np.flatnonzero(s.name == t.names.index(name))


RUN = "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice"


@pytest.mark.parametrize("case", ["jax_train_shape_recompile", "jax_train_static_lr_recompile"])
def test_a_jitted_call_that_compiles_loads_its_program_and_dispatches_it_from_python(case):
    """After ``backend_compile_and_load`` the call wraps and caches the new executable
    (recorded as nothing with the Python tracer off), then, having missed the C++ fast
    path, dispatches the run through JAX's Python path (``shard_args``,
    ``ExecuteReplicated.__call__``) up to the run's dispatch: that time is the new
    program's, counted as recompilation; the run's dispatch itself stays."""
    t, ctx, rc = steady_work(case)
    s = t.slices
    seen = 0
    for c in named(t, "backend_compile_and_load"):
        k = int(np.searchsorted(rc.starts, s.end[c], side="right")) - 1
        if k < 0 or rc.starts[k] > s.start[c]:
            continue  # a compile outside the steady steps
        py, run = named(t, "ExecuteReplicated.__call__"), named(t, RUN)
        py = py[s.start[py] >= s.end[c]].min()
        run = run[(s.start[run] > s.start[py]) & (s.end[run] <= s.end[py])]
        assert rc.ends[k] == s.start[run].min() and rc.ends[k] - s.end[c] > 100_000
        seen += 1
    assert seen >= ctx.ph.n_steady - 1


def test_a_warm_jitted_call_dispatches_from_cpp_with_no_python_path():
    """A jitted step that compiled before the capture calls its program from C++ every
    step: no ``ExecuteReplicated.__call__``, the run's dispatch in the call itself."""
    t, ctx, rc = steady_work("jax_train_jit")
    calls = named(t, "PjitFunction(train_step)")
    assert rc is None and len(calls) >= ctx.ph.n_steady
    assert "ExecuteReplicated.__call__" not in t.names
    s, run = t.slices, named(t, RUN)
    assert all(((s.start[run] > s.start[c]) & (s.end[run] <= s.end[c])).any() for c in calls)


def test_a_step_with_host_callbacks_keeps_its_python_path():
    """A compiled function with host callbacks (effects) dispatches from Python on every
    call, warm too: there that path is no recompilation's."""
    t = load_trace(capture("jax_train_metrics_callback"), use_cache=False)
    mine = np.flatnonzero(t.slices.lane == t.slices.lane[named(t, RUN)[0]])
    after = np.sort(t.slices.start[named(t, "ExecuteReplicated.__call__")]) - 1
    assert len(after) and (_slow_path(t, mine, after, after + 10**9) == after).all()


@pytest.mark.parametrize("k", [0, 1])
def test_a_retraced_tf_function_counts_from_its_call_to_its_kernels(k):
    """The ``tf.function`` call that traces again counts from its start (its cache lookup,
    which missed) to where the new concrete function's first run has created its executor
    and runs the graph (``FunctionRun``)."""
    t, ctx, rc = steady_work("tf_tape_retrace_python_lr", k)
    s = t.slices
    steady = [(a, z) for a, z in zip(rc.starts, rc.ends) if z - a > 1_000_000]
    calls, ready = named(t, "train_step"), named(t, "FunctionRun")
    assert len(steady) == ctx.ph.n_steady
    for a, z in steady:
        assert a in s.start[calls] and z in s.start[ready]


@pytest.mark.parametrize("case", ["jax_train_shape_recompile", "jax_train_static_lr_recompile",
                                  "tf_tape_retrace_python_lr", "jax_infer_dynamic_padding"])
def test_steps_that_run_only_programs_just_compiled_get_a_lower_bound(case):
    """Each step runs the program it has just compiled, once: a cold first run, with no
    warm run of it in the trace; the estimate says it is a lower bound, and it is one."""
    t, ctx, rc = steady_work(case)
    fr = first_runs(ctx, rc)
    assert fr.n == ctx.ph.n_steady and fr.warm_ns is None and fr.cold_ns > 0
    f = next(f for f in analyzed(case).findings if f.id == "recompile")
    assert "at least" in f.summary and "lower bound" in f.confidence_why
    truth = json.loads((capture(case).parents[0] / "truth.json").read_text())
    assert f.estimated_speedup < truth["fix"]["speedup"]
    # every surface says so: JSON, SQL, text (the card: tests/gui/test_finding_cards.py)
    assert f.estimate_floor and f.to_dict()["estimate_is_lower_bound"] is True
    assert findings_table(t, [f]).column("speedup_is_lower_bound").to_pylist() == [True]
    assert f"estimated speed-up at least {f.estimated_speedup:.2f}x" in gain_text(f)


def test_an_estimate_the_trace_sizes_in_full_is_no_lower_bound():
    f = next(f for f in analyzed("pt_train_tiny_ops").findings
             if f.estimated_speedup is not None)
    assert not f.estimate_floor and "estimate_is_lower_bound" not in f.to_dict()
    assert "at least" not in gain_text(f)


def test_later_runs_of_a_program_are_read_as_its_warm_runs():
    """XLA's thunks name the program and the run: a jitted step run every step is one
    program, run once per step."""
    t, ctx, _ = steady_work("jax_train_jit")
    runs = [r for r in _xla_runs(t) if r[0] == function_module("PjitFunction(train_step)")]
    assert len(runs) >= ctx.ph.n_steady and len({r[1] for r in runs}) == 1


def test_a_first_run_counts_at_its_warm_runs_where_the_trace_has_them():
    """Where the same program runs again later, its first run's excess over those runs is
    the program's set-up, counted with the compiles; without them the estimate stays the
    step as profiled, a lower bound."""
    n, ms = 2, 1_000_000
    rc = Recompiles(0, n, np.zeros(0, np.int64), np.zeros(0), np.array([95.0, 95.0]) * ms,
                    np.zeros(0, np.int64), np.zeros(0, np.int64), 200.0 * ms)
    cold = _estimate(rc, FirstRuns(n, 8.0 * ms, None), n)
    warm = _estimate(rc, FirstRuns(n, 8.0 * ms, 2.0 * ms), n)
    assert cold[0] == pytest.approx(20.0) and cold[2]
    assert warm[0] == pytest.approx(200.0 / 4.0) and not warm[2]
    assert "later runs" in warm[1]
