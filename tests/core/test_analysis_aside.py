"""Side work in a forked child: the same analysis as in-process, whatever the child does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sofa_gui.core.analysis import aside

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

#: Script lines: ``forks`` gets the function's name for each side job started (also
#: test_app_jobs.py): the agreement check and the findings' rules run beside.
COUNT_FORKS = """
from sofa_gui.core.analysis import aside
forks = []
real = aside._Job.__init__
def counting(self, fn, *a):
    forks.append(fn.__name__)
    real(self, fn, *a)
aside._Job.__init__ = counting
"""
FORKED = ["_may_be_typed", "pattern_iterations", "_run_checks"]  # precision scan, agreement, rules

#: The CLI's situation (one thread, no Qt): forked vs watched analysis of the sample.
_COMPARE = COUNT_FORKS + """
import json, sys
from sofa_gui.core.analysis.pipeline import Options, analyze
from sofa_gui.core.importers import load_trace
from sofa_gui.core.samples import demo_trace_path
trace = load_trace(demo_trace_path(), use_cache=False)
forked = analyze(trace, Options())
n = len(forks)
inline = analyze(trace, Options(), on_result=lambda a, part: None)
print(json.dumps({"forks": forks[:n], "after": len(forks),
                  "agreement": forked.iterations.agreement,
                  "same": json.dumps(forked.to_dict(trace)) == json.dumps(inline.to_dict(trace))}))
"""


@needs_fork
def test_agreement_from_a_child_equals_the_in_process_one(tmp_path):
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", _COMPARE], capture_output=True, text=True,
                         env=env, timeout=600, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["forks"] == FORKED, "the agreement check or the rules did not run aside"
    assert got["after"] == len(FORKED)  # parts watched: in-process
    assert got["agreement"] is not None
    assert got["same"]


def test_no_fork_with_qt_loaded_or_threads(monkeypatch):
    monkeypatch.setitem(sys.modules, "PySide6", object())
    assert not aside._can_fork()


@pytest.fixture
def forkable(monkeypatch):
    """pytest-qt loads PySide6 here; the child below only does arithmetic."""
    monkeypatch.setattr(aside, "_can_fork", lambda: hasattr(os, "fork"))


def _twice_unless_child(parent: int, how: str, x: int) -> int:
    if os.getpid() != parent:
        if how == "raise":
            raise RuntimeError("child failed")
        os._exit(3)
    return 2 * x


@needs_fork
@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_failing_child_means_the_work_is_done_in_process(how, forkable):
    got = []
    with aside.allowed():
        assert aside.aside(_twice_unless_child, (os.getpid(), how, 21), got.append)
        assert got == []  # handed over when the block ends
    assert got == [42]


def test_outside_a_block_nothing_is_forked():
    assert not aside.aside(_twice_unless_child, (os.getpid(), "raise", 1), print)
    with aside.allowed(enabled=False):
        assert not aside.aside(_twice_unless_child, (os.getpid(), "raise", 1), print)


@needs_fork
@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_started_job_whose_child_fails_is_computed_in_process(how, forkable):
    with aside.allowed():
        job = aside.start(_twice_unless_child, (os.getpid(), how, 21))
        assert job is not None
        assert job.result() == 42
        assert job.result() == 42  # taken once


def _pid_times(parent: int, x: int) -> tuple[int, int]:
    return (os.getpid() != parent, 3 * x)


@needs_fork
def test_a_started_job_runs_in_the_child(forkable):
    with aside.allowed():
        job = aside.start(_pid_times, (os.getpid(), 5))
        assert job.result() == (True, 15)


def _sleep_forever(x: int) -> int:
    import time

    time.sleep(600)
    return x


@needs_fork
def test_a_job_not_taken_is_killed_when_the_block_fails(forkable):
    with pytest.raises(KeyError), aside.allowed():
        job = aside.start(_sleep_forever, (1,))
        pid = job._pid
        raise KeyError("cancelled")
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped


def test_start_outside_a_block_forks_nothing():
    assert aside.start(_twice_unless_child, (os.getpid(), "raise", 1)) is None
