"""A name of megabytes is cut for display and matching, kept whole once.

Kept whole everywhere, a 20 MB slice name takes 8 s to analyze, 200 MB over 115 s, and
freezes the app (Qt lays out the whole text, role regexes scan it, every report repeats
it).
"""

from __future__ import annotations

from attacks import huge_name
from hostile import run_cli

from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.builder import TraceBuilder, cut_name
from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import MAX_NAME_CHARS

SIZE = 4 << 20


def _the_name() -> str:
    return ("ncclKernel_AllReduce " + "ab" * SIZE)[:SIZE]


def test_huge_name_is_cut_in_the_string_table_and_kept_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    path = huge_name(tmp_path, SIZE, 4)
    for trace in (load_trace(path, use_cache=True), load_trace(path, use_cache=True)):
        assert max(map(len, trace.names)) <= MAX_NAME_CHARS  # main: 4 MiB
        big = [i for i in range(len(trace.slices)) if trace.name_of(i) != "aten::mm"]
        assert len(big) == 2
        assert f"[{SIZE:,} characters, crc " in trace.name_of(big[0])
        assert trace.full_name(big[0]) == trace.full_name(big[1]) == _the_name()
        assert trace.full_name(big[0] + 1) == "aten::mm"
    assert trace.cache_entry is not None  # the second one came from the cache
    # what analysis reads is the cut name (its regexes no longer scan megabytes)
    result = analyze(trace)
    assert result is not None


def test_reports_carry_the_cut_name_only(tmp_path):
    path = huge_name(tmp_path, SIZE, 4)
    proc = run_cli(["analyze", "--json", "--no-cache", str(path)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stdout) < 200_000  # main: the name, several times (> 8 MB)


def test_cut_names_stay_distinct_and_are_never_cut_twice():
    b = TraceBuilder()
    a, c = "x" * 10_000, "x" * 9_999 + "y"
    ia, ic = b.intern(a), b.intern(c)
    assert ia != ic and b.name_text(ia) != b.name_text(ic)
    assert b.intern(a) == ia
    assert b.intern(b.name_text(ia)) not in (ia, ic)  # the cut text is a name of its own...
    assert len(b.name_text(b.intern(b.name_text(ia)))) <= MAX_NAME_CHARS  # ...not cut again
    assert b.name_text(ia) == cut_name(a)
    trace = b.finish()
    assert len(trace.names) == 3
