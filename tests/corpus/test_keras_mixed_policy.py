"""Low precision read from a Keras mixed policy's casts: TensorFlow captures carry no
dtypes, but a mixed policy casts each float variable where a layer reads it, so a ``Cast``
runs right after many of the step's variable reads; float32 steps cast labels, metrics and
what their preprocessing layers compute, not the variables they read."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tracedata import CORPUS
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.precision_facts import _MIN_CASTS
from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace

TF_CASES = sorted(json.loads(p.read_text())["case"] for p in CORPUS.glob("tf_*/truth.json"))


@pytest.mark.parametrize("k", [0, 1])
def test_a_mixed_bfloat16_fit_reads_low_precision_with_its_casts(k):
    fact = run_facts(load_trace(capture("tf_fit_mixed_bfloat16", k))).get("precision")
    assert fact.value == "low" and "right after the variable reads" in fact.proof
    assert fact.slice >= 0


#: A float32 fit whose preprocessing layers cast dozens of values inside the model.
CASTING_PREPROCESSING = "tf_fit_dataframe_preprocessing_layers"


@pytest.mark.parametrize("k", [0, 1])
def test_preprocessing_layers_casts_in_a_float32_model_are_no_mixed_policy(k):
    """Normalization and the lookup layers cast the table's columns in the model (72 Cast
    ops beside 90 variable reads, the count a policy's casts make), but they cast the
    values the layers computed (the lookups' one-hot columns), not the variables read."""
    t = load_trace(capture(CASTING_PREPROCESSING, k))
    casts = np.count_nonzero(np.isin(t.slices.name, t.name_ids("Cast".__eq__)))
    reads = np.count_nonzero(np.isin(t.slices.name, t.name_ids("ReadVariableOp".__eq__)))
    assert casts >= 0.5 * reads >= _MIN_CASTS  # as many casts as a policy's
    assert run_facts(t).get("precision").value != "low"


@pytest.mark.parametrize("case", [c for c in TF_CASES if c != "tf_fit_mixed_bfloat16"])
def test_float32_tensorflow_steps_read_no_low_precision(case):
    assert run_facts(load_trace(capture(case, 0))).get("precision").value != "low"
