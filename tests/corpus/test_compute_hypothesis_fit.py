"""The faster-compute hypothesis covers the compute the verdict leaves: where measured
findings take part of the compute categories into another bound (a loop of tiny ops is
host overhead, ops that make the batch are input), the compute card must not claim that
time too, or it shows a compute share beside the verdict's that both cannot be."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id

from sofa_gui.core.analysis.findings.compute_rules import COMPUTE_GAIN
from sofa_gui.core.analysis.pipeline import verdict_of

#: (the compute the verdict leaves, the hypothesis's share, its estimate) as measured: the
#: share is what compute twice as fast saves of the compute left.
LEFT = {"pt_train_tiny_ops": (0.114, 0.057, 1.060),
        "jax_train_jnp_augment": (0.413, 0.206, 1.260),
        "pt_infer_batch1_convnet": (0.254, 0.127, 1.145)}


@pytest.mark.parametrize("case", list(LEFT))
def test_the_hypothesis_covers_only_the_compute_the_verdict_leaves(case):
    _, a = corpus_analysis(case)
    assert any("compute" in src for _, _, _, src in a.verdict.moved)
    f = findings_by_id(a)["compute_bound"]
    left = a.verdict.shares["compute"]
    assert f.covers == pytest.approx(left)
    covers, share, speedup = LEFT[case]
    assert (f.covers, f.share) == pytest.approx((covers, share), abs=0.001)
    assert f.estimated_speedup == pytest.approx(speedup, abs=0.001)
    assert f"the verdict reads all but {round(100 * left, 1)}%" in f.summary


def test_where_the_verdict_moves_nothing_the_hypothesis_keeps_its_compute():
    _, a = corpus_analysis("jax_train_metrics_callback")
    assert not a.verdict.moved
    f = findings_by_id(a)["compute_bound"]
    assert f.covers == pytest.approx(a.verdict.shares["compute"], abs=0.01)
    assert "the verdict reads all but" not in f.summary


@pytest.mark.parametrize("case, speedup", [("pt_train_single_thread_cnn", 1.981),
                                           ("pt_train_grad_norms_item", 1.705),
                                           ("jax_train_device_put_float64", 1.821)])
def test_the_hypothesis_says_what_its_estimate_assumes(case, speedup):
    """The estimate is the gain of compute made 2x faster, no measured fix's: the JSON says
    so, so that nobody reads it as the gain of another change (putting the data on the
    device once, one read of the gradient norms)."""
    trace, a = corpus_analysis(case)
    f = findings_by_id(a)["compute_bound"]
    assert f.estimate_assumes == f"{COMPUTE_GAIN:g}x faster compute"
    assert f.to_dict()["estimate_assumes"] == f.estimate_assumes
    assert f.estimated_speedup == pytest.approx(speedup, abs=0.001)  # 2x on what it covers
    measured = [x for x in a.findings if x.id != "compute_bound"]
    assert all("estimate_assumes" not in x.to_dict() for x in measured)


def test_on_a_pytorch_cpu_run_the_threads_fix_is_named_and_carries_the_hypothesis():
    """More intra-op threads is one of the changes the hypothesis stands for: the fix has a
    name (the change a measured thread count is compared with) and no estimate of its own,
    so the hypothesis's applies to it; a JAX run is not offered it."""
    _, a = corpus_analysis("pt_train_single_thread_cnn")
    f = findings_by_id(a)["compute_bound"]
    fix = next(x for x in f.fixes if x.name == "more intra-op threads")
    assert "set_num_threads" in fix.text and "estimated_speedup" not in fix.to_dict()
    _, a = corpus_analysis("jax_train_device_put_float64")
    names = [x.name for x in findings_by_id(a)["compute_bound"].fixes]
    assert "more intra-op threads" not in names


@pytest.mark.parametrize("case", ["pt_train_tiny_ops", "jax_train_jnp_augment",
                                  "pt_train_detect_anomaly_on", "jax_train_scan_steps",
                                  "pt_infer_batch1_convnet"])
def test_the_verdict_read_before_the_notes_is_the_verdict_of_the_noted_findings(case):
    """The verdict is computed once, before the findings are noted (small findings say so,
    the compute hypothesis narrows): the notes move no time, so the verdict of the noted
    findings is the same, and the analysis need not compute it twice."""
    _, a = corpus_analysis(case)
    again = verdict_of(a.iterations, a.breakdown, a.findings)
    assert again.to_dict() == a.verdict.to_dict()
    assert again.side == a.verdict.side
