"""The app's jobs: open then analyze, handing typed results over in order (no worker)."""

from __future__ import annotations

import time
from pathlib import Path

from test_analysis_aside import COUNT_FORKS, FORKED
from tracedata import DATA

from sofa_gui.app import jobs
from sofa_gui.core.analysis.pipeline import PARTS, STEPS, Options

TRACE = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


class _State:
    """The three calls a job makes on its state, recorded."""

    def __init__(self):
        self.results, self.fractions = [], []

    def update(self, fraction, message=""):
        self.fractions.append(fraction)

    def check_cancelled(self):
        pass

    def partial(self, payload):
        self.results.append(payload)


def test_open_job_hands_the_trace_then_each_analysis_part():
    state = _State()
    jobs.open_job(state, str(TRACE), Options(iterations="auto"), load_mode="thread")
    first, *parts = state.results
    assert isinstance(first, jobs.TraceReady) and first.prepared.trace is first.trace
    assert [type(p) for p in parts] == [jobs.AnalysisReady] * len(PARTS)
    assert [p.part for p in parts] == [s.part for s in STEPS]
    assert parts[0].analysis.findings is None  # a snapshot: later parts do not leak in
    assert parts[-1].analysis.findings is not None
    assert state.fractions == sorted(state.fractions) and state.fractions[-1] == 1.0


def test_analysis_job_reruns_with_the_given_options():
    state = _State()
    trace = jobs.load(_State(), str(TRACE), "thread")
    jobs.analysis_job(state, trace, Options(iterations="pattern"))
    assert [r.part for r in state.results] == [s.part for s in STEPS]
    assert state.results[0].analysis.iterations.method in ("pattern", "none")


_REOPEN = """
import json, sys
import time
from pathlib import Path
from sofa_gui.core.analysis.pipeline import Options
from sofa_gui.app import jobs
from sofa_gui.qt.app import freeze_startup_objects
freeze_startup_objects()
before = set(sys.modules)

class State:
    def update(self, *a): pass
    def check_cancelled(self): pass
    def partial(self, payload): pass

jobs.open_job(State(), sys.argv[1], Options(), load_mode="thread")
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith("sofa_gui"))))
"""


def test_a_cached_reopen_imports_nothing_after_start_up(tmp_path):
    """The job thread of a reopen imports no module (imports hold the GIL against the GUI
    thread): start-up (freeze_startup_objects) imported them all."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, SOFA_GUI_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(Path(jobs.__file__).resolve().parents[2]))
    run = [sys.executable, "-c", _REOPEN, str(TRACE)]
    subprocess.run(run, env=env, capture_output=True, text=True, check=True)  # fills the cache
    again = subprocess.run(run, env=env, capture_output=True, text=True, check=True)
    assert json.loads(again.stdout.splitlines()[-1]) == []


def test_a_prestarted_loader_takes_the_next_open_and_is_replaced(tmp_path, monkeypatch):
    import shutil

    from sofa_gui.app import background_load as bl
    from sofa_gui.qt.worker import JobState

    monkeypatch.setattr(bl, "_spare", None)
    copy = tmp_path / "fresh.json.gz"  # not cached: decoded by a loader child
    shutil.copyfile(TRACE, copy)
    try:
        bl.prestart()
        spare = bl._spare
        assert spare is not None and spare.proc.is_alive()
        later = tmp_path / "later-cache"  # set after the spare started: it must follow
        monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(later))
        trace = jobs.load(JobState(0, lambda *a: None), str(copy), load_mode="process")
        assert trace.events == jobs.load(JobState(0, lambda *a: None), str(TRACE),
                                         load_mode="thread").events
        assert bl._spare is not spare  # taken by the load
        assert list(later.glob("*/manifest.json"))  # it wrote the cache where asked now
        deadline = time.monotonic() + 60
        while (bl._spare is None or bl._spare is spare) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bl._spare is not None and bl._spare.proc.is_alive()  # the next one waits
    finally:
        bl.stop_spares()
    assert bl._spare is None


_LOADER = COUNT_FORKS + """
import json, multiprocessing as mp, sys
from sofa_gui.app import background_load as bl
from sofa_gui.core import store
from sofa_gui.core.analysis import cache
from sofa_gui.core.analysis.pipeline import Options
recv, send = mp.Pipe(duplex=False)
bl._child_main(sys.argv[1], send, mp.Event(), Options(), renice=False)
send.close()
tags = []
while recv.poll(1):
    try:
        tags.append(recv.recv()[0])
    except EOFError:
        break
entry = store.entry_dir(__import__("pathlib").Path(sys.argv[1]))
print(json.dumps({"forks": forks, "tags": [t for t in tags if "progress" not in t],
                  "cached": store.load_cached(sys.argv[1], entry) is not None,
                  "analysis": cache.load(entry, __import__("dataclasses").asdict(Options()))
                  is not None}))
"""


def test_the_loader_child_analyses_with_its_side_work_forked_as_the_cli_does(tmp_path):
    """The loader writes the trace cache beside the analysis in a forked process, not a
    thread: with a thread alive the analysis ran its agreement check in line (aside.py
    forks only a one-thread process), ~0.4 s on the way to the app's panels."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from sofa_gui.core.samples import demo_trace_path

    copy = tmp_path / "fresh.json.gz"
    shutil.copyfile(demo_trace_path(), copy)
    env = dict(os.environ, SOFA_GUI_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(Path(jobs.__file__).resolve().parents[2]))
    out = subprocess.run([sys.executable, "-c", _LOADER, str(copy)], env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["forks"] == FORKED, "the agreement check or the rules ran in line"
    assert got["tags"] == ["done", "analyzed"]
    assert got["cached"] and got["analysis"]
