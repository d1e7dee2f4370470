"""An XPlane string many events carry is stored once, not per event.

Memory is tracemalloc's peak per input byte while loading in this process (files
under 4 MiB load inside the app's own process, so the bound must hold there).
"""

from __future__ import annotations

import json
import tracemalloc

import pytest
from attacks import xplane_shared_stats

from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import SHARED, SHARED_TEXT, ArgsStore

BIG = 1 << 20


@pytest.fixture(autouse=True)
def _imports_done(tmp_path_factory):
    """Load a tiny file first, so lazily imported modules do not count as peak memory."""
    load_trace(xplane_shared_stats(tmp_path_factory.mktemp("warm"), 10, 2), use_cache=False)


@pytest.mark.parametrize("how", ["metadata", "ref"])
def test_a_string_every_event_carries_is_stored_once(tmp_path, how):
    path = xplane_shared_stats(tmp_path, BIG, 300, how)
    size = path.stat().st_size
    assert size < 2 * BIG
    tracemalloc.start()
    try:
        trace = load_trace(path, use_cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert trace.events == 300
    # main: one copy per event (300 MiB for this 1 MiB file, 1.3 GB in the issue)
    assert peak < 8 * size, f"{peak / size:.0f} bytes allocated per input byte"
    stored = sum(len(trace.args.raw(i)) for i in range(len(trace.args)))
    assert stored < 2 * size
    # the details still show the whole value, for every event
    for i in (0, 150, 299):
        args = trace.args.get(int(trace.slices.args[i]))
        assert args == {"big": "x" * BIG}


def test_shared_rows_survive_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    path = xplane_shared_stats(tmp_path, 100, 4, "ref")
    first = load_trace(path, use_cache=True)
    again = load_trace(path, use_cache=True)
    assert again.cache_entry is not None
    for t in (first, again):
        assert t.args.get(int(t.slices.args[3])) == {"big": "x" * 100}


def test_args_store_resolves_one_level_and_tolerates_bad_refs():
    rows = [json.dumps(r).encode() for r in (
        {"a": 1, "b": 2},                                     # 0: shared dict
        {SHARED_TEXT: "long text"},                           # 1: shared text
        {SHARED: [0], "b": 3, "t": {SHARED: 1}},              # 2: own b wins
        {SHARED: [2, 99, -1, "x"], "t": {SHARED: 7}},         # 3: nested/bad refs
        {SHARED: 5},                                          # 4: not a list
    )]
    store = ArgsStore(rows)
    assert store.get(2) == {"a": 1, "b": 3, "t": "long text"}
    # row 2's own refs are not followed from row 3 (one level); bad ids give nothing
    assert store.get(3) == {"b": 3, "t": ""}
    assert store.get(4) == {}
