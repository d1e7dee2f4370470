"""Minimal reproductions of crashes and hangs the importer fuzzing found (each one fixed)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from fuzz_harness import deadline

from sofa_gui.core import store
from sofa_gui.core.importers import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"


def _logdir_copy(tmp_path: Path) -> Path:
    src = DATA / "sofa-demo-sofalog"
    if not src.is_dir():
        pytest.skip("tests/data/sofa-demo-sofalog not present")
    dst = tmp_path / "sofalog"
    shutil.copytree(src, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


def test_sofa_logdir_with_a_fifo_in_place_of_a_csv_does_not_block(tmp_path):
    # Found by fuzzing (folder mutation "fifo"): sniffing the header opened the FIFO,
    # which blocks forever with no writer.
    folder = _logdir_copy(tmp_path)
    (folder / "mpstat.csv").unlink()
    os.mkfifo(folder / "mpstat.csv")
    with deadline(20):
        trace = load_trace(folder, use_cache=False)
    assert any("mpstat.csv" in n and "not a regular file" in n for n in trace.meta.load_stats.notes)
    assert trace.events > 0


def test_cache_accepts_a_folder_with_a_non_utf8_file_name(tmp_path):
    # Found by fuzzing (folder mutation "extra-partial-file"): the cache key encoded
    # file names as strict UTF-8, so a name with a byte like 0xff raised UnicodeEncodeError.
    folder = _logdir_copy(tmp_path)
    (folder / os.fsdecode(b"\xff\xfe-notes.txt")).write_bytes(b"x")
    trace = load_trace(folder, use_cache=True)
    assert store.entry_dir(folder).is_dir()
    again = load_trace(folder, use_cache=True)
    assert again.events == trace.events


def test_format_error_reason_is_one_bounded_line():
    # Found by fuzzing (recording with a corrupt Parquet part): pyarrow's OSError text spans
    # lines, and the registry passed it through, breaking the CLI's one-line promise.
    from sofa_gui.core.errors import TraceFormatError

    exc = TraceFormatError("x.parquet", "cannot read: Couldn't deserialize thrift\n"
                                        "Deserializing page header failed.\n")
    assert exc.reason == "cannot read: Couldn't deserialize thrift; Deserializing page header " \
                         "failed."
    assert len(TraceFormatError("x", "y" * 10_000).reason) == 300
    assert TraceFormatError("x", "\n").reason == "unreadable"


def test_cache_write_of_text_arrow_rejects_is_skipped_not_raised(tmp_path, monkeypatch):
    # Found by fuzzing (Chrome trace whose name is a lone surrogate "\ud800"): Arrow cannot
    # encode it, and save_cached, which promises never to raise, raised UnicodeEncodeError.
    from sofa_gui.core.builder import TraceBuilder
    from sofa_gui.core.trace import LaneKind

    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "t.json"
    src.write_text("{}")
    b = TraceBuilder(str(src), "test")
    lane = b.lane("l", "lane", LaneKind.CPU)
    b.add_slices([0], [1], lane, ["bad \ud800 name"])
    assert store.save_cached(src, b.finish()) is None
    assert list((tmp_path / "cache").iterdir()) == []  # no half-written entry left


def test_a_sniffer_choking_on_content_means_not_that_format(tmp_path):
    # Found by fuzzing (recording folder whose manifest.json is a 5000-deep JSON array):
    # the recording sniffer's json.loads raised RecursionError out of pick_importer.
    from sofa_gui.core.errors import TraceFormatError

    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TraceFormatError) as info:
        load_trace(run, use_cache=False)
    assert info.value.path == str(run)


@pytest.mark.parametrize("victim", ["torch/kineto-12306.json", "torch/kineto-12306.status.json"])
def test_recording_with_a_fifo_in_place_of_a_torch_file_does_not_block(tmp_path, victim):
    # Found by fuzzing (folder mutation "fifo"): the Kineto file list and the status file
    # were opened without checking they are regular files; a FIFO blocks forever.
    src = DATA / "recording-torch-pyspy"
    if not src.is_dir():
        pytest.skip("tests/data/recording-torch-pyspy not present")
    rec = tmp_path / "rec"
    shutil.copytree(src, rec)
    (rec / victim).unlink()
    os.mkfifo(rec / victim)
    with deadline(60):
        trace = load_trace(rec, use_cache=False)
    assert trace.events > 0


def test_sofa_csv_ragged_row_with_non_utf8_bytes_is_skipped_not_fatal(tmp_path, capfd):
    # Found by fuzzing (CSV mutations "ragged-row" + "non-utf8"): pyarrow decodes a
    # malformed row as UTF-8 before the invalid-row handler; that failed, the handler never
    # ran, pyarrow printed "Exception ignored ..." and the whole file was rejected.
    folder = _logdir_copy(tmp_path)
    good = load_trace(folder / "cputrace.csv", use_cache=False)
    with open(folder / "cputrace.csv", "ab") as f:
        f.write(b"1548903852.071722,19.5,0.0,-1,-1,0,0,-1,-1,7125,7125,\xec\x80bad,0,extra\n")
    trace = load_trace(folder / "cputrace.csv", use_cache=False)
    assert trace.events == good.events
    assert trace.meta.load_stats.skipped_total == good.meta.load_stats.skipped_total + 1
    assert "Exception ignored" not in capfd.readouterr().err


def test_nsys_gpu_properties_with_blob_and_infinite_cells_stay_json(tmp_path):
    # Found by fuzzing (sqlite "odd-values"): a TARGET_INFO_GPU cell holding a blob or an
    # infinite real went into meta.devices as is; analyze --json and the cache manifest
    # then failed with TypeError / ValueError.
    import json
    import sqlite3
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from nsys_fixture import make_nsys_db

    from sofa_gui.core.summary import trace_dict

    db = make_nsys_db(tmp_path / "report.sqlite")
    con = sqlite3.connect(db)
    con.execute("UPDATE TARGET_INFO_GPU SET name = ?, clockRate = ?", (b"\xff\xfeGPU", 1e999))
    con.commit()
    con.close()
    trace = load_trace(db, use_cache=True)
    json.dumps(trace_dict(trace), allow_nan=False)
    assert store.entry_dir(db).is_dir()


def test_activity_bins_survive_stamps_whose_difference_overflows_int64():
    # Found by fuzzing (recording whose Kineto file had absurd ts): start - t0 wrapped
    # around in int64 and np.bincount got negative bins.
    import numpy as np

    from sofa_gui.core.analysis.iterations.activity import _bins

    start = np.array([-(2**62) * 2 + 5, 0, 2**62 * 2 - 5], np.int64)
    counts, _, _ = _bins(start, start + 1, 16)
    assert counts.sum() == 3


def test_chrome_event_whose_end_overflows_int64_is_skipped(tmp_path):
    # Found by fuzzing (Kineto "wrong-type": dur = 2**53 µs on an epoch-µs ts): ts and dur
    # were each in range but start + dur wrapped around int64 to a negative end.
    import json

    events = [{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1,
               "ts": 1712195495505883.75, "dur": 5.0},
              {"ph": "X", "cat": "cpu_op", "name": "wraps", "pid": 1, "tid": 1,
               "ts": 1712195495505883.75, "dur": float(2**53)}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(p, use_cache=False)
    assert trace.names[int(trace.slices.name[0])] == "ok" and len(trace.slices) == 1
    assert (trace.slices.end >= trace.slices.start).all()
    assert trace.meta.load_stats.skipped["dur out of range"] == 1


def test_a_hundred_thousand_threads_load_and_analyse_in_linear_time(tmp_path):
    # Rebuilding KeyIndex's sorted arrays per new thread, or scanning every op of the host
    # stream per thread, makes 20k threads take 33 s to load and 100k minutes to
    # analyze. The deadline is a hang guard (about 10x the linear cost), not a timing.
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from attacks import many_threads

    from sofa_gui.core.analysis.pipeline import analyze

    path = many_threads(tmp_path, 100_000, per_thread=1)
    with deadline(120):
        trace = load_trace(path, use_cache=False)
        result = analyze(trace)
    assert len(trace.lanes) == 100_000 and trace.events == 100_000
    assert result.iterations is not None


def test_text_in_an_integer_column_skips_that_row_not_the_export(tmp_path):
    # One text value in an INTEGER column must not reject the whole export.
    import sqlite3

    sys_path = str(Path(__file__).resolve().parents[1] / "core")
    import sys

    sys.path.insert(0, sys_path)
    from nsys_fixture import make_nsys_db

    good = tmp_path / "good.sqlite"
    make_nsys_db(good)
    reference = load_trace(good, use_cache=False)
    bad = tmp_path / "bad.sqlite"
    make_nsys_db(bad)
    con = sqlite3.connect(bad)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'not a number' "
                "WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    con.commit()
    con.close()
    trace = load_trace(bad, use_cache=False)
    assert trace.meta.load_stats.skipped["non-integer value in an integer column"] == 1
    assert trace.events == reference.events - 1
    assert trace.meta.load_stats.read == reference.meta.load_stats.read


def test_rank_folder_lists_every_file_it_left_out(tmp_path):
    # Unreadable or unrecognized files are never dropped without a word.
    folder = tmp_path / "ranks"
    shutil.copytree(DATA / "ranks", folder)
    (folder / "notes.txt").write_text("hello")
    (folder / "broken.json").write_text('{"not": "a trace"}')
    (folder / "sub").mkdir()
    os.mkfifo(folder / "pipe.json")
    with deadline(60):
        trace = load_trace(folder, use_cache=False)
    notes = trace.meta.load_stats.notes
    assert "notes.txt: left out (not a .json or .json.gz file)" in notes
    assert "broken.json: left out (not a Chrome/Kineto trace)" in notes
    assert "sub: left out (a folder)" in notes
    assert "pipe.json: left out (not a regular file)" in notes


@pytest.mark.parametrize("csv", ["gputrace.csv", "cputrace.csv"])
def test_a_csv_cell_longer_than_the_read_block_skips_that_row(tmp_path, csv):
    # A 9 MiB cell (pyarrow reads 4 MiB blocks; a row over two of them "straddles") made
    # the whole file unreadable: every row lost, "(0 skipped)", a note at most.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from ingest_sofa_nsys import write_sofa
    folder = tmp_path / "logdir"
    write_sofa(folder, 300)
    good = load_trace(folder, use_cache=False)
    path = folder / csv
    lines = path.read_bytes().split(b"\n")
    cells = lines[150].split(b",")
    cells[-2] = b"x" * (9 << 20)  # the name column
    lines[150] = b",".join(cells)
    path.write_bytes(b"\n".join(lines))
    trace = load_trace(folder, use_cache=False)
    assert trace.events == good.events - 1
    assert trace.meta.load_stats.skipped == {**good.meta.load_stats.skipped,
                                         f"{csv}: row longer than 4 MiB": 1}
    assert trace.meta.load_stats.read == good.meta.load_stats.read
    assert not any("unreadable" in n for n in trace.meta.load_stats.notes)


@pytest.mark.parametrize("cell", [b"x\n", b'x,"\n'], ids=["lines", "quote-ended lines"])
def test_a_quoted_cell_with_line_breaks_across_read_blocks_skips_that_record(tmp_path, cell):
    # pyarrow cuts 4 MiB read blocks at line breaks without looking at quotes: a quoted
    # cell of 5 MB of short lines across a block boundary made the rest of that block
    # garbage (every real row after it lost) or the whole file unreadable ("parser got
    # out of sync"). Now the record(s) holding quoted line breaks are skipped and counted.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from ingest_sofa_nsys import write_sofa
    folder = tmp_path / "logdir"
    write_sofa(folder, 300)
    good = load_trace(folder, use_cache=False)
    path = folder / "gputrace.csv"
    lines = path.read_bytes().split(b"\n")
    cells = lines[150].split(b",")
    cells[-2] = b'"' + cell * ((5 << 20) // len(cell)) + b'"'  # the name column
    lines[150] = b",".join(cells)
    path.write_bytes(b"\n".join(lines))
    trace = load_trace(folder, use_cache=False)
    stats = trace.meta.load_stats
    assert trace.events == good.events - 1
    assert stats.skipped.get("gputrace.csv: row with a line break inside quotes", 0) >= 1
    assert not any("unreadable" in n for n in stats.notes)
