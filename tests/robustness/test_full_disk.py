"""A full, read-only or unwritable cache disk never breaks opening."""

from __future__ import annotations

import errno
import json
import logging

from hostile import run_cli

from sofa_gui.core.importers import args_spill, load_trace
from sofa_gui.core.samples import demo_trace_path


def test_analyze_with_a_full_cache_disk_matches_a_normal_run(tmp_path):
    sample = str(demo_trace_path())
    env = {"SOFA_GUI_CACHE_DIR": str(tmp_path / "cache")}
    ok = run_cli(["analyze", "--json", "--no-cache", sample], env=env)
    assert ok.returncode == 0, ok.stderr
    # every file write past 64 KiB fails with EFBIG, as on a full disk (root included)
    full = run_cli(["analyze", "--json", "--no-cache", sample], env=env, fsize=64 * 1024)
    assert full.returncode == 0, full.stderr
    assert json.loads(full.stdout) == json.loads(ok.stdout)
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1 and "keeping trace args in memory" in lines[0], full.stderr


def test_cache_write_on_a_full_disk_is_one_warning_line(tmp_path):
    env = {"SOFA_GUI_CACHE_DIR": str(tmp_path / "cache")}
    full = run_cli(["analyze", str(demo_trace_path())], env=env, fsize=64 * 1024)
    assert full.returncode == 0, full.stderr
    assert "Traceback" not in full.stderr
    assert len(full.stderr.strip().splitlines()) <= 2, full.stderr  # spill + cache: one each
    assert not [p for p in (tmp_path / "cache").glob("*") if p.name != ".tmp"]


class _FailsAfter:
    """A temp file whose writes fail with ENOSPC once ``budget`` bytes were written."""

    def __init__(self, real, budget: int):
        self._real, self._budget = real, budget

    def write(self, data):
        if len(data) > self._budget:
            self._real.write(bytes(data[: self._budget // 2]))  # a torn write, like the kernel's
            raise OSError(errno.ENOSPC, "No space left on device")
        self._budget -= len(data)
        return self._real.write(data)

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_spill_that_fills_the_disk_midway_keeps_every_value(monkeypatch, caplog):
    import tempfile

    monkeypatch.setattr(args_spill, "_temp_file",
                        lambda: _FailsAfter(tempfile.TemporaryFile(), 100))
    spill = args_spill.ArgsSpill()
    values = [b'{"a":%d}' % i for i in range(50)]
    with caplog.at_level(logging.WARNING):
        spill.append(values[:10])  # fits (78 bytes)
        spill.append(values[10:])  # does not
        spill.append([b"", b'{"z":1}'])
    got = spill.array().to_pylist()
    assert got == values + [b"", b'{"z":1}']
    assert len([r for r in caplog.records if "in memory" in r.getMessage()]) == 1


def test_load_with_unwritable_cache_and_temp_dirs_keeps_args(tmp_path, monkeypatch):
    # a cache "dir" under a file, and no usable temp dir: every spill file fails to open
    reference = load_trace(demo_trace_path(), use_cache=False)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(args_spill.tempfile, "tempdir", str(blocker))
    trace = load_trace(demo_trace_path(), use_cache=True)
    assert trace.events == reference.events
    last = len(reference.args) - 1
    assert trace.args.raw(last) == reference.args.raw(last)


def test_app_with_unwritable_cache_decodes_once(tmp_path, monkeypatch):
    # The app decodes big files in a child that writes the cache; with the cache not
    # writable it decoded the whole trace a second time in the GUI process.
    from sofa_gui.app import jobs
    from sofa_gui.core import importers, store
    from sofa_gui.qt.worker import JobState

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(blocker / "cache"))
    reference = load_trace(demo_trace_path(), use_cache=False)

    def no_second_decode(path):
        raise AssertionError(f"{path} decoded again in the app process")

    monkeypatch.setattr(importers, "pick_importer", no_second_decode)
    handoffs = []
    real_read = store.read_handoff
    monkeypatch.setattr(store, "read_handoff", lambda d: handoffs.append(d) or real_read(d))
    trace = jobs.load(JobState(0, lambda *a: None), str(demo_trace_path()), load_mode="process")
    assert trace.events == reference.events
    assert trace.meta.source == str(demo_trace_path())
    assert trace.args.raw(len(reference.args) - 1) == reference.args.raw(len(reference.args) - 1)
    assert handoffs and not handoffs[0].exists()  # the temp folder is gone, the maps remain


def test_app_open_with_unwritable_cache_analyses_once_in_process(tmp_path, monkeypatch, capfd):
    # the loader child writes the cache on a thread while it analyzes; when the write
    # fails it hands the trace over and is stopped, and the app analyzes the trace itself
    from sofa_gui.app import jobs
    from sofa_gui.core import importers
    from sofa_gui.core.analysis.pipeline import Options
    from sofa_gui.qt.worker import JobState

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(importers, "pick_importer", lambda p: (_ for _ in ()).throw(
        AssertionError(f"{p} decoded again in the app process")))
    results = []
    jobs.open_job(JobState(0, lambda gen, kind, payload: kind == "result" and results.append(
        payload)), str(demo_trace_path()), Options(), load_mode="process")
    ready = [r for r in results if isinstance(r, jobs.AnalysisReady)]
    assert isinstance(results[0], jobs.TraceReady) and results[0].trace.events > 0
    assert ready and ready[-1].analysis.findings  # analyzed here, from the handed-over trace
    assert "Traceback" not in capfd.readouterr().err
