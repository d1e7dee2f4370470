"""``sofa-gui`` leaves without the interpreter's teardown only when nothing needs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


PRELUDE = ("import atexit, sys, threading, time\nfrom sofa_gui.cli import leave\n"
           "atexit.register(lambda: print('teardown'))\n")


def test_quick_exit_keeps_the_code_and_the_output():
    r = _run(PRELUDE + "print('x' * 100_000, end=''); sys.stderr.write('err'); leave(3)")
    assert r.returncode == 3
    assert r.stdout == "x" * 100_000  # flushed before the exit
    assert r.stderr == "err"
    assert "teardown" not in r.stdout  # the interpreter's teardown was skipped


def test_ordinary_exit_while_a_thread_still_works():
    r = _run(PRELUDE + "threading.Thread(target=lambda: (time.sleep(0.3), print('done'))).start()"
             "\nleave(4)")
    assert r.returncode == 4
    assert r.stdout.split() == ["done", "teardown"]


def test_ordinary_exit_while_a_child_process_runs():
    r = _run(PRELUDE + "import multiprocessing as mp\n"
             "p = mp.get_context('fork').Process(target=time.sleep, args=(0.3,)); p.start()\n"
             "leave(5)")
    assert r.returncode == 5
    assert r.stdout.split() == ["teardown"]


def test_only_read_only_commands_leave_quickly(monkeypatch):
    from sofa_gui import cli

    seen = []
    monkeypatch.setattr(cli, "main", lambda argv: 7)
    monkeypatch.setattr(cli, "leave", lambda rc: seen.append(rc))
    for argv, quick in ((["analyze", "x.json"], True), (["record", "--", "true"], False),
                        (["view"], False), ([], False)):
        monkeypatch.setattr(sys, "argv", ["sofa-gui", *argv])
        seen.clear()
        try:
            cli.entry()
        except SystemExit as exc:
            assert exc.code == 7
        assert seen == ([7] if quick else [])
