"""A loop over a sequence's positions, read on real captures: a decoder trained with an
``nn.LSTMCell`` called once per time step (teacher forcing) and a tagger whose head is
applied once per position are each one call over the sequence away, with the estimate
within 25% of the measured fix; a fused ``nn.LSTM``, a stack of alike layers, loops
that pick rows of a batch or decode token by token are no such loop.

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import pytest
from tracedata import corpus_context, corpus_fix_speedup

from sofa_gui.core.analysis.findings.sequence_loop import FIX_NAME, position_loop

#: (case, the module repeated, repeats a step, layer named in the fix)
LOOPS = [("pt_train_lstmcell_teacher_forcing", "aten::lstm_cell", 20, "nn.LSTM"),
         ("pt_train_tagger_head_per_position", "aten::linear", 24, "aten::linear")]
#: Runs with no loop over positions: a fused nn.LSTM, 40 alike Linear layers, per-image
#: crops in a loop, per-sample losses, 400 tiny matmuls, a GRU decoding token by token,
#: requests answered one at a time, a transformer on variable-length batches.
NO_LOOP = ["pt_train_lstm_compute", "pt_train_deep_stack_batch8", "pt_train_crop_flip_loop",
           "pt_train_per_sample_loss_loop", "pt_train_tiny_ops", "pt_infer_greedy_decode",
           "pt_infer_decode_unbatched", "pt_infer_batch1_convnet", "pt_infer_vit_batch1",
           "pt_train_variable_length", "pt_train_ema_param_loop"]


def analyzed(case: str, k: int = 0):
    """(analysis, the rules' context) of a corpus capture, made once a test run."""
    return corpus_context(case, k)[1:]


measured = corpus_fix_speedup


@pytest.mark.parametrize("k", [0, 1])
@pytest.mark.parametrize("case,module,count,layer", LOOPS)
def test_a_module_called_once_per_position_is_one_call_over_the_sequence(case, module, count,
                                                                         layer, k):
    a, ctx = analyzed(case, k)
    loop = position_loop(ctx)
    assert loop is not None and loop.module == module and loop.count == count
    assert loop.dim == 1 and loop.shape[1] == count
    assert loop.backward is not None and count - 2 <= loop.backward.count <= count
    f = next(f for f in a.findings if f.id == "sequence_loop")
    assert f.confidence >= 0.5
    assert f"calls {module} {count} times" in f.summary and layer in f.summary
    assert len(f.evidence) == 3  # the forward repeats, their backward, one module call
    fix = next(x for x in f.fixes if x.name == FIX_NAME)
    assert fix.estimate == f.estimated_speedup
    truth = measured(case)
    assert truth * 0.75 <= f.estimated_speedup <= truth * 1.25


@pytest.mark.parametrize("case", [c for c, *_ in LOOPS])
def test_the_verdict_stays_compute(case):
    """The loop's time is per-call overhead beside the model's math; the truth measures
    compute the larger part, and the finding moves no time from it."""
    a, _ = analyzed(case)
    assert a.verdict.bound == "compute"


@pytest.mark.parametrize("case", NO_LOOP)
def test_runs_without_a_loop_over_positions_are_not_told_to_make_one_call(case):
    a, ctx = analyzed(case)
    assert position_loop(ctx) is None
    assert not any(f.id == "sequence_loop" for f in a.findings)
