"""Side work in a forked child: the same analysis as in-process, whatever the child does."""

from __future__ import annotations

import json
import os

import pytest

from sofa_gui.core.analysis import aside
from sofa_gui.core.analysis.pipeline import Options, analyze
from sofa_gui.core.importers import load_trace
from sofa_gui.core.samples import demo_trace_path

needs_fork = pytest.mark.skipif(not aside._can_fork(), reason="needs fork and one thread")


@needs_fork
def test_agreement_from_a_child_equals_the_in_process_one(monkeypatch):
    trace = load_trace(demo_trace_path(), use_cache=False)
    forks = []
    real = aside._Job.__init__

    def counting(self, *a):
        forks.append(1)
        real(self, *a)

    monkeypatch.setattr(aside._Job, "__init__", counting)
    forked = analyze(trace, Options())
    assert forks, "the agreement check did not run aside"
    forks.clear()
    inline = analyze(trace, Options(), on_result=lambda a, part: None)  # parts watched
    assert not forks
    assert forked.iterations.agreement is not None
    assert forked.iterations.agreement == inline.iterations.agreement
    assert json.dumps(forked.to_dict(trace)) == json.dumps(inline.to_dict(trace))


def _twice_unless_child(parent: int, how: str, x: int) -> int:
    if os.getpid() != parent:
        if how == "raise":
            raise RuntimeError("child failed")
        os._exit(3)
    return 2 * x


@needs_fork
@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_failing_child_means_the_work_is_done_in_process(how):
    got = []
    with aside.allowed():
        assert aside.aside(_twice_unless_child, (os.getpid(), how, 21), got.append)
        assert got == []  # handed over when the block ends
    assert got == [42]


def test_outside_a_block_nothing_is_forked():
    assert not aside.aside(_twice_unless_child, (os.getpid(), "raise", 1), print)
    with aside.allowed(enabled=False):
        assert not aside.aside(_twice_unless_child, (os.getpid(), "raise", 1), print)
