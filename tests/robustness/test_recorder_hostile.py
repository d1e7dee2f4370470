"""The recorder never hurts the recorded command.

A full disk under the recording, a read-only output folder, and a grandchild that
ignores SIGINT: the child's exit code comes through, the manifest says what happened,
and nothing is left running.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hostile import assert_one_line_error, run_cli

from sofa_gui.recorder.config import CommandError, RecordConfig
from sofa_gui.recorder.runner import Recorder

#: Writes ~600 kB of output in small flushed lines, then exits with code 3.
CHATTY = textwrap.dedent("""
    import sys
    for i in range(3000):
        print("x" * 200, flush=True)
    sys.exit(3)
""")


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_full_disk_while_recording_keeps_the_child_alive(tmp_path):
    out = tmp_path / "rec"
    # every file write past 200 kB fails (EFBIG): output.log fills up mid-run
    proc = run_cli(["record", "-o", str(out), "--interval", "0.1", "--",
                    sys.executable, "-c", CHATTY], fsize=200_000, timeout=120)
    assert proc.returncode == 3, proc.stderr  # the child's code, not a broken pipe
    assert "Traceback" not in proc.stderr, proc.stderr
    m = _manifest(out)
    assert m["status"] == "complete" and m["exit"]["code"] == 3
    output = m["sources"]["output"]
    assert output["dropped_bytes"] > 0 and output["error"]
    assert output["bytes"] + output["dropped_bytes"] == 3000 * 201
    assert any("output.log is incomplete" in n for n in m["notes"])


def test_record_into_an_unwritable_place_is_exit_2_and_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli(["record", "-o", str(blocker / "rec"), "--", sys.executable, "-c", "0"])
    err = assert_one_line_error(proc, 2)
    assert "cannot create output folder" in err
    # the folder can be made, but nothing can be written in it (a full file system)
    proc = run_cli(["record", "-o", str(tmp_path / "rec"), "--", sys.executable, "-c", "0"],
                   fsize=0)
    err = assert_one_line_error(proc, 2)
    assert "cannot write into" in err
    assert not (tmp_path / "rec").exists()


def test_read_only_file_system_is_a_command_error(tmp_path, monkeypatch):
    def read_only(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "mkdir", read_only)
    cfg = RecordConfig(command=(sys.executable, "-c", "0"), output=tmp_path / "rec")
    with pytest.raises(CommandError, match="Read-only file system"):
        Recorder(cfg).start()


#: Starts a grandchild in the same process group that ignores SIGINT and SIGTERM,
#: writes its pid, and exits 0 at once.
ORPHANING = textwrap.dedent("""
    import subprocess, sys
    code = ("import signal, sys, time\\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
            "open(sys.argv[1], 'w').write('ready')\\n"
            "time.sleep(120)\\n")
    g = subprocess.Popen([sys.executable, "-c", code, sys.argv[1] + ".ready"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(sys.argv[1], "w").write(str(g.pid))
    import os, time
    end = time.time() + 20
    while not os.path.exists(sys.argv[1] + ".ready") and time.time() < end:
        time.sleep(0.02)
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_grandchild_that_ignores_sigint_is_stopped_with_the_recording(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    cfg = RecordConfig(command=(sys.executable, "-c", ORPHANING, str(pid_file)),
                       output=tmp_path / "rec", interval_s=0.05, stop_grace_s=0.3)
    t0 = time.monotonic()
    res = Recorder(cfg).run()
    pid = int(pid_file.read_text())
    try:
        assert res.exit_code == 0
        assert not _alive(pid), "the grandchild outlived the recording"
        m = _manifest(res.folder)
        assert m["exit"]["leftover_processes_stopped_with"] == ["SIGINT", "SIGTERM", "SIGKILL"]
        assert any("left running" in n for n in m["notes"])
        assert time.monotonic() - t0 < 30
    finally:
        if _alive(pid):
            os.kill(pid, 9)
