"""Ordinary programs read on their corpus captures: a training loop left with autograd's
anomaly detection on (the mode read as a run fact, its cost as host overhead with the fix
that turns it off, estimated from the forward ops' stack capture and the backward's NaN
checks), and an MLP served in float64 (precision fp64, the float32 fix estimated from the
float64 ops' time instead of the bf16 autocast fix).  Neither reading appears on a run
without its cause."""

from __future__ import annotations

import pytest
from test_loops_routine import analyzed, finding, fix_named

from sofa_gui.core.analysis.run_facts import run_facts

#: Cases of other kinds: a training CNN, bf16 autocast, an inference MLP, an LSTMCell loop.
OTHERS = ("pt_train_compute_cnn", "pt_train_autocast_bf16", "pt_infer_no_dataloader",
          "pt_train_lstmcell_teacher_forcing")


@pytest.mark.parametrize("k", [0, 1])
def test_anomaly_detection_left_on_is_host_overhead_with_the_fix_that_turns_it_off(k):
    """480 NaN checks inside the backward's node evaluations prove the mode; the forward
    ops' own time beyond their work (the stack each stores) and the checks are most of the
    step: host overhead (0.72 measured), off 3.51x measured."""
    t, a = analyzed("pt_train_detect_anomaly_on", k)
    fact = run_facts(t).get("anomaly_detection")
    assert fact.value == "on" and "aten::isnan" in fact.proof
    assert a.verdict.bound == "host_overhead" and a.verdict.share > 0.55
    f = finding(a, "anomaly_detection_on")
    assert f is not None and f.confidence >= 0.5 and f.share > 0.45
    fix = fix_named(f, "anomaly detection off")
    assert fix is not None and "set_detect_anomaly(False)" in fix.text
    assert 3.51 * 0.75 <= fix.estimate <= 3.51 * 1.25
    assert f.estimated_speedup == fix.estimate
    assert {"aten::t", "aten::addmm", "aten::isnan"} <= {c.label for c in f.causes}


@pytest.mark.parametrize("case", OTHERS)
def test_no_anomaly_finding_where_the_backward_checks_nothing(case):
    t, a = analyzed(case)
    assert run_facts(t).value("anomaly_detection") != "on"
    assert finding(a, "anomaly_detection_on") is None


@pytest.mark.parametrize("k", [0, 1])
def test_a_float64_model_reads_fp64_and_gets_the_float32_fix_not_autocast(k):
    """Every matmul takes ``double`` inputs: precision fp64; the float32 fix's estimate is
    the float64 ops at half their time (1.88x measured), and bf16 autocast, which leaves
    float64 ops as they are, is not offered."""
    t, a = analyzed("pt_infer_float64_mlp", k)
    assert run_facts(t).value("precision") == "fp64"
    f = finding(a, "compute_bound")
    fix = fix_named(f, "float32 instead of float64")
    assert fix is not None and ".float()" in fix.text
    assert 1.88 * 0.75 <= fix.estimate <= 1.88 * 1.25
    assert "float64" in fix.estimate_why and "(precision fp64)" in f.summary
    assert fix_named(f, "bf16 autocast on the CPU") is None


@pytest.mark.parametrize("case", OTHERS)
def test_no_float32_fix_where_the_model_computes_in_float32_or_bf16(case):
    t, a = analyzed(case)
    assert run_facts(t).value("precision") != "fp64"
    assert fix_named(finding(a, "compute_bound"), "float32 instead of float64") is None
