"""An evaluation under DDP that gathers every rank's predictions after each batch spends its
step in the collective; its fix is to gather less often (once a pass), which the
communication finding offers for an inference run, while a training run keeps its
gradient-communication fixes (buckets, `no_sync`, compression hooks). The fix needs
collectives that gather or reduce: a pipeline's sends and receives move the model's own
activations, with no results to gather less often."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id

from sofa_gui.core.analysis.findings.compute_rules import RESULTS_COLLECTIVE


def _shown(case: str, k: int) -> list[str]:
    _, a = corpus_analysis(case, k)
    return [f["text"] for f in findings_by_id(a)["communication_bound"].to_dict()["fixes"]]


@pytest.mark.parametrize("k", [0, 1])
def test_an_evaluation_gathering_each_batch_is_told_to_gather_less_often(k):
    shown = _shown("pt_ddp_gloo_eval_gather_preds", k)
    assert any(t.startswith("Gather results less often") for t in shown)
    assert not any("no_sync" in t for t in shown)


def test_a_training_run_keeps_its_gradient_fixes():
    shown = _shown("pt_ddp_gloo_join_uneven_shards", 0)
    assert not any(t.startswith("Gather results less often") for t in shown)
    assert any("no_sync" in t for t in shown)


def _collectives(case: str) -> set[str]:
    trace, _ = corpus_analysis(case, 0)
    return {n for n in trace.names if n.startswith(("gloo:", "c10d::"))}


def test_gathers_and_reductions_are_results_collectives_sends_are_not():
    gathers = _collectives("pt_ddp_gloo_eval_gather_preds")
    sends = _collectives("pt_ddp_gloo_gpipe_send_recv")
    assert gathers and all(RESULTS_COLLECTIVE.search(n) for n in gathers)
    assert sends and not any(RESULTS_COLLECTIVE.search(n) for n in sends)
    assert not RESULTS_COLLECTIVE.search("gloo:broadcast")
    assert not RESULTS_COLLECTIVE.search("gloo:all_to_all")
    assert not RESULTS_COLLECTIVE.search("gloo:reduce_scatter")
