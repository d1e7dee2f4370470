"""A corrupt cache entry is dropped and re-imported, never trusted.

Flipped bytes in the cached Arrow files would give wrong results, or an IndexError on
every later open, so every byte of the tables is checksummed (args: structure).
"""

from __future__ import annotations

import json
import logging
import random
import shutil

import numpy as np
import pytest
from tracedata import DATA

from sofa_gui.core import store
from sofa_gui.core.importers import load_trace
from sofa_gui.core.summary import trace_dict

MINITOY = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
FILES = ("slices.arrow", "lanes.arrow", "names.arrow", "counters.arrow", "series.arrow",
         "flows.arrow", "args.arrow")


@pytest.fixture
def cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / MINITOY.name
    shutil.copy(MINITOY, src)
    reference = load_trace(src, use_cache=True)
    return src, reference, store.entry_dir(src)


def _same(a, b) -> bool:
    cols = ("start", "dur", "lane", "name", "kind", "depth", "args")
    return (all(np.array_equal(getattr(a.slices, c), getattr(b.slices, c)) for c in cols)
            and a.names == b.names and a.lanes.name == b.lanes.name
            and np.array_equal(a.counters.value, b.counters.value)
            and np.array_equal(a.flows.src, b.flows.src)
            and json.dumps(trace_dict(a), default=str) == json.dumps(trace_dict(b), default=str))


def _flip(path, rng: random.Random, n: int) -> None:
    data = bytearray(path.read_bytes())
    for _ in range(n):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", FILES)
def test_flipped_bytes_are_detected_and_the_entry_rebuilt(cached, name, caplog):
    src, reference, entry = cached
    rng = random.Random(name)
    for case in range(6):
        backup = (entry / name).read_bytes()
        _flip(entry / name, rng, 1 + case)
        with caplog.at_level(logging.WARNING):
            again = load_trace(src, use_cache=True)
        # either the damage is caught (dropped, re-imported, one warning line)...
        if any("dropping unreadable cache entry" in r.getMessage() for r in caplog.records):
            assert all("\n" not in r.getMessage() for r in caplog.records)
            assert store.is_cached(src)  # rebuilt
        # ...or (args data bytes only) it touches no column the results depend on
        assert _same(again, reference) or name == "args.arrow", (name, case)
        if name == "args.arrow":
            for i in range(len(again.args)):
                again.args.get(i)  # never raises, never reads out of bounds
        caplog.clear()
        if (entry / name).read_bytes() != backup:
            (entry / name).write_bytes(backup)


@pytest.mark.parametrize("block", [None, 256], ids=["one block", "256-byte blocks"])
def test_every_table_flip_is_caught(cached, caplog, monkeypatch, block):
    # with small blocks every file has many CRCs (as a 1e7-event entry has), checked in
    # threads: a flip in any of them is caught
    if block:
        monkeypatch.setattr(store, "CRC_BLOCK", block)
    src, reference, entry = cached
    store.save_cached(src, reference, entry)
    rng = random.Random(7)
    caught = 0
    for name in FILES[:-1]:
        for _ in range(4):
            store.save_cached(src, reference, entry)
            _flip(entry / name, rng, 1)
            with caplog.at_level(logging.WARNING):
                assert _same(load_trace(src, use_cache=True), reference)
            caught += any("corrupt" in r.getMessage() for r in caplog.records)
            caplog.clear()
    assert caught == 4 * (len(FILES) - 1)


def test_truncated_or_missing_files_are_dropped(cached):
    src, reference, entry = cached
    (entry / "slices.arrow").write_bytes((entry / "slices.arrow").read_bytes()[:100])
    assert _same(load_trace(src, use_cache=True), reference)
    (store.entry_dir(src) / "names.arrow").unlink()
    assert _same(load_trace(src, use_cache=True), reference)
