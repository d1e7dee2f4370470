"""A recurrent layer's backward, evaluated node by node per time step, is the
recurrence's math, not a loop of tiny ops to batch: a CTC model whose ``nn.GRU`` runs
once a step over 61-70 frames reads input (its ``Dataset`` work) with no per-op
overhead finding, where a character RNN called once per letter (one name a step, batch
one) stays host overhead by its tiny ops, backward included.  Real captures of the
diagnosis corpus; a test is skipped when the corpus is not checked out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
CONFIDENT = 0.5


def _captures(case: str) -> list[Path]:
    truth = CORPUS / case / "truth.json"
    if not truth.exists():
        pytest.skip(f"corpus case {case} not in tests/data/corpus")
    return [CORPUS / case / c for c in json.loads(truth.read_text())["captures"]]


def _op_overhead(a):
    return next((f for f in a.findings if f.id == "op_overhead_bound"), None)


@pytest.mark.parametrize("k", [0, 1])
def test_a_gru_over_the_sequence_backward_is_no_tiny_op_loop(k):
    """About 960 of the step's outermost ops are the GRU's per-time-step backward nodes
    (``AddmmBackward0``, ``SigmoidBackward0``, ...) and read as 11% per-op overhead at
    0.56 confidence when counted; no share of host overhead is measured."""
    a = analyze(load_trace(_captures("pt_train_ctc_stft_dataset")[k], use_cache=False))
    assert a.verdict.bound == "input"
    assert _op_overhead(a) is None
    assert a.verdict.shares.get("host_overhead", 0.0) < 0.05


@pytest.mark.parametrize("k", [0, 1])
def test_a_recurrent_layer_called_per_letter_keeps_its_tiny_ops(k):
    """``nn.RNN`` called on one letter at a time (a tiny op itself, several a step): its
    backward's nodes are the per-item loop that batching names removes (10.8x measured)."""
    a = analyze(load_trace(_captures("pt_train_char_rnn_names")[k], use_cache=False))
    f = _op_overhead(a)
    assert a.verdict.bound == "host_overhead"
    assert f is not None and f.confidence >= CONFIDENT
    assert any("Backward" in c.label for c in f.causes)
