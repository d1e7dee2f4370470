"""The cache is the user's own and serves only the file it was made from.

A cache root is created 0700; a root someone else owns, others may write to, or the
user cannot access is not used (the trace opens without a cache, one warning line);
an entry that is not the user's alone is dropped; an entry whose source changed
(``cp -p`` of new content of the same size and mtime) is never served.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tracedata import DATA

from sofa_gui.core import cache_dir, store
from sofa_gui.core.importers import load_trace
from sofa_gui.core.source_record import record_matches, source_record

MINITOY = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
ROOT = Path(__file__).resolve().parents[2]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
OTHER_UID = 4242


@pytest.fixture
def trace_file(tmp_path) -> Path:
    p = tmp_path / "src" / "trace.json"
    p.parent.mkdir()
    p.write_bytes(gzip.decompress(MINITOY.read_bytes()))
    return p


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(d))
    cache_dir._warned.clear()  # each test sees its own first warning
    return d


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _cache_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_root_is_created_private_with_private_entries(root, trace_file):
    old = os.umask(0o002)
    try:
        load_trace(trace_file)
    finally:
        os.umask(old)
    assert os.stat(root).st_mode & 0o777 == 0o700
    (entry,) = _entries(root)
    assert os.stat(entry).st_mode & 0o777 == 0o700
    assert {os.stat(f).st_mode & 0o777 for f in entry.iterdir()} == {0o600}


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o770, 0o000, 0o500])
def test_shared_or_inaccessible_root_opens_without_cache(root, trace_file, caplog, mode):
    root.mkdir()
    os.chmod(root, mode)
    try:
        for _ in range(2):
            trace = load_trace(trace_file)
            assert len(trace.slices) > 0 and trace.cache_entry is None
        os.chmod(root, 0o700)
        assert _entries(root) == []
    finally:
        os.chmod(root, 0o700)
    (warning,) = _cache_warnings(caplog)
    assert "opening without a cache" in warning and str(root) in warning


@as_root
def test_root_owned_by_someone_else_is_not_used(root, trace_file, caplog):
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, -1)
    assert load_trace(trace_file).cache_entry is None
    assert _entries(root) == []
    (warning,) = _cache_warnings(caplog)
    assert f"owned by uid {OTHER_UID}" in warning


@as_root
def test_entry_owned_by_someone_else_is_never_read(root, trace_file, caplog, monkeypatch):
    load_trace(trace_file)
    (entry,) = _entries(root)
    os.chown(entry / "manifest.json", OTHER_UID, -1)
    read = []
    monkeypatch.setattr(store, "read_trace", lambda d: read.append(d))
    trace = load_trace(trace_file)
    assert read == [] and len(trace.slices) > 0
    assert any(f"owned by uid {OTHER_UID}" in w for w in _cache_warnings(caplog))


def test_group_writable_entry_is_dropped_and_rebuilt(root, trace_file, caplog):
    load_trace(trace_file)
    (entry,) = _entries(root)
    os.chmod(entry / "slices.arrow", 0o664)
    assert store.load_cached(trace_file) is None
    assert not entry.exists()
    assert "writable by others" in _cache_warnings(caplog)[0]
    assert load_trace(trace_file).cache_entry == entry and store.load_cached(trace_file)


def _same_size_other_content(trace_file: Path) -> bytes:
    """The trace with one kernel renamed (same length): another trace, same size."""
    data = trace_file.read_bytes()
    name = b'"name": "Memcpy HtoD'
    assert name in data
    return data.replace(name, b'"name": "Memcpy XtoX')


def test_cp_p_of_new_same_size_content_is_not_served_old_results(root, trace_file, tmp_path):
    first = load_trace(trace_file)
    assert not any("XtoX" in n for n in first.names)
    other = tmp_path / "other.json"
    other.write_bytes(_same_size_other_content(trace_file))
    st = os.stat(trace_file)
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    subprocess.run(["cp", "-p", str(other), str(trace_file)], check=True)
    assert os.stat(trace_file).st_mtime_ns == st.st_mtime_ns
    assert store.entry_dir(trace_file) == first.cache_entry  # same key: the record decides
    again = load_trace(trace_file)
    assert any("XtoX" in n for n in again.names)
    assert store.load_cached(trace_file) is not None  # the new entry is served next time


def test_entry_records_its_source(root, trace_file):
    load_trace(trace_file)
    (entry,) = _entries(root)
    source = json.loads((entry / "manifest.json").read_text())["source"]
    ((name, size, mtime, ino, ctime, ends),) = source["files"]
    st = os.stat(trace_file)
    assert source["path"] == str(trace_file.resolve()) and name == trace_file.name
    assert (size, mtime, ino, ctime) == (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    assert len(ends) == 64


def test_entry_without_a_source_record_is_rebuilt(root, trace_file):
    load_trace(trace_file)
    (entry,) = _entries(root)
    manifest = json.loads((entry / "manifest.json").read_text())
    del manifest["source"]
    (entry / "manifest.json").write_text(json.dumps(manifest))
    assert store.load_cached(trace_file) is None


def test_inaccessible_root_cli_prints_one_warning_and_no_traceback(root, trace_file):
    root.mkdir()
    os.chmod(root, 0)
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        out = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(trace_file)],
                             env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    finally:
        os.chmod(root, 0o700)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "not accessible (mode 000)" in lines[0], out.stderr
    shutil.rmtree(root)


def test_source_changed_while_it_is_read_is_not_served_next_time(root, trace_file, tmp_path,
                                                                   monkeypatch):
    """The record is taken before the read: an entry of bytes read from a file that then
    changed (same size and mtime) is dropped on the next open."""
    from sofa_gui.core.importers.chrome import trace as chrome_trace

    other = tmp_path / "other.json"
    other.write_bytes(_same_size_other_content(trace_file))
    st = os.stat(trace_file)
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    original = chrome_trace.IMPORTER.load

    def load_then_swap(path, progress):
        trace = original(path, progress)
        subprocess.run(["cp", "-p", str(other), str(trace_file)], check=True)
        return trace

    monkeypatch.setattr(chrome_trace.IMPORTER, "load", load_then_swap)
    first = load_trace(trace_file)
    assert not any("XtoX" in n for n in first.names)
    monkeypatch.setattr(chrome_trace.IMPORTER, "load", original)
    assert any("XtoX" in n for n in load_trace(trace_file).names)


def test_a_folder_record_follows_every_file(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("a.txt", "b.txt"):
        (folder / name).write_bytes(b"x" * 3000)
    record = source_record(folder)
    assert [f[0] for f in record["files"]] == ["run/a.txt", "run/b.txt"]
    assert record_matches(record, folder)
    st = os.stat(folder / "b.txt")
    (folder / "b.txt").write_bytes(b"y" * 3000)
    os.utime(folder / "b.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not record_matches(record, folder)


@pytest.mark.parametrize("manifest", ["[" * 100_000, '{"source": [1]}', "not json", "[]"])
def test_unreadable_manifest_is_dropped(root, trace_file, manifest):
    load_trace(trace_file)
    (entry,) = _entries(root)
    (entry / "manifest.json").write_text(manifest)
    assert store.load_cached(trace_file) is None and not entry.exists()
