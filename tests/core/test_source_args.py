"""Args read on demand from a plain JSON file (importers/source_args.py).

A large plain file's event args are not copied at open: each slice remembers its
piece's byte range and item number and the args are decoded from the file when
asked for. Every JSON test trace, read that way (serially and in parts), must give
every slice the args the spilling read gives it, the same ``analyze --json``
document, and a cache entry that reads back the same; a file changed or removed
after the open must give a clear message instead of another file's args.
"""

from __future__ import annotations

import json
import os

import pytest
from test_analysis_cache import AUTO, cli_doc
from test_parallel_decode import json_traces, load_in_parts, plain_copy
from test_store import assert_same_trace

from sofa_gui.core import store
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace
from sofa_gui.core.importers.chrome import decode
from sofa_gui.core.trace import ARGS_UNAVAILABLE, ArgSegments


@pytest.fixture
def lazy(monkeypatch):
    """Every plain file reads its args on demand; 16 KiB pieces (many per file)."""
    monkeypatch.setenv("SOFA_GUI_LAZY_ARGS_MIN_BYTES", "0")
    monkeypatch.setattr(decode, "CHUNK", 16 << 10)


def _spilled(path, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_LAZY_ARGS_MIN_BYTES", str(1 << 50))
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "1")
    trace = load_trace(path, use_cache=False)
    monkeypatch.setenv("SOFA_GUI_LAZY_ARGS_MIN_BYTES", "0")
    return trace


def _same_args(a, b) -> None:
    """The same trace, args rows included (an event without args has none either way),
    and the same args for every slice."""
    assert_same_trace(a, b)
    assert [a.args.get(int(r)) for r in a.slices.args] == [
        b.args.get(int(r)) for r in b.slices.args]


@pytest.mark.parametrize("src", json_traces(), ids=lambda p: p.name)
def test_args_on_demand_equal_the_spilled_args(src, tmp_path, monkeypatch, caplog, lazy):
    path = plain_copy(src, tmp_path)
    spilled = _spilled(path, monkeypatch)
    serial, _ = load_in_parts(path, 1, monkeypatch, caplog)
    par, used = load_in_parts(path, 2, monkeypatch, caplog)
    if len(serial.slices):
        assert isinstance(serial.args.backing, ArgSegments), "args were not read on demand"
    if path.stat().st_size > 8 * decode.CHUNK:
        assert used, "2 parts: fell back to the serial read"
    _same_args(spilled, serial)
    _same_args(serial, par)
    doc = cli_doc(spilled, analyze(spilled, AUTO))
    assert cli_doc(serial, analyze(serial, AUTO)) == doc
    assert cli_doc(par, analyze(par, AUTO)) == doc


def _sample(tmp_path):
    src = next(p for p in json_traces() if p.name.startswith("resnet50"))
    return plain_copy(src, tmp_path)


def test_cache_round_trip_of_args_read_on_demand(tmp_path, monkeypatch, lazy):
    """A trace read without the cache writes args.arrow from the file when it is saved."""
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "2")
    path = _sample(tmp_path)
    cold = load_trace(path, use_cache=False)
    assert isinstance(cold.args.backing, ArgSegments)
    assert store.save_cached(path, cold) is not None
    cached = load_trace(path)
    assert not isinstance(cached.args.backing, ArgSegments)  # read from args.arrow
    assert_same_trace(cold, cached)
    assert cli_doc(cached, analyze(cached, AUTO)) == cli_doc(cold, analyze(cold, AUTO))


def test_an_open_that_writes_the_cache_spills_the_args(tmp_path, monkeypatch, lazy):
    """The cache needs every args row: they are copied while decoding (the spill), which
    costs less than reading the file again for them; --no-cache leaves them in the file."""
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    path = _sample(tmp_path)
    spilled = load_trace(path)
    assert spilled.cache_entry is not None
    assert not isinstance(spilled.args.backing, ArgSegments)
    lazy_read = load_trace(path, use_cache=False)
    assert isinstance(lazy_read.args.backing, ArgSegments)
    _same_args(spilled, lazy_read)


def _with_args(trace) -> list[int]:
    """Slices whose args are not empty, spread over the file."""
    rows = [i for i in range(0, len(trace.slices), max(len(trace.slices) // 50, 1))
            if trace.args.get(int(trace.slices.args[i]))]
    assert rows
    return rows


@pytest.mark.parametrize("change", ["modified", "removed", "truncated"])
def test_a_file_changed_after_open_gives_a_clear_message(tmp_path, monkeypatch, lazy, change):
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "1")
    path = _sample(tmp_path)
    trace = load_trace(path, use_cache=False)
    rows = _with_args(trace)
    trace.args.backing.segments[0].source._pieces.clear()  # nothing kept from the open
    if change == "removed":
        path.unlink()
    elif change == "truncated":
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    else:
        text = path.read_bytes()
        path.write_bytes(text.replace(b'"args"', b'"argz"'))
        os.utime(path, ns=(1, 1))
    got = trace.args.get(int(trace.slices.args[rows[-1]]))
    assert list(got) == [ARGS_UNAVAILABLE]
    assert path.name in got[ARGS_UNAVAILABLE] and "reopen" in got[ARGS_UNAVAILABLE]
    assert f"was {change}" in got[ARGS_UNAVAILABLE] or change == "truncated"
    # the cache writer refuses (one warning), leaving no entry behind
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    assert store.save_cached(tmp_path / "x.json", trace) is None
    assert not [p for p in (tmp_path / "cache").rglob("manifest.json")]


def test_same_size_rewrite_in_place_is_noticed(tmp_path, monkeypatch, lazy):
    """Rewritten with the same size and mtime (e.g. by a copy tool): the item count of
    the piece or the inode must still tell; here the events are moved within the file."""
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "1")
    path = _sample(tmp_path)
    trace = load_trace(path, use_cache=False)
    rows = _with_args(trace)
    segs = trace.args.backing.segments
    segs[0].source._pieces.clear()
    st = path.stat()
    doc = json.loads(path.read_bytes())
    doc["traceEvents"] = doc["traceEvents"][::-1]
    text = json.dumps(doc, separators=(",", ":")).encode()
    path.write_bytes(text[:st.st_size].ljust(st.st_size))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    got = [trace.args.get(int(trace.slices.args[i])) for i in rows]
    assert all(list(g) == [ARGS_UNAVAILABLE] for g in got)
