"""``sofa-gui try`` end to end on real short programs (children are ``sys.executable``)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sofa_gui.core.analysis.tryable import loader_workers
from sofa_gui.recorder.cli import main as record_main
from sofa_gui.recorder.torch_shim import SHIM_DIR
from sofa_gui.recorder.try_cli import main as try_main

DATA = Path(__file__).resolve().parents[1] / "data" / "try"
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed")
#: Exits 3 when TF_XLA_FLAGS is set, as a program that rejects a flag would.
REJECTS_FLAGS = ("import os, sys\n"
                 "print('step')\n"
                 "if 'TF_XLA_FLAGS' in os.environ:\n"
                 "    sys.stderr.write('unknown flag in TF_XLA_FLAGS\\n')\n"
                 "    sys.exit(3)\n")


def test_a_fix_that_needs_a_code_change_says_so_and_shows_it(tmp_path, capsys):
    rc = try_main(["--fix", "torch-compile", "-o", str(tmp_path / "t"), "--",
                   sys.executable, "-c", "pass"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "needs a change to the program" in err and "torch.compile(model)" in err
    assert not (tmp_path / "t").exists()


def test_a_failing_after_run_stops_the_try_with_its_error(tmp_path, capsys):
    out = tmp_path / "t"
    rc = try_main(["--fix", "xla-auto-jit", "--rounds", "2", "-o", str(out), "--",
                   sys.executable, "-c", REJECTS_FLAGS])
    err = capsys.readouterr().err
    assert rc == 1
    assert "AFTER run 1 failed (exit code 3)" in err and "unknown flag in TF_XLA_FLAGS" in err
    assert (out / "b1" / "stdout.txt").read_text() == "step\n"
    assert "unknown flag" in (out / "a1" / "stderr.txt").read_text()
    assert not (out / "b2").exists(), "the try went on after the failed run"


def test_record_keeps_the_command_and_try_reruns_it_into_the_recording(tmp_path, capsys,
                                                                       monkeypatch):
    rec = tmp_path / "rec"
    monkeypatch.setenv("MY_DATASET_ROOT", str(tmp_path))
    monkeypatch.setenv("MY_API_TOKEN", "secret")
    assert record_main(["-o", str(rec), "--keep-env", "MY_DATASET_ROOT", "-C", str(tmp_path),
                        "--", sys.executable, "-c", "print('hello')"]) == 0
    rerun = json.loads((rec / "manifest.json").read_text())["rerun"]
    assert rerun["command"] == [sys.executable, "-c", "print('hello')"]
    assert rerun["cwd"] == str(tmp_path.resolve())
    assert rerun["env"]["MY_DATASET_ROOT"] == str(tmp_path)
    assert "MY_API_TOKEN" not in rerun["env"]
    assert not any(k.startswith("SOFA_GUI_") for k in rerun["env"])
    capsys.readouterr()
    assert try_main(["--fix", "xla-auto-jit", "--rounds", "1", "--json",
                     "--recording", str(rec)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["fix"] == "xla-auto-jit" and result["rounds"] == 1
    assert result["applied"]["environment"]["TF_XLA_FLAGS"].endswith("--tf_xla_cpu_global_jit")
    assert result["unprofiled"]["basis"] == "whole run"  # no DataLoader steps, no profile
    assert result["verdict"].startswith("did not hold, because the BEFORE runs show no "
                                        "finding this fix answers")
    assert [r["exit_code"] for r in result["runs"]] == [0, 0]
    (folder,) = (rec / "tries").iterdir()
    assert (folder / "a1" / "stdout.txt").read_text() == "hello\n"
    assert try_main(["--list", str(rec)]) == 0
    listed = capsys.readouterr().out
    assert folder.name in listed and "xla-auto-jit: did not hold" in listed


def test_a_recording_of_another_user_is_not_rerun(tmp_path, capsys):
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "manifest.json").write_text(json.dumps({"command": "rm -rf /"}))
    assert try_main(["--fix", "gc-freeze", "--recording", str(rec)]) == 2
    assert "does not say which command ran" in capsys.readouterr().err


def test_the_shim_changes_tf_data_map_s_default(tmp_path):
    """tfdata-autotune: ``Dataset.map`` without num_parallel_calls gets AUTOTUNE (a minimal
    stand-in package named tensorflow with the same API shape)."""
    pkg = tmp_path / "site" / "tensorflow"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "class data:\n    AUTOTUNE = -1\n\n"
        "    class Dataset:\n"
        "        def map(self, fn, num_parallel_calls=None):\n"
        "            return num_parallel_calls\n")
    code = ("import tensorflow as tf\n"
            "print(tf.data.Dataset().map(abs), tf.data.Dataset().map(abs, "
            "num_parallel_calls=2))\n")
    env = dict(os.environ, PYTHONPATH=f"{SHIM_DIR}{os.pathsep}{tmp_path / 'site'}",
               SOFA_GUI_TRY_TFDATA_AUTOTUNE="1", SOFA_GUI_RECORDING=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.split() == ["-1", "2"], out.stderr


@needs_torch
def test_the_main_process_keeps_the_cores_the_new_workers_leave(tmp_path):
    """loader-workers: a DataLoader that gets workers from the fix caps the main process's
    intra-op threads at the plan's; one that already has workers changes nothing."""
    code = ("import torch\n"
            "from torch.utils.data import DataLoader\n"
            "torch.set_num_threads(2)\n"
            "DataLoader(list(range(4)), num_workers=3)\n"
            "print(torch.get_num_threads())\n"
            "d = DataLoader(list(range(4)))\n"
            "print(torch.get_num_threads(), d.num_workers)\n")
    env = dict(os.environ, PYTHONPATH=str(SHIM_DIR), SOFA_GUI_RECORDING=str(tmp_path),
               SOFA_GUI_TRY_LOADER_WORKERS="2", SOFA_GUI_TRY_MAIN_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split() == ["2", "1", "2"], out.stderr
    applied = json.loads((tmp_path / "try-applied.json").read_text())["applied"]
    assert applied["torch.set_num_threads"] == 1 and applied["DataLoader.num_workers"] == 2


@needs_torch
@pytest.mark.slow
def test_loader_workers_on_a_training_script_leaves_the_script_unchanged(tmp_path, capsys):
    script = tmp_path / "train.py"
    shutil.copy(DATA / "train_loader.py", script)
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    out = tmp_path / "t"
    rc = try_main(["--fix", "loader-workers", "--rounds", "1", "--steps", "2", "--warmup", "1",
                   "-o", str(out), "--json", "-C", str(tmp_path), "--",
                   sys.executable, "train.py"])
    assert rc == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert hashlib.sha256(script.read_bytes()).hexdigest() == digest
    assert result["applied"]["program"]["DataLoader.num_workers"] >= 1
    assert result["applied"]["program"]["DataLoader.persistent_workers"] is True
    plan = result["plan"]  # the first BEFORE run's plan; none when no core was free then
    # a plan of no workers (none helps on this machine) is tried with the default for the
    # cores free, as is a run without a plan
    workers = (plan["num_workers"] if plan and plan["num_workers"] > 0
               else loader_workers(result["cores_free"])[0])
    assert result["applied"]["program"]["DataLoader.num_workers"] == workers
    manifest = json.loads((out / "b1" / "manifest.json").read_text())
    assert "batch_handover" in manifest["host"]  # the calibration measured once, in each run
    assert set(result["measured"]) >= {"median_speedup", "mean_speedup", "p90_speedup"}
    assert result["unprofiled_speedup"] > 0
    assert result["predicted_by"]["finding"] == "input_pipeline_bound"
    assert result["verdict"].startswith(("held: predicted", "did not hold, because"))
    assert [r["steps_taken"] for r in result["runs"]] == [6, 6]  # 1 + 2 + 2, then the end
    assert json.loads((out / "try.json").read_text())["verdict"] == result["verdict"]


def test_a_command_that_cannot_start_is_one_line_and_exit_2(tmp_path, capsys):
    rc = try_main(["--fix", "gc-freeze", "-o", str(tmp_path / "t"), "--",
                   str(tmp_path / "no-such-program")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("sofa-gui try: command not found:") and err.count("\n") == 1
    assert not (tmp_path / "t").exists()


def test_the_text_output_ends_with_the_verdict_and_where_the_runs_are(tmp_path, capsys):
    out = tmp_path / "t"
    assert try_main(["--fix", "xla-auto-jit", "--rounds", "1", "-o", str(out), "--",
                     sys.executable, "-c", "print('ok')"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Tried xla-auto-jit over 1 round(s)")
    assert any(x.startswith("Unprofiled whole runs (no steps counted)") for x in lines)
    assert lines[-2].startswith("did not hold, because the BEFORE runs show no finding")
    assert lines[-1] == f"Runs, their output and try.json: {out}"
