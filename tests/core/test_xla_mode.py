"""Training or inference from the XLA programs that ran in a JAX / TensorFlow (XLA)
capture: their HloProtos in the metadata plane, summarised by the XPlane importer."""

from __future__ import annotations

import re

import pytest
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.run_facts import TRAINING_NAMES, run_facts
from sofa_gui.core.analysis.xla_mode import PROGRAMS, inference_programs, training_program
from sofa_gui.core.importers import load_trace

TRAINING = re.compile(TRAINING_NAMES)


def _load(case: str, k: int = 0):
    return load_trace(capture(case, k), use_cache=False)


@pytest.mark.parametrize("case", ["jax_infer_jit", "jax_infer_readback"])
@pytest.mark.parametrize("k", [0, 1])
def test_jitted_inference_is_inference(case, k):
    mode = run_facts(_load(case, k)).get("mode")
    assert mode.value == "inference"
    assert "no sign of training, which is weaker than a sign of inference" in mode.proof
    assert "matmuls/convolutions" in mode.proof


def test_only_the_programs_that_ran_count():
    """The inference capture's metadata plane also holds ``jit_train_step`` (compiled
    earlier in the same process, with jvp/transpose ops): it did not run, so it is not
    a sign of training."""
    t = _load("jax_infer_jit")
    assert [p["module"] for p in t.meta.extra[PROGRAMS]] == ["jit__lambda"]
    assert training_program(t, TRAINING) is None


@pytest.mark.parametrize("case", ["jax_train_jit", "tf_jit_step_noise"])
def test_gradient_ops_in_a_program_that_ran_prove_training(case):
    """JAX's ``transpose(jvp())`` and TensorFlow's ``*Grad`` / ``Conv2DBackpropFilter``
    in the HLO: training even where no event is named after a train step."""
    t = _load(case)
    f = training_program(t, TRAINING)
    assert f is not None and f.value == "training" and "run in the capture" in f.proof
    assert "train" not in f.proof.split("holds")[1]  # an op, not the function's name
    assert inference_programs(t, TRAINING) is None
    for p in t.meta.extra[PROGRAMS]:  # the step's name no sign at all
        p["names"] = [n for n in p["names"] if "train" not in n]
    assert training_program(t, TRAINING) is not None
    assert inference_programs(t, TRAINING) is None


@pytest.mark.parametrize("change", [
    {"hlo": False},  # a program whose HloProto the capture lacks may be the gradient step
    {"complete": False},  # more names than were kept: absence unknown
    {"op_names": 1},  # the math dispatched op by op, as jax.grad outside jit runs it
    {"math": 0},  # no matmul or convolution ran: nothing said about the model
])
def test_inference_is_not_claimed_where_the_absence_does_not_cover_the_math(change):
    t = _load("jax_infer_readback")
    progs = t.meta.extra[PROGRAMS]
    forward = next(p for p in progs if p["module"] == "jit_forward")
    forward.update(change)
    assert inference_programs(t, TRAINING) is None
    assert run_facts(t).get("mode").value is None


def test_summaries_from_a_cached_trace_are_read_as_data():
    t = _load("jax_infer_jit")
    t.meta.extra[PROGRAMS] = [{"module": 3}, "x", {"module": "m", "math": "many",
                                                  "hlo": "yes", "names": [1, "jvp()"]}]
    assert inference_programs(t, TRAINING) is None
    assert training_program(t, TRAINING).proof.endswith("holds `jvp()`")


def test_an_unreadable_hloproto_leaves_the_mode_unproven(monkeypatch):
    from sofa_gui.core.importers.xplane import hlo, wire

    def corrupt(_buf, _span):
        raise wire.WireError("truncated varint at byte 7")

    monkeypatch.setattr(hlo, "summary", corrupt)
    t = _load("jax_infer_jit")
    assert [p["hlo"] for p in t.meta.extra[PROGRAMS]] == [False]
    assert any("HloProto of jit__lambda unreadable" in n for n in t.meta.load_stats.notes)
    assert run_facts(t).get("mode").value is None
