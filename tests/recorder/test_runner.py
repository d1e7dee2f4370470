"""The Recorder API the dialog uses: callbacks, Stop and its escalation, finalisation."""

from __future__ import annotations

import threading

import pytest
from rec_workloads import SLEEPER, STUBBORN, manifest, py

from sofa_gui.core.importers import load_trace
from sofa_gui.recorder.config import CommandError, RecordConfig
from sofa_gui.recorder.runner import Recorder


def _start(tmp_path, code, **kw):
    ready = threading.Event()
    samples, chunks = [], []

    def on_output(stream, chunk):
        chunks.append((stream, chunk))
        if b"ready" in chunk:
            ready.set()

    cfg = RecordConfig(command=tuple(py(code)), output=tmp_path / "r", interval_s=0.05, **kw)
    rec = Recorder(cfg, on_output=on_output, on_sample=samples.append)
    rec.start()
    assert ready.wait(20)
    return rec, samples, chunks


def _wait_for(cond, timeout=20.0):
    done = threading.Event()
    for _ in range(int(timeout / 0.05)):
        if cond():
            return True
        done.wait(0.05)
    return False


def test_stop_sends_sigint_and_the_recording_completes(tmp_path):
    rec, samples, chunks = _start(tmp_path, SLEEPER)
    # the process tree is rediscovered every 0.5 s: stop only once a sample has seen the child
    assert _wait_for(lambda: any(s.get("processes") == 1 for s in samples))
    rec.request_stop()
    res = rec.wait()
    assert res.signal == "SIGINT" and res.exit_code == 130
    assert res.stopped_by.startswith("stop requested")
    assert b"".join(c for s, c in chunks if s == "stdout").startswith(b"ready")
    assert samples and "cpu_busy" in samples[-1] and "elapsed_s" in samples[-1]
    assert any(s.get("processes") == 1 for s in samples)
    m = manifest(res.folder)
    assert m["status"] == "complete" and m["exit"]["signal"] == "SIGINT"
    assert load_trace(res.folder).meta.extra["recording"]["exit"]["signal"] == "SIGINT"


@pytest.mark.slow
def test_stop_escalates_to_sigkill_for_a_child_that_ignores_signals(tmp_path):
    rec, _, _ = _start(tmp_path, STUBBORN, stop_grace_s=0.3)
    rec.request_stop()
    res = rec.wait()
    assert res.signal == "SIGKILL" and res.exit_code == 137
    m = manifest(res.folder)
    assert m["exit"] == {"code": None, "signal": "SIGKILL", "recorder_exit_code": 137,
                         "stopped_by": "stop requested (SIGINT)"}
    assert len(load_trace(res.folder).counters) > 0


def test_third_forwarded_signal_kills(tmp_path):
    import signal

    rec, _, _ = _start(tmp_path, STUBBORN)
    for _ in range(3):
        rec.forward_signal(signal.SIGINT)
    res = rec.wait()
    assert res.signal == "SIGKILL"
    assert manifest(res.folder)["exit"]["stopped_by"] == "SIGINT forwarded to the child"


def test_bad_working_directory_and_busy_output(tmp_path):
    with pytest.raises(CommandError, match="working directory"):
        Recorder(RecordConfig(command=("true",), cwd=tmp_path / "nope")).start()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(CommandError, match="not empty"):
        Recorder(RecordConfig(command=("true",), output=tmp_path / "full")).start()
    assert (tmp_path / "full" / "x").read_text() == "x"


def test_spawn_failure_removes_the_folder(tmp_path, monkeypatch):
    """A command that passes the checks but fails in exec (bad interpreter line)."""
    script = tmp_path / "bad.sh"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    out = tmp_path / "gone"
    with pytest.raises(CommandError, match="cannot run"):
        Recorder(RecordConfig(command=(str(script),), output=out)).start()
    assert not out.exists()


def test_working_directory_and_environment_reach_the_child(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    code = "import os; print(os.getcwd()); print(os.environ['SOFA_GUI_RECORDING'])"
    cfg = RecordConfig(command=tuple(py(code)), cwd=work, output=tmp_path / "r")
    res = Recorder(cfg).run()
    lines = (res.folder / "output.log").read_text().splitlines()
    assert lines == [str(work), str(res.folder)]
    m = manifest(res.folder)
    assert m["cwd"] == str(work)
    assert m["environment"]["set_by_recorder"]["SOFA_GUI_RECORDING"] == str(res.folder)


def test_signal_before_the_child_exists_is_delivered_once_it_does(tmp_path):
    import signal

    rec = Recorder(RecordConfig(command=tuple(py(SLEEPER)), output=tmp_path / "early"))
    rec.forward_signal(signal.SIGTERM)  # e.g. Ctrl-C while the folder is being created
    rec.start()
    res = rec.wait()
    assert res.signal == "SIGTERM" and res.exit_code == 143
    assert manifest(res.folder)["exit"]["stopped_by"] == "SIGTERM forwarded to the child"
