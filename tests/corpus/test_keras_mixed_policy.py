"""Low precision read from a Keras mixed policy's casts: TensorFlow captures carry no
dtypes, but a mixed policy casts each float variable where a layer reads it, so the step
makes about one ``Cast`` per variable read; float32 steps cast only labels and metrics."""

from __future__ import annotations

import json

import pytest
from tracedata import CORPUS
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace

TF_CASES = sorted(json.loads(p.read_text())["case"] for p in CORPUS.glob("tf_*/truth.json"))


@pytest.mark.parametrize("k", [0, 1])
def test_a_mixed_bfloat16_fit_reads_low_precision_with_its_casts(k):
    fact = run_facts(load_trace(capture("tf_fit_mixed_bfloat16", k))).get("precision")
    assert fact.value == "low" and "Cast ops beside" in fact.proof and fact.slice >= 0


@pytest.mark.parametrize("case", [c for c in TF_CASES if c != "tf_fit_mixed_bfloat16"])
def test_float32_tensorflow_steps_read_no_low_precision(case):
    assert run_facts(load_trace(capture(case, 0))).get("precision").value != "low"
