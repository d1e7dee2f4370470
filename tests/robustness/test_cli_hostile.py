"""One line, never a traceback; untrusted text never steers the terminal or a report.

Symlink loops, non-UTF-8 file names, a closed pipe, a read-only cache, and trace
names or file names carrying control, bidi and Markdown characters.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import ROOT, assert_one_line_error, run_cli

from sofa_gui.core import store
from sofa_gui.core.samples import demo_trace_path


@pytest.fixture
def cache_env(tmp_path):
    return {"SOFA_GUI_CACHE_DIR": str(tmp_path / "cache")}


@pytest.mark.parametrize("no_cache", [False, True])
def test_symlink_loop_is_one_line_exit_2(tmp_path, cache_env, no_cache):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    args = ["analyze", str(tmp_path / "a")] + (["--no-cache"] if no_cache else [])
    err = assert_one_line_error(run_cli(args, env=cache_env), 2)
    assert "symbolic link loop" in err


def test_report_on_a_non_utf8_file_name(tmp_path, cache_env):
    src = tmp_path / os.fsdecode(b"run-\xff.json.gz")
    shutil.copy(demo_trace_path(), src)
    out = tmp_path / os.fsdecode(b"report-\xfe.md")
    proc = run_cli(["report", os.fsdecode(bytes(src)), "-o", str(out)], env=cache_env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    text = out.read_text(encoding="utf-8")  # valid UTF-8, the odd byte shown escaped
    assert "run-\\udcff.json.gz" in text


def test_analyze_json_into_a_closed_pipe_is_quiet(cache_env):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **cache_env}
    proc = subprocess.Popen([sys.executable, "-m", "sofa_gui", "analyze", "--json",
                             str(demo_trace_path())], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| true`: closed before the analysis writes (reading a few
    # bytes first raced: under load the whole report fit the pipe buffer before the close)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_concurrent_first_opens_write_one_entry_without_warnings(tmp_path, cache_env):
    src = tmp_path / "t.json.gz"
    shutil.copy(demo_trace_path(), src)
    procs = [subprocess.Popen([sys.executable, "-m", "sofa_gui", "analyze", str(src)],
                              env={**os.environ, "PYTHONPATH": str(ROOT), **cache_env},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errs
    assert all("Traceback" not in e for e in errs), errs
    assert all(len(e.strip().splitlines()) <= 1 for e in errs), errs


def test_newline_in_a_file_name_cannot_forge_a_second_error_line(tmp_path, cache_env):
    bad = tmp_path / "x\nerror: everything is fine\x1b[2J\u202e.json"
    bad.write_text("not json")
    err = assert_one_line_error(run_cli(["analyze", str(bad)], env=cache_env), 2)
    assert err.startswith("error: ") and "\\x0a" in err and "\\x1b" in err and "\\u202e" in err


HOSTILE = "evil\r# Injected heading\x1b[31m\u009b2J\u202egnp.exe \\| split | cell"


def _hostile_trace(tmp_path):
    evs = [{"ph": "X", "name": HOSTILE if i % 3 == 0 else "aten::mm", "cat": "cpu_op",
            "ts": i * 10.0, "dur": 5.0, "pid": 1, "tid": 1} for i in range(60)]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_reports_escape_control_bidi_and_markdown_characters(tmp_path, cache_env, suffix):
    out = tmp_path / f"r{suffix}"
    proc = run_cli(["report", str(_hostile_trace(tmp_path)), "-o", str(out)], env=cache_env)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text(encoding="utf-8")
    for ch in ("\r", "\x1b", "\u009b", "\u202e"):
        assert ch not in text, repr(ch)
    if suffix == ".md":
        assert "\n# Injected" not in text
        for line in text.splitlines():
            if line.startswith("|") and "evil" in line:
                # every | inside the name is escaped by an odd number of backslashes
                assert "\\\\\\|" in line and "\\| cell" in line


def test_terminal_output_escapes_c1_and_bidi(tmp_path, cache_env):
    proc = run_cli(["analyze", str(_hostile_trace(tmp_path))], env=cache_env)
    assert proc.returncode == 0, proc.stderr
    for ch in ("\r", "\x1b", "\u009b", "\u202e"):
        assert ch not in proc.stdout, repr(ch)


def test_symlink_loop_has_no_cache_entry(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "a")
    assert store.try_entry_dir(tmp_path / "a") is None


def test_losing_the_race_to_write_an_entry_is_silent(tmp_path, monkeypatch, caplog):
    # Four processes opening one new trace: one renames its entry into place between
    # another's "remove the old entry" and its own rename, which then fails. That is
    # not an error (the entry is there); it printed a warning with a whole traceback.
    # Deterministic here: the rival's entry appears just before our rename.
    import logging

    from sofa_gui.core.importers import load_trace
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "t.json.gz"
    shutil.copy(demo_trace_path(), src)
    trace = load_trace(src, use_cache=False)
    d = store.entry_dir(src)
    real_replace = os.replace

    def rival_first(a, b):
        if Path(b) == d and not d.exists():
            shutil.copytree(a, d)  # the other process's complete entry
        return real_replace(a, b)

    monkeypatch.setattr(store.os, "replace", rival_first)
    with caplog.at_level(logging.WARNING):
        assert store.save_cached(src, trace) == d
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert store.is_cached(src)
