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


#: float32 runs whose casts read as a mixed policy's, with what the trace shows.
CASTS_NOT_A_POLICY = {"tf_fit_dataframe_preprocessing_layers":
                      "Normalization and the lookup layers cast the table's columns in "
                      "the model: 72 Cast ops beside 90 variable reads on the executor "
                      "threads, the ratio a mixed policy's casts make"}


def _float32(case: str):
    why = CASTS_NOT_A_POLICY.get(case)
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(case, marks=marks, id=case)


@pytest.mark.parametrize("case", [_float32(c) for c in TF_CASES if c != "tf_fit_mixed_bfloat16"])
def test_float32_tensorflow_steps_read_no_low_precision(case):
    assert run_facts(load_trace(capture(case, 0))).get("precision").value != "low"
