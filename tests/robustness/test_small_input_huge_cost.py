"""Small JSON inputs built to cost far more (deep nesting, nested args, huge counts).

Memory is measured with tracemalloc as peak bytes allocated per decompressed input
byte; the bounds are what the streaming reader needs (a few 4 MiB blocks), far
below the input size.
"""

from __future__ import annotations

import tracemalloc

import pytest
from attacks import ONE_EVENT, gzip_stream, huge_header_value, nested_args, trailing_blank_gzip
from hostile import assert_one_line_error, run_cli

from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace

BLANK = 64 << 20  # decompressed blank bytes; the gzip files are ~64 KB


@pytest.fixture(autouse=True)
def _imports_done(tmp_path_factory):
    """Load a tiny trace first, so lazily imported modules do not count as peak memory."""
    load_trace(trailing_blank_gzip(tmp_path_factory.mktemp("warm"), 10, "after"),
               use_cache=False)


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("where", ["after", "before"])
def test_blank_space_outside_the_events_streams_by(tmp_path, where):
    # A 64 KB gzip holding one event and 64 MiB of blanks after the document (or
    # between header keys): the reader kept all of it (then copied it twice).
    path = trailing_blank_gzip(tmp_path, BLANK, where)
    assert path.stat().st_size < 200_000
    trace, peak = _peak(lambda: load_trace(path, use_cache=False))
    assert trace.events == 1
    # a few 4 MiB read blocks, whatever the blank size (main: 2-3x the blank size)
    assert peak < 32 << 20, f"{peak / 2**20:.0f} MiB peak for {BLANK >> 20} MiB of blanks"


@pytest.mark.parametrize("after", [False, True])
def test_huge_header_value_is_refused_in_one_line_not_held(tmp_path, after):
    path = huge_header_value(tmp_path, 100 << 20, after=after)
    with pytest.raises(TraceFormatError, match="larger than 32 MiB") as exc:
        _, peak = _peak(lambda: load_trace(path, use_cache=False))
    assert "\n" not in exc.value.reason


def test_header_value_bound_holds_memory(tmp_path):
    path = huge_header_value(tmp_path, 100 << 20)

    def load():
        try:
            load_trace(path, use_cache=False)
        except TraceFormatError:
            pass

    _, peak = _peak(load)
    assert peak < 200 << 20, f"{peak / 2**20:.0f} MiB peak for a 100 MiB header value"


def test_decompression_beyond_the_limit_is_a_clear_error(tmp_path):
    path = trailing_blank_gzip(tmp_path, 8 << 20, "after")
    proc = run_cli(["analyze", "--no-cache", str(path)],
                   env={"SOFA_GUI_MAX_DECOMPRESSED_BYTES": str(4 << 20)})
    err = assert_one_line_error(proc, 2)
    assert "decompresses to more than 4 MiB" in err and "SOFA_GUI_MAX_DECOMPRESSED_BYTES" in err
    ok = run_cli(["analyze", "--no-cache", str(path)],
                 env={"SOFA_GUI_MAX_DECOMPRESSED_BYTES": str(16 << 20)})
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("depth", [990, 5_000, 100_000])
def test_one_event_with_args_nested_deep_never_loses_the_file(tmp_path, depth):
    # How deep the decoders go is the interpreter's recursion limit (Python 3.11 stops
    # near 1,000 levels, 3.12 goes past 5,000): the deep event loads, or is skipped and
    # counted; the other 100 always load.
    trace = load_trace(nested_args(tmp_path, depth, events=100), use_cache=False)
    skipped = trace.meta.load_stats.skipped
    assert trace.events >= 100 and trace.events + skipped["args nested too deep"] == 101
    assert set(skipped) <= {"args nested too deep"}
    if depth == 100_000:  # deeper than any interpreter decodes
        assert skipped == {"args nested too deep": 1}


def test_deep_args_are_never_decoded_into_a_crash(tmp_path):
    from sofa_gui.core.trace import ArgsStore

    store = ArgsStore([b'{"x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"])
    assert store.get(0) == {}



_BETWEEN = {  # where the blanks go, and how many events the file holds
    "after the comma": ([b",", None, b"E", b"]}"], 2),
    "before the comma": ([None, b",", b"E", b"]}"], 2),
    "before the closing bracket": ([None, b"]}"], 1),
}


@pytest.mark.parametrize("where", list(_BETWEEN))
def test_blank_space_between_events_streams_by(tmp_path, where):
    # main held blanks between events in one piece (buffer, joined copy, decode):
    # 200 MB of them -> 737 MB RSS. Bound: the events around the blanks plus a few
    # 4 MiB read blocks, whatever the blank size.
    layout, events = _BETWEEN[where]
    parts = [b'{"traceEvents": [', ONE_EVENT] + [
        (b" ", BLANK) if p is None else ONE_EVENT if p == b"E" else p for p in layout]
    path = gzip_stream(tmp_path / "blank-between.json.gz", parts)
    trace, peak = _peak(lambda: load_trace(path, use_cache=False))
    assert trace.events == events
    assert peak < 32 << 20, f"{peak / 2**20:.0f} MiB peak for {BLANK >> 20} MiB of blanks"


def test_blank_space_inside_a_string_is_kept(tmp_path):
    # a name holding '},' then megabytes of blanks is text, not a place to cut
    name = b'{"ph": "X", "name": "a},' + b" " * (3 << 20) + b'b}", "ts": 5, "dur": 1}'
    path = gzip_stream(tmp_path / "blank-string.json.gz",
                        [b'{"traceEvents": [', ONE_EVENT, b",", name, b",", ONE_EVENT, b"]}"])
    trace = load_trace(path, use_cache=False)
    assert trace.events == 3
    assert any(len(trace.full_name(i)) == (3 << 20) + 5 for i in range(3))
