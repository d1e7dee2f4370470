"""The ``compiled`` run fact of a TorchScript model: the interpreter records each call of a
scripted or traced module's method as an op whose first input is the module object. Real
captures: the corpus's ``torch.jit.load``-ed server and profiles made here of a scripted,
a traced and an eager module (an eager model's ``record_function("forward")`` is no
TorchScript call)."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis

from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace


def _compiled(path) -> object:
    return run_facts(load_trace(path, use_cache=False)).value("compiled")


def _profiled(tmp_path, call, name: str):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(4, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            call(x)
    out = tmp_path / f"{name}.json"
    prof.export_chrome_trace(str(out))
    return out


def _model():
    torch = pytest.importorskip("torch")
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


@pytest.mark.parametrize("k", [0, 1])
def test_a_loaded_torchscript_server_reads_as_torch_jit(k):
    _, a = corpus_analysis("pt_infer_torchscript_server", k)
    fact = a.run.get("compiled")
    assert fact.value == "torch.jit" and fact.proof == "`forward`"


@pytest.mark.parametrize("case", ["pt_infer_batched_convnet", "pt_train_compute_cnn",
                                  "pt_train_word_lm_bptt"])
def test_eager_captures_read_no_compilation(case):
    _, a = corpus_analysis(case, 0)
    assert a.run.value("compiled") is None


def test_torch_compile_keeps_its_own_reading():
    _, a = corpus_analysis("pt_train_compile_startup", 0)
    assert a.run.value("compiled") == "torch.compile"


@pytest.mark.parametrize("make", ["script", "trace"])
def test_scripted_and_traced_modules_read_as_torch_jit(tmp_path, make):
    torch = pytest.importorskip("torch")
    m = _model().eval()
    jit = torch.jit.script(m) if make == "script" else torch.jit.trace(m, torch.randn(4, 8))
    with torch.no_grad():
        assert _compiled(_profiled(tmp_path, jit, make)) == "torch.jit"


def test_an_eager_forward_annotation_is_no_torchscript_call(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import record_function

    m = _model().eval()

    def call(x):
        with record_function("forward"):
            return m(x)

    with torch.no_grad():
        assert _compiled(_profiled(tmp_path, call, "eager")) is None


def test_malformed_call_records_leave_the_fact_unknown(tmp_path):
    """A method-named op whose recorded inputs are empty or not lists is no proof, and no
    error either."""
    import json

    events = [{"ph": "X", "cat": "cpu_op", "name": "forward", "pid": 1, "tid": 1,
               "ts": 10 * k, "dur": 5, "args": args}
              for k, args in enumerate([{"Input type": ["", "float"], "Input Dims": []},
                                        {"Input type": "x", "Input Dims": None},
                                        {"Input type": ["", "float"], "Input Dims": [3]}])]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert _compiled(path) is None


def test_a_collectives_record_is_no_torchscript_call(tmp_path):
    """c10d records each collective as ``record_param_comms`` with untyped first inputs
    (an AMD trace of a checkpointed ResNet): no module's method."""
    import json

    args = {"Input type": ["", "", "Scalar", ""], "Input Dims": [[], [], [], []]}
    events = [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
               "ts": 0, "dur": 5, "args": args}]
    path = tmp_path / "comms.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert _compiled(path) is None
