"""A recording folder cannot make the importer read past its own files or its own size:
links out of the folder are not opened (nor quoted), a Parquet table declaring more rows
than its file can hold is not read, and 80k processes load in linear time."""
from __future__ import annotations

import numpy as np
from attacks import recording_many_processes, recording_rle_counters, recording_symlinks
from hostile import assert_one_line_error, run_cli

from sofa_gui.core.importers import load_trace
from sofa_gui.core.importers.recording import folder, guard


def test_links_out_of_the_folder_are_not_read_nor_quoted(tmp_path):
    rec = recording_symlinks(tmp_path)
    trace = load_trace(rec, use_cache=False)
    notes = trace.meta.load_stats.notes
    assert "torch/kineto-1.json: a link out of the recording folder; not read" in notes
    assert "pyspy/pyspy.json: a link out of the recording folder; not read" in notes
    proc = run_cli(["analyze", "--no-cache", str(rec)])
    assert proc.returncode == 0
    assert "SECRET" not in proc.stdout + proc.stderr and "root:x" not in proc.stdout


def test_a_manifest_linking_out_refuses_the_folder_in_one_line(tmp_path):
    rec = recording_symlinks(tmp_path)
    target = tmp_path / "elsewhere.json"
    target.write_bytes((rec / "manifest.json").read_bytes())
    (rec / "manifest.json").unlink()
    (rec / "manifest.json").symlink_to(target)
    err = assert_one_line_error(run_cli(["analyze", "--no-cache", str(rec)]))
    assert "manifest.json: a link out of the recording folder; not read" in err


def test_a_link_inside_the_folder_is_followed(tmp_path):
    rec = recording_symlinks(tmp_path)
    (rec / "counters.parquet").rename(rec / "counters-real.parquet")
    (rec / "counters.parquet").symlink_to(rec / "counters-real.parquet")
    trace = load_trace(rec, use_cache=False)
    assert len(trace.counters) > 1000


def test_run_length_encoded_rows_past_the_bound_are_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(guard, "ROWS_FLOOR", 100_000)  # the test size: 400k rows in ~20 KB
    rec = recording_rle_counters(tmp_path, 400_000)
    size = (rec / "counters.parquet").stat().st_size
    assert size * guard.ROWS_PER_BYTE < 400_000
    trace = load_trace(rec, use_cache=False)
    assert any(n.startswith("counters.parquet: declares 400,000 rows") and n.endswith("not read")
               for n in trace.meta.load_stats.notes)
    assert len(trace.counters) < 1000  # the process samples only


def test_rows_within_the_bound_are_read(tmp_path):
    rec = recording_rle_counters(tmp_path, 50_000)
    assert len(load_trace(rec, use_cache=False).counters) >= 50_000


def test_many_processes_group_in_one_pass_and_fold_past_the_busiest(tmp_path, monkeypatch):
    rec = recording_many_processes(tmp_path, 3000)
    scans = []
    real = np.flatnonzero
    monkeypatch.setattr(np, "flatnonzero", lambda a: scans.append(1) or real(a))
    trace = load_trace(rec, use_cache=False)
    assert len(scans) < 100, "one scan of all rows per process"
    names = trace.counters.table.name
    per_process = [n for n in names if n.startswith("worker [") and n.endswith(" CPU %")]
    assert len(per_process) == folder.MAX_PROCESS_LANES
    assert "process tree CPU %" in names
    assert any("3,000 processes: the 256 busiest" in n for n in trace.meta.load_stats.notes)


def test_counter_samples_of_one_series_come_from_an_index():
    from sofa_gui.core.trace import Counters, CounterSeries

    series = np.array([2, 0, 1, 0, 2, 2], np.int32)
    c = Counters(series, np.arange(6, dtype=np.int64), np.arange(6.0),
                 CounterSeries(["a", "b", "c", "d"], ["", "", "", ""], np.zeros(4, np.int32)))
    assert [c.samples(i)[0].tolist() for i in range(4)] == [[1, 3], [2], [0, 4, 5], []]
