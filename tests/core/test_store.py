"""Trace cache: written on first open, memory-mapped on reopen, invalidated by changes."""

from __future__ import annotations

import gzip
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from tracedata import DATA

from sofa_gui.core import store
from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace
from sofa_gui.core.importers.chrome import trace as chrome_trace
from sofa_gui.core.trace import Trace

MINITOY = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(d))
    return d


@pytest.fixture
def trace_file(tmp_path) -> Path:
    p = tmp_path / "src" / MINITOY.name
    p.parent.mkdir()
    shutil.copy(MINITOY, p)
    return p


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.is_dir()) if cache.exists() else []


def _count_imports(monkeypatch) -> list:
    calls = []
    original = chrome_trace.IMPORTER.load

    def counting(path, progress):
        calls.append(path)
        return original(path, progress)

    monkeypatch.setattr(chrome_trace.IMPORTER, "load", counting)
    return calls


def assert_same_trace(a: Trace, b: Trace) -> None:
    for col in ("start", "dur", "lane", "name", "kind", "depth", "device", "stream", "bytes",
                "copy_kind", "correlation", "args"):
        x, y = getattr(a.slices, col), getattr(b.slices, col)
        assert x.dtype == y.dtype and np.array_equal(x, y), col
    for col in ("kind", "rank", "pid", "tid", "device", "stream", "sort_key", "depth"):
        assert np.array_equal(getattr(a.lanes, col), getattr(b.lanes, col)), col
    assert a.lanes.name == b.lanes.name and a.lanes.group == b.lanes.group
    assert a.names == b.names
    for col in ("series", "time", "value"):
        assert np.array_equal(getattr(a.counters, col), getattr(b.counters, col)), col
    assert a.counters.table.name == b.counters.table.name
    assert a.counters.table.unit == b.counters.table.unit
    assert np.array_equal(a.counters.table.lane, b.counters.table.lane)
    for col in ("src", "dst", "kind"):
        assert np.array_equal(getattr(a.flows, col), getattr(b.flows, col)), col
    assert len(a.args) == len(b.args)
    assert all(a.args.raw(i) == b.args.raw(i) for i in range(len(a.args)))
    assert a.meta.to_dict() == b.meta.to_dict()


def test_first_open_writes_and_reopen_reads_the_cache(cache, trace_file, monkeypatch):
    calls = _count_imports(monkeypatch)
    fresh = load_trace(trace_file)
    assert len(calls) == 1
    (entry,) = _entries(cache)
    assert (entry / "manifest.json").is_file() and (entry / "slices.arrow").is_file()
    cached = load_trace(trace_file)
    assert len(calls) == 1  # served from the cache, the importer did not run
    assert_same_trace(fresh, cached)


def test_cached_columns_are_memory_mapped(cache, trace_file):
    load_trace(trace_file)
    cached = load_trace(trace_file)
    start = cached.slices.start
    assert not start.flags.owndata and not start.flags.writeable


def test_cached_trace_equals_a_fresh_load_on_several_formats(cache, tmp_path):
    for src in (DATA / "ranks", DATA / "kineto" / "benchmark_result_2869224_1695835535_"
                "trace.json.gz"):
        fresh = load_trace(src, use_cache=False)
        load_trace(src)
        assert_same_trace(fresh, load_trace(src))


def test_changed_mtime_invalidates(cache, trace_file, monkeypatch):
    calls = _count_imports(monkeypatch)
    load_trace(trace_file)
    st = trace_file.stat()
    os.utime(trace_file, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    load_trace(trace_file)
    assert len(calls) == 2
    assert len(_entries(cache)) == 2  # a new key; the old entry is simply never used again


def test_no_cache_entry_after_a_failed_load(cache, tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(MINITOY.read_bytes())[:3000])
    with pytest.raises(TraceFormatError):
        load_trace(bad)
    assert _entries(cache) == []
    assert not any(cache.rglob("*.arrow")) if cache.exists() else True


def test_read_only_source_folder_is_left_untouched(cache, tmp_path):
    src = tmp_path / "ro"
    shutil.copytree(DATA / "ranks", src)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in src.iterdir())
    src.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        trace = load_trace(src)
        assert len(trace.slices) > 0
        assert sorted((p.name, p.stat().st_mtime_ns) for p in src.iterdir()) == before
        assert len(_entries(cache)) == 1
        assert load_trace(src).meta.source == trace.meta.source
    finally:
        src.chmod(stat.S_IRWXU)


def test_damaged_or_old_entries_are_dropped_and_rebuilt(cache, trace_file, monkeypatch):
    calls = _count_imports(monkeypatch)
    load_trace(trace_file)
    (entry,) = _entries(cache)
    (entry / "slices.arrow").write_bytes(b"not arrow")
    trace = load_trace(trace_file)
    assert len(calls) == 2 and len(trace.slices) > 0
    monkeypatch.setattr(store, "FORMAT_VERSION", store.FORMAT_VERSION + 1)
    load_trace(trace_file)
    assert len(calls) == 3


def test_no_cache_flag_neither_reads_nor_writes(cache, trace_file):
    load_trace(trace_file, use_cache=False)
    assert _entries(cache) == []


def test_unwritable_cache_dir_is_not_fatal(tmp_path, monkeypatch, trace_file):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(blocker / "cache"))
    assert len(load_trace(trace_file).slices) > 0


def test_stale_temporary_entries_are_swept_fresh_ones_kept(cache, trace_file):
    cache.mkdir(parents=True, exist_ok=True)
    stale, fresh = cache / ".tmp-dead", cache / ".tmp-writing"
    for d in (stale, fresh):
        d.mkdir()
        (d / "slices.arrow").write_bytes(b"half")
    old = os.stat(stale).st_mtime - store.STALE_TMP_SECONDS - 10
    os.utime(stale, (old, old))
    load_trace(trace_file)
    assert not stale.exists()
    assert fresh.exists()


def test_cached_reopen_reports_the_path_as_given_now(cache, trace_file, monkeypatch):
    load_trace(trace_file)
    monkeypatch.chdir(trace_file.parent)
    again = load_trace(Path(trace_file.name))
    assert again.meta.source == trace_file.name
