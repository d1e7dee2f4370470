"""Gzip-compressed XProf captures (``*.xplane.pb.gz``, as ``gzip`` leaves them and as the
diagnosis corpus stores them) open wherever a ``.xplane.pb`` opens, and bad gzip input
is one line naming the file."""

from __future__ import annotations

import gzip
import json
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from tracedata import DATA

from sofa_gui.cli import main
from sofa_gui.core import store
from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace, opening, pick_importer, trace_file_filter
from sofa_gui.core.importers.confidence import Confidence
from sofa_gui.core.importers.xplane.xspace import IMPORTER

TW003 = DATA / "xplane" / "tw003.xplane.pb"
#: A real TensorFlow capture of the corpus, stored gzip-compressed (a GradientTape step
#: on a serial tf.data map).
CASE = DATA / "corpus" / "tf_tape_serial_map" / "capture-1"
GZ = next(CASE.rglob("*.xplane.pb.gz"))


def _gz(src: Path, dest: Path) -> Path:
    dest.write_bytes(gzip.compress(src.read_bytes(), compresslevel=9, mtime=0))
    return dest


def _same(a, b) -> None:
    assert a.meta.format == b.meta.format == "xplane"
    assert len(a.slices) == len(b.slices) > 1000
    for col in ("start", "dur", "lane", "name", "args"):
        assert np.array_equal(getattr(a.slices, col), getattr(b.slices, col)), col
    assert list(a.names) == list(b.names)


def test_the_sniffer_picks_xplane_for_a_gzip_capture_by_its_content(tmp_path):
    own = _gz(TW003, tmp_path / "tw003.xplane.pb.gz")
    assert pick_importer(own).name == "xplane"
    assert IMPORTER.can_open(own) == Confidence.SIGNATURE
    # another name: the content still says XSpace, the name only suggests it
    other = shutil.copy(own, tmp_path / "profile.gz")
    assert IMPORTER.can_open(Path(other)) == Confidence.NAME_ONLY
    assert pick_importer(Path(other)).name == "xplane"
    # a gzip of something else is not claimed
    json_gz = tmp_path / "t.json.gz"
    json_gz.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    assert IMPORTER.can_open(json_gz) == Confidence.NO
    assert "*.xplane.pb.gz" in trace_file_filter()


def test_a_gzip_capture_loads_the_same_trace_as_the_plain_file(tmp_path):
    plain = tmp_path / "vm.xplane.pb"
    plain.write_bytes(gzip.decompress(GZ.read_bytes()))
    _same(load_trace(GZ, use_cache=False), load_trace(plain, use_cache=False))
    _same(load_trace(_gz(TW003, tmp_path / "tw003.xplane.pb.gz"), use_cache=False),
          load_trace(TW003, use_cache=False))


@pytest.mark.parametrize("level", ["logdir", "plugins", "profile", "run"])
def test_every_level_of_a_logdir_of_gzip_captures_opens_the_run(level):
    run = GZ.parent
    path = {"logdir": CASE, "plugins": CASE / "plugins", "profile": run.parent,
            "run": run}[level]
    assert pick_importer(path).name == "xplane"
    t = load_trace(path, use_cache=False)
    assert t.meta.extra["profile_run"] == {"folder": str(run), "hosts": ["vm"],
                                           "other_runs": []}
    assert len(t.slices) == len(load_trace(GZ, use_cache=False).slices)


def test_hosts_plain_and_gzip_load_as_ranks_and_a_kept_original_loads_once(tmp_path):
    run = tmp_path / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(GZ, run / "hostA.xplane.pb.gz")
    shutil.copy(TW003, run / "hostB.xplane.pb")
    t = load_trace(tmp_path / "logdir", use_cache=False)
    assert t.meta.extra["profile_run"]["hosts"] == ["hostA", "hostB"]
    assert t.meta.world_size == 2
    # `gzip -k` leaves both files of one host: the host is read once, from the plain file
    _gz(TW003, run / "hostB.xplane.pb.gz")
    t2 = load_trace(tmp_path / "logdir", use_cache=False)
    assert t2.meta.extra["profile_run"]["hosts"] == ["hostA", "hostB"]
    assert len(t2.slices) == len(t.slices)


def test_the_cache_keys_the_compressed_file(tmp_path):
    gz = shutil.copy(GZ, tmp_path / "vm.xplane.pb.gz")
    first = load_trace(gz)
    assert store.is_cached(Path(gz)) and first.cache_entry is not None
    again = load_trace(gz)
    assert again.cache_entry == first.cache_entry and len(again.slices) == len(first.slices)
    # other bytes under the same name: a new key, a fresh decode of the new content
    _gz(TW003, Path(gz))
    changed = load_trace(gz)
    assert changed.cache_entry != first.cache_entry
    assert len(changed.slices) == len(load_trace(TW003, use_cache=False).slices)


def test_cli_analyze_sql_and_stats_read_a_gzip_capture(capsys):
    assert main(["analyze", str(GZ), "--json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace"]["format"] == "xplane" and doc["trace"]["path"] == str(GZ)
    assert main(["sql", str(GZ), "SELECT count(*) AS n FROM slices", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == [[doc["trace"]["slices"]]]
    assert main(["analyze", str(CASE), "--json"]) == 0  # the logdir holding it
    assert json.loads(capsys.readouterr().out)["trace"]["slices"] == doc["trace"]["slices"]


def _one_line_error(capsys, path: Path) -> str:
    assert main(["analyze", str(path), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert str(path) in err
    return err


def test_truncated_gzip_captures_are_one_line_naming_the_file(tmp_path, capsys):
    raw = GZ.read_bytes()
    for cut in (len(raw) - 4, len(raw) // 2, 100):
        p = tmp_path / f"cut{cut}.xplane.pb.gz"
        p.write_bytes(raw[:cut])
        assert "truncated gzip file" in _one_line_error(capsys, p)
        with pytest.raises(TraceFormatError, match="truncated gzip"):
            load_trace(p, use_cache=False)


def test_a_gz_that_is_not_gzip_or_corrupt_gzip_is_one_line(tmp_path, capsys):
    p = tmp_path / "vm.xplane.pb.gz"
    p.write_bytes(b"this is not gzip data, only named so\n" * 10)
    assert "not gzip data" in _one_line_error(capsys, p)
    p.write_bytes(b"\x1f\x8b" + b"\x00" * 200)  # gzip's magic, then no valid header
    assert "corrupt gzip data" in _one_line_error(capsys, p)
    flipped = bytearray(GZ.read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF
    p.write_bytes(bytes(flipped))
    err = _one_line_error(capsys, p)
    assert "corrupt gzip data" in err or "XSpace" in err
    # a plain capture under a .gz name is read for what it is
    shutil.copy(TW003, p)
    assert len(load_trace(p, use_cache=False).slices) == \
        len(load_trace(TW003, use_cache=False).slices)


def test_a_gzip_bomb_stops_at_the_decompression_limit(tmp_path, monkeypatch, capsys):
    # a plausible XSpace head (one 8 MiB plane) then zeros: 8 MiB from ~8 KB of gzip
    body = b"\x0a" + bytes([0x80, 0x80, 0x80, 0x04]) + bytes(8 << 20)
    p = tmp_path / "bomb.xplane.pb.gz"
    p.write_bytes(gzip.compress(body, compresslevel=9))
    assert p.stat().st_size < 20_000
    assert pick_importer(p).name == "xplane"
    monkeypatch.setenv("SOFA_GUI_MAX_DECOMPRESSED_BYTES", str(4 << 20))
    err = _one_line_error(capsys, p)
    assert "decompresses to more than 4 MiB" in err and "SOFA_GUI_MAX_DECOMPRESSED_BYTES" in err
    monkeypatch.setenv("SOFA_GUI_MAX_DECOMPRESSED_BYTES", str(16 << 20))
    with pytest.raises(TraceFormatError) as exc:  # past the limit it is read, and refused
        load_trace(p, use_cache=False)                # as what it is: no XSpace inside
    assert "decompresses" not in exc.value.reason


def test_a_gzip_capture_is_held_once_in_memory_while_it_is_read(tmp_path, monkeypatch):
    """The decompressed blocks go into one buffer handed back as it is: reading 16 MiB in
    1 MiB blocks peaks near the payload and one block, where keeping the blocks and
    joining them held it twice."""
    monkeypatch.setattr(opening, "_BLOCK", 1 << 20)
    body = bytes(range(256)) * (16 << 12)  # 16 MiB
    p = tmp_path / "big.xplane.pb.gz"
    p.write_bytes(gzip.compress(body, compresslevel=1))
    tracemalloc.start()
    try:
        got = opening.read_whole(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert type(got) is bytes and got == body
    assert peak < 1.5 * len(body)
    plain = tmp_path / "plain.xplane.pb"
    plain.write_bytes(body[:1000])
    assert opening.read_whole(plain) == body[:1000]
