"""A training step whose repeated calls form a chain, read on real captures: REINFORCE on a
pendulum simulated in Python (one policy call per action, the action read with ``.item()``
and the next observation made into a tensor) is estimated per episode for copies of the
episode run together, a lower bound that holds, where batching the 64 calls of an episode
into one (which they cannot be) read 26x against 6.1x measured.  Training steps whose
repeats read nothing between them (a recurrent cell per letter, per-sample losses, tiny
matmuls, alike layers) are no chain, and per-request inference keeps its batching.  A DQN
agent's step (an action read back and the environment's state made into a tensor before
each of its updates) is a chain of whole updates: copies would share one update, which
changes the algorithm, and no batched call pools more than one update's calls, so its model's
tiny ops are counted per update.  A learning-rate sweep's step (one model's epoch: 12 whole
updates, nothing read back between them) cannot batch its updates either: it is estimated per
copy for independent copies of the step (the sweep's models stacked under ``torch.func.vmap``),
where batching the 12 updates into one read 8.4x against 3.46x measured.

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import pytest
from tracedata import corpus_capture, corpus_context, corpus_fix_speedup

from sofa_gui.core.analysis.findings import batching, make_context
from sofa_gui.core.analysis.findings.chained_calls import (
    COPIES,
    chain_fix,
    chained_updates,
    copies_fix,
)
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

CHAINED = "pt_train_reinforce_pendulum"
#: Training steps with repeated calls that read nothing back between them.
NOT_CHAINED = ["pt_train_char_rnn_names", "pt_train_per_sample_loss_loop",
               "pt_train_tiny_ops", "pt_train_deep_stack_batch8", "pt_train_box_loss_loop",
               "pt_train_lstmcell_teacher_forcing"]
#: A DQN step: 4 environment steps, each an action read back and a whole update.
UPDATE_CHAIN = "pt_train_dqn_replay_deque"
#: Several updates a step that read nothing back between them (a learning-rate sweep).
UPDATES_UNCHAINED = "pt_train_lr_sweep_models"
#: Inference answering requests one at a time: the requests batch together.
REQUESTS = ["pt_infer_online_requests", "pt_infer_batch1_convnet",
            "pt_infer_server_numpy_outputs", "pt_infer_greedy_decode"]


def analyzed(case: str, k: int = 0):
    """(analysis, the rules' context) of a corpus capture, made once a test run."""
    return corpus_context(case, k)[1:]


measured = corpus_fix_speedup


@pytest.mark.parametrize("k, speedup", [(0, 4.90), (1, 4.48)])
def test_a_chained_step_is_estimated_for_copies_run_together(k, speedup):
    a, ctx = analyzed(CHAINED, k)
    fix = chain_fix(ctx, ctx.bd.host)
    assert fix is not None and fix.per_step == 64 and fix.batch == COPIES
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert f.estimated_speedup == pytest.approx(speedup, abs=0.005)
    assert f.estimate_floor
    assert "are a chain and cannot be batched with each other" in f.summary
    assert f"for {COPIES} independent copies of the step" in f.summary
    truth = measured(CHAINED)  # 8 pendulums in lockstep, per episode
    assert 0.7 * truth <= f.estimated_speedup <= truth  # a lower bound, and near it
    assert a.verdict.bound == "host_overhead"


@pytest.mark.parametrize("case", NOT_CHAINED)
def test_training_repeats_that_read_nothing_back_are_no_chain(case):
    a, ctx = analyzed(case)
    assert chain_fix(ctx, ctx.bd.host) is None
    assert not any("are a chain" in f.summary for f in a.findings)


@pytest.mark.parametrize("case", REQUESTS)
def test_requests_answered_one_at_a_time_keep_their_batching(case):
    a, _ = analyzed(case)
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert "are a chain" not in f.summary
    # a lower bound only for the Python each request keeps between its calls
    assert f.estimate_floor == ("each request keeps outside the framework calls" in f.summary)


def test_a_chained_step_read_as_small_batch_training_is_estimated_per_copy():
    """Episodes of one-row calls whose math is a small share of the step (4%, however long
    the step) are read as training on one row a step; their chain is estimated per copy."""
    t = load_trace(corpus_capture(CHAINED, 0), use_cache=False)
    a = analyze(t)
    ctx = make_context(t, a.iterations, a.breakdown)
    assert batching.small_batch(ctx) is not None
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert "Training on batches of 1" in f.summary
    assert "are a chain and cannot be batched with each other" in f.summary
    assert f.estimate_floor and f.estimated_speedup == pytest.approx(
        chain_fix(ctx, ctx.bd.host).speedup())



@pytest.mark.parametrize("k", [0, 1])
def test_a_chain_of_whole_updates_is_neither_copies_nor_one_batched_loop(k):
    a, ctx = analyzed(UPDATE_CHAIN, k)
    assert chained_updates(ctx, ctx.bd.host) == 4.0
    assert chain_fix(ctx, ctx.bd.host) is None  # each repeat holds an optimizer step
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert "are a chain" not in f.summary
    assert "other tiny ops per update, the updates a chain" in f.summary
    fused = measured(UPDATE_CHAIN, "adamw_fused")  # the optimizer's loop, measured apart
    assert f.estimated_speedup == pytest.approx(fused, rel=0.25)
    assert a.verdict.bound == "compute"


@pytest.mark.parametrize("case", [CHAINED, UPDATES_UNCHAINED] + NOT_CHAINED)
def test_updates_with_no_read_back_between_them_are_no_chain_of_updates(case):
    a, ctx = analyzed(case)
    assert chained_updates(ctx, ctx.bd.host) == 1.0
    if case in (CHAINED, UPDATES_UNCHAINED):
        assert a.verdict.bound == "host_overhead"


@pytest.mark.parametrize("k", [0, 1])
def test_a_step_of_whole_updates_is_estimated_for_copies_of_it(k):
    """The sweep's epoch of one model: its 12 updates run one after another on the last
    one's weights, so the estimate is for copies of the step (the sweep's models) run
    together, the model's calls at a stacked call's cost, each copy's math added."""
    a, ctx = analyzed(UPDATES_UNCHAINED, k)
    fix = copies_fix(ctx, ctx.bd.host)
    assert fix is not None and fix.per_step == 12 and fix.batch == COPIES
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert "Each repeat is a whole update" in f.summary and "are a chain" not in f.summary
    assert f"for {COPIES} independent copies of the step" in f.summary
    assert not f.estimate_floor  # the stacked calls' own cost is assumed, not bounded
    assert f.estimated_speedup == pytest.approx(fix.speedup())
    truth = measured(UPDATES_UNCHAINED)  # the 8 models stacked under vmap, per model
    assert abs(f.estimated_speedup / truth - 1) <= 0.25
    assert a.verdict.bound == "host_overhead"


@pytest.mark.parametrize("case", [CHAINED, UPDATE_CHAIN] + NOT_CHAINED + REQUESTS)
def test_steps_without_a_run_of_whole_updates_are_no_copies(case):
    """One update a step (its repeats are a model's calls), a chain of calls or of updates,
    and inference keep their own estimates."""
    a, ctx = analyzed(case)
    assert copies_fix(ctx, ctx.bd.host) is None
    assert not any("Each repeat is a whole update" in f.summary for f in a.findings)


def test_whole_updates_outside_a_loop_of_the_models_tiny_calls_keep_their_estimate():
    """A WGAN-GP step's critic updates 5 times a step, whole updates, but its tiny ops are
    no loop of repeated calls that batching would remove (no repeated unit to batch): the
    per-op finding keeps the estimate of its loop's data work and calls."""
    a, _ = analyzed("pt_train_wgan_gp_toy")
    f = next(f for f in a.findings if f.id == "op_overhead_bound")
    assert "Each repeat is a whole update" not in f.summary
    assert "no repeated unit to batch" in f.summary
    assert a.verdict.bound == "compute"
