"""The ``optimizer`` run fact where no ``torch.optim`` optimizer steps (no
``Optimizer.step`` span): a weight update written by hand is no foreach optimizer because
``clip_grad_norm_`` runs foreach ops, and one written with ``torch._foreach_add_`` is.
Real captures: the corpus's word language model (clipping, then ``p.data.add_`` per
parameter) and profiles made here."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis

from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace


def _profiled(tmp_path, how: str) -> object:
    """The optimizer fact of a small regression trained with clipping and an update by
    hand: per parameter (``how`` "loop") or one ``_foreach_add_`` ("foreach")."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            model.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            params = list(model.parameters())
            with torch.no_grad():
                if how == "foreach":
                    torch._foreach_add_(params, [p.grad for p in params], alpha=-0.1)
                else:
                    for p in params:
                        p.add_(p.grad, alpha=-0.1)
    out = tmp_path / "trace.json"
    prof.export_chrome_trace(str(out))
    return run_facts(load_trace(out, use_cache=False)).value("optimizer")


@pytest.mark.parametrize("k", [0, 1])
def test_clipping_beside_an_update_by_hand_is_no_optimizer(k):
    _, a = corpus_analysis("pt_train_word_lm_bptt", k)
    assert a.run.value("optimizer") is None


def test_a_profiled_update_by_hand_after_clipping_reads_no_optimizer(tmp_path):
    assert _profiled(tmp_path, "loop") is None


def test_a_foreach_update_by_hand_reads_foreach(tmp_path):
    assert _profiled(tmp_path, "foreach") == "foreach"


@pytest.mark.parametrize("case, value", [("pt_train_adamw_foreach", "foreach"),
                                         ("pt_train_clip_onecycle", "for_loop")])
def test_optimizer_steps_keep_their_reading(case, value):
    _, a = corpus_analysis(case, 0)
    assert a.run.value("optimizer") == value
