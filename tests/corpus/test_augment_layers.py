"""Image augmentation layers at the front of a Keras model run inside the training step:
the compute finding shows moving them into the input pipeline with its own estimate, and
only where the step's own threads run augmentation kernels (not where a dataset map runs
the preprocessing on tf.data's threads)."""

from __future__ import annotations

import functools
import json

import pytest
from tracedata import CORPUS
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.findings.augment_layers import AUGMENT_OP
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

FIX = "augmentation in the input pipeline"


@functools.cache
def analyzed(case: str, k: int = 0):
    t = load_trace(capture(case, k), use_cache=False)
    return t, analyze(t)


def shown(a, name: str = FIX):
    return [x for f in a.findings for x in f.fixes if x.name == name]


@pytest.mark.parametrize("k", [0, 1])
def test_augmentation_layers_in_the_step_are_moved_to_the_pipeline(k):
    """``RandomFlip``, ``RandomRotation`` and ``RandomZoom`` in the model: their
    ``ImageProjectiveTransformV3`` kernels cover about 0.3 of the step on its threads, and
    the second core has room for them: mapped over the dataset the step gains 1.44x."""
    _, a = analyzed("tf_fit_augment_layers", k)
    assert a.verdict.bound == "compute"
    compute = next(f for f in a.findings if f.id == "compute_bound")
    fix = next(x for x in compute.fixes if x.name == FIX)
    measured = json.loads((CORPUS / "tf_fit_augment_layers" / "truth.json").read_text())
    assert abs(fix.estimate / measured["fix"]["speedup"] - 1) <= 0.25
    assert "ImageProjectiveTransformV3" in fix.estimate_why
    assert "Image augmentation runs inside the training step" in compute.summary


@pytest.mark.parametrize("case", ["tf_keras_fit_slow_map", "tf_fit_jpeg_directory",
                                  "tf_fit_pyfunc_parallel_map", "tf_fit_mixed_bfloat16",
                                  "tf_keras_fit_cached"])
def test_preprocessing_in_the_dataset_map_is_not_moved(case):
    """Keras ``fit`` whose preprocessing is a dataset map already (or has none): no
    augmentation kernel on the step's threads, so the fix is not shown."""
    t, a = analyzed(case)
    assert shown(a) == []
    assert not any(AUGMENT_OP.match(t.name_of(int(j))) for j in a.breakdown.host.work)
