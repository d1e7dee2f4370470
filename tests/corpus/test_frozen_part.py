"""A frozen part of the model recomputed in every training step, read on corpus captures:
a Keras head fit through a frozen MobileNetV2 (convolutions with no filter gradient) and a
distillation teacher run under ``no_grad`` (model ops autograd does not record) get the
fix of computing that part's outputs once, with its estimate; training whose every layer
gets a gradient, a GAN's generator fed fresh noise, an EMA of the weights, periodic
evaluation, augmentation inside the model and inference do not."""

from __future__ import annotations

import functools

import pytest
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.findings.frozen_part import FIX_NAME
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace


@functools.cache
def frozen_fix(case: str, k: int = 0):
    """The compute finding and its frozen-part fix (None where not shown)."""
    a = analyze(load_trace(capture(case, k), use_cache=False))
    f = next((x for x in a.findings if x.id == "compute_bound"), None)
    fix = next((x for x in f.fixes if x.name == FIX_NAME), None) if f is not None else None
    return f, fix


@pytest.mark.parametrize("k", [0, 1])
def test_a_head_fit_through_a_frozen_base_gets_the_features_computed_once(k):
    """The base's convolutions get no filter gradient and take 85% of the captured step:
    the features computed once leave the head's step (15.2x measured)."""
    f, fix = frozen_fix("tf_fit_frozen_base_transfer", k)
    assert fix is not None and fix.framework == "tensorflow"
    assert "base.predict" in fix.text and "repeat from epoch to epoch" in fix.text
    assert 11.4 <= fix.estimate <= 20.0
    assert "no filter gradient" in fix.estimate_why and "cannot prove" in fix.estimate_why
    assert "gets no gradient" in f.summary
    assert f.estimated_speedup < 2.0  # the compute hypothesis keeps its own estimate


@pytest.mark.parametrize("k", [0, 1])
def test_a_no_grad_teacher_gets_its_outputs_computed_once(k):
    """The teacher's forward (no autograd sequence number) is half of each step: its
    logits cached for the data set measure 1.93x."""
    _, fix = frozen_fix("pt_train_distill_frozen_teacher", k)
    assert fix is not None and fix.framework == "pytorch"
    assert "no_grad" in fix.text
    assert 1.93 / 1.25 <= fix.estimate <= 1.93 * 1.25


@pytest.mark.parametrize("case", [
    "pt_train_compute_cnn", "pt_train_gan_two_optimizers", "pt_train_dcgan_32px",
    "pt_train_wgan_gp_toy", "pt_train_ema_param_loop", "pt_train_periodic_eval",
    "pt_train_simclr_ntxent", "pt_infer_batched_convnet", "tf_fit_validation_epochs",
    "tf_fit_augment_layers", "tf_keras_fit_cached", "tf_gradient_tape", "tf_infer"])
def test_no_frozen_part_fix_where_every_layer_learns_or_inputs_change(case):
    """Every forward op gets its gradient, a random input feeds the no_grad part, or no
    backward runs: the fix is not shown."""
    _, fix = frozen_fix(case)
    assert fix is None
