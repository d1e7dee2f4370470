"""The op-overhead finding's fixes follow the loop of tiny ops it counts: the optimizer's
per-parameter loop inside ``Optimizer.step`` gets the fused optimizer (estimated from the
trace, within 25% of ``AdamW(fused=True)`` measured without the profiler) and not the
model's fixes; a loop of the model's own tiny ops gets no optimizer fix.  Real captures
of the diagnosis corpus; a test is skipped when the corpus is not checked out."""

from __future__ import annotations

from pathlib import Path

from tracedata import corpus_case

from sofa_gui.core.analysis.facts_base import Fact, RunFacts
from sofa_gui.core.analysis.findings.fixes import FIXES, choose_fixes
from sofa_gui.core.analysis.findings.optimizer_loop import TinyLoops, fused_gain, no_update_loop
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

WITHIN = 0.25


def _overhead(capture: Path):
    a = analyze(load_trace(capture, use_cache=False))
    return next((f for f in a.findings if f.id == "op_overhead_bound"), None)


def _names(fixes) -> set[str]:
    return {f.name for f in fixes}


def test_the_optimizers_loop_of_tiny_ops_gets_the_fused_optimizer():
    """AdamW's default per-tensor loop on a CPU, with clip_grad_norm_ and a OneCycleLR
    schedule around it: 380 tiny ops a step inside Optimizer.step, the model's 123 too few
    to count.  The fix is ``AdamW(fused=True)`` (measured 1.15x; ``foreach=True`` gains
    nothing on the CPU, so it is not offered there), estimated from the loop's time and
    the math the fused step still does; batching or compiling the model is not offered."""
    truth, captures = corpus_case("pt_train_clip_onecycle")
    measured = truth["variants"]["fused"]["speedup"]
    assert measured > 1.1 and truth["variants"]["foreach"]["speedup"] < 1.02
    for capture in captures:
        f = _overhead(capture)
        assert f is not None
        assert _names(f.fixes) == {"fused optimizer"}, [x.text for x in f.fixes]
        hidden = {fix.name: why for fix, why in f.hidden_fixes}
        for name in ("batch or compile the model", "more work per op", "foreach optimizer"):
            assert name in hidden
        assert "Optimizer.step" in hidden["batch or compile the model"]
        assert f.estimated_by == "fused optimizer"
        assert abs(f.estimated_speedup / measured - 1) <= WITHIN, f.estimated_speedup
        assert "in-place ops" in f.summary and "bmm" not in f.summary


def test_the_models_loop_of_tiny_ops_gets_no_optimizer_fix():
    """A model made of thousands of tiny ops a step: its fixes batch or compile the model;
    the optimizer's few ops a step are no loop, so no optimizer fix is offered."""
    _, captures = corpus_case("pt_train_tiny_ops")
    f = _overhead(captures[0])
    assert f is not None and "batch or compile the model" in _names(f.fixes)
    assert "fused optimizer" not in _names(f.fixes)
    hidden = {fix.name: why for fix, why in f.hidden_fixes}
    assert "no loop of tiny ops inside the optimizer's step" in hidden["fused optimizer"]


def _facts(**values) -> RunFacts:
    return RunFacts({k: Fact(k, v, proof="test") for k, v in values.items()})


def _shown(**values) -> set[str]:
    shown, _ = choose_fixes(FIXES["op_overhead_bound"], _facts(**values))
    return _names(shown)


def test_the_fused_optimizer_is_not_offered_where_it_runs_already():
    base = {"framework": "pytorch", "mode": "training"}
    assert "fused optimizer" not in _shown(device="cpu", optimizer="fused", **base)
    assert "fused optimizer" in _shown(device="cpu", optimizer="foreach", **base)
    assert "foreach optimizer" not in _shown(device="cpu", optimizer="for_loop", **base)
    assert {"fused optimizer", "foreach optimizer"} <= _shown(
        device="cuda", optimizer="for_loop", **base)
    assert "foreach optimizer" not in _shown(device="cuda", optimizer="foreach", **base)


class _Named:
    def __init__(self, name: str):
        self.name = name


class _Loop:
    def speedup(self) -> float:
        return 1.2


def test_an_optimizer_without_a_fused_implementation_gets_none():
    loops = TinyLoops(True, False, "RMSprop")
    assert "no fused implementation" in loops.unseen(_Named("fused optimizer"))
    assert loops.unseen(_Named("foreach optimizer")) == ""
    assert TinyLoops(True, False, "AdamW").unseen(_Named("fused optimizer")) == ""


def test_the_fused_optimizer_is_estimated_only_where_the_trace_grounds_it():
    """An optimizer the trace does not name may have no fused implementation: the fix is
    shown without a number; with the model's loop counted too, the fused optimizer's own
    estimate replaces the optimizer's loop alone and says the model's tiny ops stay."""
    est, why, _ = fused_gain(TinyLoops(True, False, ""), _Loop())
    assert est is None and "does not name the optimizer's class" in why
    est, why, _ = fused_gain(TinyLoops(True, True, "AdamW"), _Loop())
    assert est == 1.2 and "model's tiny ops stay" in why
    est, _, _ = fused_gain(TinyLoops(True, False, "Adam"), _Loop())
    assert est == 1.2
    mixed = TinyLoops(True, True, "AdamW")
    assert mixed.unseen(_Named("batch or compile the model")) == ""
    assert mixed.unseen(_Named("fused optimizer")) == ""


def test_an_optimizer_loop_beside_the_model_loop_is_batched_with_it():
    """Forty small layers at batch 8 with SGD momentum: the model's and the optimizer's
    tiny ops are both counted.  A step on more samples pays the optimizer's update once for
    them all, so the finding's estimate batches both loops (no fused step's cost added) and
    comes no lower than 25% under what batches of 128 save per row (the fused step's cost
    added read 6.2x against 9.1x measured); the fused optimizer's own number replaces the
    optimizer's loop alone, so it is below the finding's."""
    truth, captures = corpus_case("pt_train_deep_stack_batch8")
    for cap in captures:
        f = _overhead(cap)
        assert f.estimated_speedup >= truth["fix"]["speedup"] * (1 - WITHIN)
        assert "pays the optimizer's update once" in f.summary
        fused = next(x for x in f.fixes if x.name == "fused optimizer")
        assert 1.0 < fused.estimate < f.estimated_speedup, fused.estimate
        assert "model's tiny ops stay" in fused.estimate_why
        assert f.estimated_by == ""


def test_the_fused_optimizer_beside_a_loop_over_the_weights_average_is_estimated_alone():
    """AdamW's per-tensor loop beside a Python loop that updates an average of the weights
    (``ema.mul_().add_()`` per parameter, outside Optimizer.step): both loops are counted,
    the finding's estimate removes both, and the fused optimizer's own estimate, which
    removes the optimizer's loop alone, lies within 25% of ``AdamW(fused=True)`` measured
    without the profiler (alone, and with the average batched too, which alone gains
    nothing)."""
    truth, captures = corpus_case("pt_train_ema_param_loop")
    alone = truth["variants"]["adamw_fused"]["speedup"]
    assert truth["variants"]["ema_foreach"]["speedup"] < 1.0
    for cap in captures:
        f = _overhead(cap)
        fused = next(x for x in f.fixes if x.name == "fused optimizer")
        for measured in (alone, truth["fix"]["speedup"]):
            assert abs(fused.estimate / measured - 1) <= WITHIN, (cap.name, fused.estimate)
        assert fused.estimate < f.estimated_speedup


def test_an_optimizer_step_with_no_per_parameter_loop_is_no_loop_of_tiny_ops():
    """Full-batch ``LBFGS`` with a closure: its step's 700 tiny ops (the two-loop
    recursion's ``dot`` and ``add_`` on one flat vector, the line search, the closure's
    backward nodes) have no foreach or fused implementation to remove them, so they are
    no loop of tiny ops (measured compute 1.00, no fix).  AdamW's per-parameter loop
    stays one (:func:`test_the_optimizers_loop_of_tiny_ops_gets_the_fused_optimizer`)."""
    truth, captures = corpus_case("pt_train_lbfgs_closure")
    assert truth["bound"] == "compute" and truth["fix"] is None
    for capture in captures:
        assert _overhead(capture) is None
    assert no_update_loop("LBFGS")
    assert not any(no_update_loop(c) for c in ("AdamW", "SGD", "RMSprop", ""))
