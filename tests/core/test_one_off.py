"""One-off work by name: a Python frame is judged by its function, not its file."""

from __future__ import annotations

from test_findings import Synth

from sofa_gui.core.trace import Kind


def _steps_with_one_frame(name: str):
    """Ten 1 ms steps of a few ops each; the eighth (steady) is 2.5 ms long: it also runs
    a 1.4 ms Python frame ``name``, recorded under a category that is not the profiler's
    ``python_function`` (so it is not dropped as a sampled frame)."""
    s = Synth()
    t = 0
    for k in range(10):
        s.step(t, 2500 if k == 7 else 1000)
        for j in range(8):
            s.host(t + 10 + j * 100, 60, "aten::addmm")
        if k == 7:
            s.host(t + 900, 1400, name, Kind.OTHER)
            s.host(t + 901, 1300, "aten::mul")
        t += 2500 if k == 7 else 1000
    return {f.id: f for f in s.analyze()[2]}


def test_a_python_frame_is_one_off_work_by_its_function_not_its_file():
    """``torch/_compile.py(22): inner`` is the wrapper that keeps TorchDynamo out of a call
    (activation checkpointing, the optimizer's step): its file says compile, its function
    compiles nothing; TorchDynamo's own ``_compile`` frame is compile work."""
    wrapper = _steps_with_one_frame("torch/_compile.py(22): inner").get("startup_cost")
    assert wrapper is None or not any("_compile.py" in c.label for c in wrapper.causes)
    dynamo = _steps_with_one_frame("torch/_dynamo/convert_frame.py(700): _compile")
    assert any("convert_frame.py" in c.label for c in dynamo["startup_cost"].causes)
