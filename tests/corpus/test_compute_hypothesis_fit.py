"""The faster-compute hypothesis covers the compute the verdict leaves: where measured
findings take part of the compute categories into another bound (a loop of tiny ops is
host overhead, ops that make the batch are input), the compute card must not claim that
time too, or it shows a compute share beside the verdict's that both cannot be."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id

from sofa_gui.core.analysis.findings.compute_rules import COMPUTE_GAIN


@pytest.mark.parametrize("case", ["pt_train_tiny_ops", "jax_train_jnp_augment",
                                  "pt_infer_batch1_convnet"])
def test_the_hypothesis_covers_only_the_compute_the_verdict_leaves(case):
    _, a = corpus_analysis(case)
    assert any("compute" in src for _, _, _, src in a.verdict.moved)
    f = findings_by_id(a)["compute_bound"]
    left = a.verdict.shares["compute"]
    assert f.covers == pytest.approx(left)
    assert f.share == pytest.approx(left * (1 - 1 / COMPUTE_GAIN))
    assert f.estimated_speedup == pytest.approx(1 / (1 - f.share))
    assert f"the verdict reads all but {round(100 * left, 1)}%" in f.summary


def test_where_the_verdict_moves_nothing_the_hypothesis_keeps_its_compute():
    _, a = corpus_analysis("jax_train_metrics_callback")
    assert not a.verdict.moved
    f = findings_by_id(a)["compute_bound"]
    assert f.covers == pytest.approx(a.verdict.shares["compute"], abs=0.01)
    assert "the verdict reads all but" not in f.summary
