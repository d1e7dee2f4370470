"""Work done while the parallel decode waits for its workers (the CLI imports the
analysis then): run once, only while waiting, never failing the load."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import Future

from sofa_gui.core.idle_work import run_idle_work, while_idle
from sofa_gui.core.importers.chrome import parallel
from sofa_gui.core.progress import NullProgress


def test_registered_work_runs_once_and_a_failure_is_swallowed():
    ran = []

    def boom():
        raise ImportError("no such module")

    with while_idle(lambda: ran.append(1), boom, lambda: ran.append(2)):
        run_idle_work()
        run_idle_work()
    assert ran == [1, 2]
    run_idle_work()  # outside the block: nothing registered
    assert ran == [1, 2]


def test_the_decode_runs_it_while_a_worker_is_still_busy():
    busy, ran = Future(), []
    timer = threading.Timer(0.3, lambda: busy.set_result("part 1"))

    def work():
        ran.append(busy.done())

    timer.start()
    with while_idle(work):
        assert parallel._collect([busy], NullProgress(), workers=[]) == ["part 1"]
    assert ran == [False]  # before the worker was done


def test_not_when_the_workers_are_done_already():
    done, ran = Future(), []
    done.set_result("part 1")
    with while_idle(lambda: ran.append(1)):
        parallel._collect([done], NullProgress(), workers=[])
    assert ran == []


def test_the_cli_imports_the_analysis_steps_while_waiting():
    """What the CLI registers: the modules the analysis steps import on first use."""
    code = ("import sys\nfrom sofa_gui.core.analysis.pipeline import preload\n"
            "mods = ['sofa_gui.core.analysis.' + m for m in ('findings', 'breakdown', "
            "'iterations', 'run_facts', 'tfdata')]\n"
            "before = [m in sys.modules for m in mods]\npreload()\n"
            "print(before, [m in sys.modules for m in mods])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out == f"{[False] * 5} {[True] * 5}"
