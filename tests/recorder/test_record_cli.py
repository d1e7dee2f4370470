"""``sofa-gui record`` end to end on real short workloads (children are ``sys.executable``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from rec_workloads import NUMPY_LOOP, SLEEPER, manifest, py

from sofa_gui.cli import main as sofa_main
from sofa_gui.core.importers import load_trace
from sofa_gui.recorder.cli import main as record_main

REPO = Path(__file__).resolve().parents[2]


def _series(trace, predicate):
    """{name: values} of counter series whose name passes ``predicate``."""
    out = {}
    for sid, name in enumerate(trace.counters.table.name):
        if predicate(name):
            out[name] = trace.counters.samples(sid)[1]
    return out


def _assert_complete(folder: Path) -> dict:
    m = manifest(folder)
    assert m["status"] == "complete"
    for f in ("manifest.json", "counters.parquet", "processes.parquet", "output.log"):
        assert (folder / f).is_file(), f
    assert not (folder / "counters").exists() and not (folder / "processes").exists()
    assert not [p for p in folder.rglob(".*")], "temporary files left behind"
    assert m["end"]["epoch_ns"] > m["start"]["epoch_ns"]
    return m


@pytest.mark.slow
def test_cpu_bound_numpy_loop(tmp_path, capsys):
    out = tmp_path / "run"
    rc = sofa_main(["record", "-o", str(out), "--interval", "0.05", "--", *py(NUMPY_LOOP)])
    assert rc == 0
    m = _assert_complete(out)
    assert m["exit"] == {"code": 0, "signal": None, "recorder_exit_code": 0, "stopped_by": None}
    assert m["sources"]["gpu"]["recorded"] in (True, False)
    if not m["sources"]["gpu"]["recorded"]:
        assert m["sources"]["gpu"]["reason"]  # says why (no NVML here)
    assert m["host"]["logical_cores"] >= 1 and m["host"]["memory_bytes"] > 0
    assert m["processes"][0]["cmdline"][0] == sys.executable
    trace = load_trace(out)
    cores = _series(trace, lambda n: n.startswith("CPU") and n.endswith("util %"))
    assert len(cores) == m["host"]["logical_cores"]
    # clearly busy; not near 100 %: CI machines are shared and the child can be starved
    assert max(float(v.max()) for v in cores.values()) > 30.0
    rss = _series(trace, lambda n: n.endswith(" RSS") and not n.startswith("process tree"))
    assert rss and all(float(v.max()) > 10 * 2**20 for v in rss.values())
    proc_cpu = _series(trace, lambda n: n.endswith("] CPU %"))
    assert max(float(v.max()) for v in proc_cpu.values()) > 20.0
    assert trace.meta.epoch_offset_ns == 0
    assert m["start"]["epoch_ns"] - 10**9 < trace.start_ns < m["start"]["epoch_ns"]
    assert "numpy done" in (out / "output.log").read_text()
    err = capsys.readouterr().err
    assert str(out) in err and "Mean CPU utilisation" in err and "exit code 0" in err


def test_child_exit_code_is_the_recorders(tmp_path):
    out = tmp_path / "exit3"
    rc = record_main(["-o", str(out), "--", *py("import sys; print('bye'); sys.exit(3)")])
    assert rc == 3
    m = _assert_complete(out)
    assert m["exit"]["code"] == 3 and m["exit"]["recorder_exit_code"] == 3
    assert load_trace(out).meta.extra["recording"]["exit"]["code"] == 3


def test_missing_command_exits_2_without_a_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "never"
    assert record_main(["-o", str(out), "--", "no-such-program-xyz", "--flag"]) == 2
    assert record_main(["--", "no-such-program-xyz"]) == 2
    assert not out.exists() and not (tmp_path / "sofa_runs").exists()
    assert "command not found: no-such-program-xyz" in capsys.readouterr().err


def test_not_executable_exits_2(tmp_path, capsys):
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    out = tmp_path / "never"
    assert record_main(["-o", str(out), "--", str(script)]) == 2
    assert not out.exists()
    assert "not executable" in capsys.readouterr().err


def test_usage_errors_exit_2(tmp_path, capsys):
    assert record_main([]) == 2
    assert record_main(["--interval", "0", "--", "true"]) == 2
    assert record_main(["--torch-window", "nonsense", "--", "true"]) == 2
    assert record_main(["-o", str(tmp_path), "--", "true"]) == 0  # empty folder: used
    assert record_main(["-o", str(tmp_path), "--", "true"]) == 2  # now not empty: refused
    assert "not empty" in capsys.readouterr().err


def test_default_folder_under_sofa_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert record_main(py("print('x')", )) == 0  # no `--`: the command starts at python
    runs = list((tmp_path / "sofa_runs").iterdir())
    assert len(runs) == 1 and runs[0].name.endswith(Path(sys.executable).name)
    _assert_complete(runs[0])


def _spawn_recorder(out: Path, *child) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "sofa_gui", "record", "-o", str(out),
                             "--interval", "0.05", "--", *child], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(predicate, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _child_running(out: Path) -> bool:
    try:
        m = manifest(out)
    except (OSError, ValueError):
        return False
    return bool(m.get("child_pid")) and (out / "output.log").is_file() and \
        b"ready" in (out / "output.log").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("sig,exit_code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_to_recorder_is_forwarded_and_folder_completes(tmp_path, sig, exit_code):
    out = tmp_path / "sig"
    rec = _spawn_recorder(out, *py(SLEEPER))
    try:
        assert _wait_for(lambda: _child_running(out)), rec.stderr.read1().decode()
        time.sleep(0.3)
        rec.send_signal(sig)
        _, err = rec.communicate(timeout=30)
    finally:
        if rec.poll() is None:
            rec.kill()
    assert rec.returncode == exit_code, err.decode()
    m = _assert_complete(out)
    assert m["exit"]["signal"] == sig.name and m["exit"]["recorder_exit_code"] == exit_code
    assert sig.name in m["exit"]["stopped_by"]
    trace = load_trace(out)
    assert trace.duration_ns > 0.25e9 and len(trace.counters) > 0
    assert b"recording saved in" in err


@pytest.mark.slow
def test_killed_recorder_leaves_data_up_to_the_last_flush(tmp_path):
    """SIGKILL the recorder itself: flushed parts stay readable, the manifest says running."""
    out = tmp_path / "killed"
    script = (
        "import sys\n"
        "from sofa_gui.recorder.config import RecordConfig\n"
        "from sofa_gui.recorder.runner import Recorder\n"
        f"cfg = RecordConfig(command=tuple({py(SLEEPER)!r}), output={str(out)!r},\n"
        "                   interval_s=0.05, flush_interval_s=0.2)\n"
        "Recorder(cfg).run()\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    rec = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        assert _wait_for(lambda: len(list((out / "counters").glob("part-*.parquet"))) >= 3)
        child = manifest(out)["child_pid"]
        rec.send_signal(signal.SIGKILL)
        rec.wait(10)
    finally:
        if rec.poll() is None:
            rec.kill()
        m = manifest(out)
        if m.get("child_pid"):
            try:
                os.killpg(m["child_pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert m["status"] == "running" and child
    trace = load_trace(out)
    assert len(trace.counters) > 0
    assert any("incomplete" in n for n in trace.meta.load_stats.notes)
    times = trace.counters.time
    assert np.all(times >= m["start"]["epoch_ns"] - 10**9)


def test_process_tree_children_are_found(tmp_path):
    from rec_workloads import WITH_WORKERS

    out = tmp_path / "tree"
    assert record_main(["-o", str(out), "--interval", "0.05", "--", *py(WITH_WORKERS)]) == 0
    m = _assert_complete(out)
    procs = m["processes"]
    assert len(procs) == 3 and m["sources"]["processes"]["peak_processes"] == 3
    root = procs[0]["pid"]
    assert sorted(p["ppid"] for p in procs[1:]) == [root, root]
    trace = load_trace(out)
    total = _series(trace, lambda n: n == "process tree CPU %")["process tree CPU %"]
    workers = _series(trace, lambda n: n.endswith("] CPU %"))
    assert len(workers) == 3 and float(total.max()) > 20.0


def test_calibrate_cores_stores_the_factor_the_advisor_reads(tmp_path):
    """``--calibrate-cores``: after the command, the manifest's host gets the measured
    interference and the opened recording proves the run fact ``cpu_interf`` with it."""
    from sofa_gui.core.analysis.run_facts import run_facts
    out = tmp_path / "calib"
    rc = record_main(["-o", str(out), "--calibrate-cores", "--", *py("print('hi')")])
    assert rc == 0
    m = _assert_complete(out)
    calib = m["host"]["core_interference"]
    assert 0.3 < calib["factor"] < 10 and calib["alone_ms"] > 0
    fact = run_facts(load_trace(out)).get("cpu_interf")
    if 0.5 <= calib["factor"] <= 10:  # outside that a calibration is not believed
        assert fact.value == round(calib["factor"], 2)
        assert fact.proof.startswith("recording manifest host.core_interference")
    handover = m["host"]["batch_handover"]  # PyTorch's DataLoader timed; None without it
    facts = run_facts(load_trace(out))
    if handover is None:
        assert any("batch hand-over not measured" in n for n in m.get("notes", []))
        assert not facts.get("cpu_handover").known
    else:
        assert handover["per_batch_us"] + handover["per_tensor_us"] > 0
        assert {"send_per_batch_us", "send_per_tensor_us", "send_per_mb_us"} <= set(handover)
        fact = facts.get("cpu_handover")
        assert fact.value == round(handover["per_batch_us"] + handover["per_tensor_us"])
        assert fact.proof.startswith("recording manifest host.batch_handover")
    plain = tmp_path / "plain"
    assert record_main(["-o", str(plain), "--", *py("print('hi')")]) == 0
    assert "core_interference" not in manifest(plain)["host"]
    assert "batch_handover" not in manifest(plain)["host"]
    plain_facts = run_facts(load_trace(plain))
    assert not plain_facts.get("cpu_interf").known and not plain_facts.get("cpu_handover").known
