"""Decode workers end cleanly: a worker killed while it sends its part ends the open with
one line (it hung forever), Ctrl-C exits 130 with no worker traceback, and part files
live in a per-process folder that is removed at exit or swept once its owner is gone."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from hostile import ROOT, as_from_a_terminal

from sofa_gui.core.importers import spill_dir

KILL_MID_SEND = textwrap.dedent("""
    import os, signal, struct, sys
    from multiprocessing import connection
    parent, real = os.getpid(), connection.Connection._send_bytes
    def half_then_die(self, buf):  # a worker's result: half of it, then SIGKILL
        if os.getpid() != parent and len(buf) > 100:
            self._send(struct.pack("!i", len(buf)))
            self._send(bytes(buf[: len(buf) // 2]))
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, buf)
    connection.Connection._send_bytes = half_then_die
    from sofa_gui.cli import entry
    sys.argv = ["sofa-gui", "analyze", "--no-cache", sys.argv[1]]
    entry()
""")


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("workers") / "big.json"
    evs = [{"ph": "X", "name": f"op{i % 50}", "cat": "cpu_op", "ts": i * 3.0, "dur": 2.0,
            "pid": 1, "tid": 1 + i % 4, "args": {"k": "v" * 20}} for i in range(120_000)]
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


def _env(tmp_path, **extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), "SOFA_GUI_DECODE_PARTS": "2",
            "SOFA_GUI_CACHE_DIR": str(tmp_path / "cache"), **extra}


def test_a_worker_killed_mid_send_ends_the_open_in_one_line(big_trace, tmp_path):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", KILL_MID_SEND, str(big_trace)],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t0 < 100
    err = proc.stderr.strip()
    assert proc.returncode == 2, err[-2000:]
    assert err.splitlines() == [f"error: {big_trace}: a decode worker ended while reading "
                                "(killed by SIGKILL); nothing was loaded"]
    assert not list((tmp_path / "cache" / "spill").glob("*/sofa-*-part-*"))


def test_ctrl_c_during_a_parallel_decode_exits_130(big_trace, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "sofa_gui", "analyze", "--no-cache",
                             str(big_trace)], env=_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=as_from_a_terminal)
    spill = tmp_path / "cache" / "spill"
    deadline = time.monotonic() + 60
    while not list(spill.glob("*/sofa-*-part-*")) and time.monotonic() < deadline:
        time.sleep(0.02)  # wait until the workers run
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "interrupted"
    assert not list(spill.glob("*/sofa-*-part-*"))


def test_spill_folders_of_dead_owners_are_swept(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(spill_dir, "_mine", None)
    root = tmp_path / "spill"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = [root / f"{dead.pid}-", root / f"{os.getpid()}-1", root / f"{dead.pid}-12345"]
    live = root / spill_dir._tag(os.getppid())
    for d in (*stale, live):
        d.mkdir(parents=True)
        (d / "sofa-args-part-x").write_bytes(b"x" * 100)
    mine = spill_dir.part_dir()
    assert mine == str(root / spill_dir._tag(os.getpid()))
    assert not any(d.exists() for d in stale)  # gone, or a reused pid's
    assert live.exists()
    assert oct(os.stat(mine).st_mode & 0o777) == "0o700"
