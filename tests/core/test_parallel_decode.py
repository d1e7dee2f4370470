"""Parallel decode of plain Chrome/Kineto JSON gives the serial read's trace, or falls back.

Every JSON trace of the analysis-cache list is decompressed to a plain file and read
serially and in 2-4 parts (small pieces, so even small files have cuts); the trace and
the ``analyze --json`` document must be identical. Crafted files put ``},{`` inside
strings and inside args' arrays of objects: every cut that is not between two events
must fail the part that ends there (the correctness argument of :mod:`.parallel`), and
such a file still loads to the serial read's trace.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest
from test_analysis_cache import AUTO, _cli_doc, _traces
from test_store import assert_same_trace

from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace
from sofa_gui.core.importers.chrome import decode, parallel

LOGGER = "sofa_gui.core.importers.chrome.parallel"


def _json_traces() -> list[Path]:
    out = []
    for p in _traces():
        if p.is_dir():
            out += sorted(p.glob("*.json.gz")) + sorted(p.glob("*.json"))
        elif p.name.endswith((".json.gz", ".json")):
            out.append(p)
    return out


def _plain(src: Path, dst_dir: Path) -> Path:
    dst = dst_dir / src.name.removesuffix(".gz")
    opener = gzip.open if src.name.endswith(".gz") else open
    with opener(src, "rb") as f:
        dst.write_bytes(f.read())
    return dst


def _load(path: Path, parts: int, monkeypatch, caplog):
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", str(parts))
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        trace = load_trace(path, use_cache=False)
    parallel_used = any("decoded in" in r.getMessage() for r in caplog.records)
    return trace, parallel_used


@pytest.fixture
def small_pieces(monkeypatch):
    """16 KiB pieces: cut points even in small test traces."""
    monkeypatch.setattr(decode, "CHUNK", 16 << 10)


@pytest.mark.parametrize(("src", "parts"), [(p, 2 + i % 3) for i, p in enumerate(_json_traces())],
                         ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_parallel_equals_serial_on_every_json_trace(src, parts, tmp_path, monkeypatch, caplog,
                                                    small_pieces):
    """2, 3 or 4 parts in turn; the trace and the analysis as the serial read's."""
    path = _plain(src, tmp_path)
    serial, used = _load(path, 1, monkeypatch, caplog)
    assert not used
    par, used = _load(path, parts, monkeypatch, caplog)
    if path.stat().st_size > 4 * parts * decode.CHUNK:
        assert used, f"{parts} parts: fell back to the serial read"
    assert_same_trace(serial, par)
    assert _cli_doc(par, analyze(par, AUTO)) == _cli_doc(serial, analyze(serial, AUTO))


def test_a_pool_that_cannot_start_means_a_serial_read(tmp_path, monkeypatch, caplog,
                                                     small_pieces):
    class NoPool:
        def __init__(self, *a, **k):
            raise OSError("no processes here")

    path = _plain(_json_traces()[0], tmp_path)
    serial, _ = _load(path, 1, monkeypatch, caplog)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", NoPool)
    par, used = _load(path, 3, monkeypatch, caplog)
    assert not used
    assert_same_trace(serial, par)


def test_default_threshold_keeps_small_files_serial(monkeypatch):
    monkeypatch.delenv("SOFA_GUI_DECODE_PARTS", raising=False)
    monkeypatch.delenv("SOFA_GUI_PARALLEL_MIN_BYTES", raising=False)
    assert parallel.decode_parts(parallel.PARALLEL_MIN_BYTES - 1) == 1
    monkeypatch.setenv("SOFA_GUI_PARALLEL_MIN_BYTES", "0")
    assert parallel.decode_parts(10) >= 1


# -- crafted files --------------------------------------------------------------------------
def _tricky_events(n: int) -> list[dict]:
    """X events whose args hold ``},{`` in strings and arrays of objects, nested."""
    out = []
    for i in range(n):
        args = {"shapes": [{"a": [i, {"b": i}]}, {"c": "x},{y"}, {"d": []}],
                "note": "},{" * (i % 3 + 1), "plain": i}
        if i % 7 == 0:
            args["nested"] = {"k": [{"m": [{"n": "},{\"ph\":\"X\"}"}]}, {}]}
        out.append({"ph": "X", "name": f"op{i % 11} }},{{", "cat": "cpu_op", "pid": 1,
                    "tid": i % 3, "ts": 1000 + 10 * i, "dur": 5, "args": args})
    return out


def _write(path: Path, events: list[dict], form: str = "object", indent=None) -> Path:
    doc = {"traceEvents": events, "displayTimeUnit": "ms"} if form == "object" else events
    path.write_text(json.dumps(doc, indent=indent))
    return path


@pytest.mark.parametrize("form", ["object", "array"])
def test_every_wrong_cut_fails_the_part_that_ends_there(tmp_path, form):
    """The induction step of the correctness argument, for every ``},{`` in the file."""
    events = _tricky_events(16)
    path = _write(tmp_path / "tricky.json", events, form)
    text = path.read_bytes()
    opening, closing = (b'{"traceEvents":[', b"]}") if form == "object" else (b"[", b"]")
    first = text.index(b"{", 1 if form == "object" else 0)
    first = text.index(b'{"ph"', first)
    # true boundaries: where the serial dump puts ", " between two events
    true_ends = {first + len(json.dumps(events[:k])[1:-1]) for k in range(1, len(events))}
    seps = list(re.finditer(rb"\}\s*,\s*\{", text))
    assert len(seps) > 5 * len(true_ends)  # most candidates are wrong ones
    starts = [first, *sorted(m.end() - 1 for m in seps if m.start() + 1 in true_ends)[:2]]
    for start in starts:
        for m in seps:
            end = m.start() + 1
            if end <= start:
                continue
            if start == first:
                part = parallel.Part(b"", 0, end, closing, decode.CHUNK)
            else:
                part = parallel.Part(opening, start, end, closing, decode.CHUNK)
            spill = tmp_path / "spill.bin"
            if end in true_ends:
                got = parallel.read_part(str(path), part, str(spill))
                assert sum(c["n"] for c in got.data.chunks) == sum(
                    1 for e in text[start:end].split(b'{"ph": "X"')[1:])
            else:
                with pytest.raises(TraceFormatError):
                    parallel.read_part(str(path), part, str(spill))


@pytest.mark.parametrize("indent", [None, 1])
def test_cuts_inside_strings_and_args_fall_back_to_the_serial_trace(tmp_path, monkeypatch,
                                                                    caplog, indent):
    """Cuts land on ``},{`` inside strings and args arrays: the file still loads right."""
    monkeypatch.setattr(decode, "CHUNK", 2 << 10)
    path = _write(tmp_path / "tricky.json", _tricky_events(400), indent=indent)
    serial, _ = _load(path, 1, monkeypatch, caplog)
    assert len(serial.slices) == 400
    for parts in (2, 3, 4):
        monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", str(parts))
        cuts = parallel.plan(path, parts)
        text = path.read_bytes()
        inside = [c for c in cuts[1:] if not text[c.lo:].startswith(b'{"ph"')]
        assert inside, "the crafted file should put a cut inside an event"
        par, used = _load(path, parts, monkeypatch, caplog)
        assert not used
        assert_same_trace(serial, par)
        assert _cli_doc(par, analyze(par, AUTO)) == _cli_doc(serial, analyze(serial, AUTO))


def test_cut_inside_a_string_alone_falls_back(tmp_path, monkeypatch, caplog):
    """A 40 kB string dense with ``}, {`` in the middle of the file holds the cut."""
    monkeypatch.setattr(decode, "CHUNK", 1 << 10)
    events = [{"ph": "X", "name": f"op{i}", "cat": "cpu_op", "pid": 1, "tid": 1,
               "ts": 10 * i, "dur": 5, "args": {"i": i}} for i in range(400)]
    events[200]["args"] = {"s": "a}, {b" * 6000}
    path = _write(tmp_path / "t.json", events)
    text = path.read_bytes()
    cut = parallel.plan(path, 2)[1].lo
    assert text.rfind(b'"s": "', 0, cut) > text.rfind(b'{"ph"', 0, cut)  # inside the string
    serial, _ = _load(path, 1, monkeypatch, caplog)
    par, used = _load(path, 2, monkeypatch, caplog)
    assert not used
    assert len(par.slices) == 400
    assert_same_trace(serial, par)


def test_gzip_stays_serial(small_pieces):
    src = _traces()[0]  # the bundled sample, gzip
    assert src.name.endswith(".gz") and parallel.plan(src, 2) is None


def test_cancel_while_parts_decode_stops_the_workers(tmp_path, monkeypatch, small_pieces):
    import multiprocessing

    from sofa_gui.core.importers.chrome.trace import IMPORTER
    from sofa_gui.core.progress import Cancelled

    class CancelSoon:
        calls = 0

        def update(self, fraction, message=""):
            self.check_cancelled()

        def check_cancelled(self):
            self.calls += 1
            if self.calls > 3:
                raise Cancelled()

    path = _plain(_json_traces()[0], tmp_path)
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "3")
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(Cancelled):
        IMPORTER.load(path, CancelSoon())
    assert multiprocessing.active_children() == []
    assert (tmp_path / "cache").is_dir()  # where the parts' args spill files were
    assert not list((tmp_path / "cache").glob("sofa-args-part-*"))
    assert not list((tmp_path / "cache").glob("sofa-columns-part-*"))


def test_cli_analyze_json_equal_serial_and_parallel(tmp_path):
    """The CLI as run (one thread, no Qt: fork workers, default piece size)."""
    import os
    import subprocess
    import sys

    path = _plain(_traces()[0], tmp_path)  # the bundled sample, ~4 pieces
    docs = []
    for parts in ("1", "2"):
        env = {**os.environ, "SOFA_GUI_DECODE_PARTS": parts,
               "SOFA_GUI_CACHE_DIR": str(tmp_path / "cache")}
        out = subprocess.run([sys.executable, "-m", "sofa_gui", "-v", "analyze", str(path),
                              "--json", "--no-cache"], capture_output=True, text=True, env=env,
                             timeout=600, check=True)
        docs.append(json.loads(out.stdout))
        assert ("decoded in 2 parts" in out.stderr) == (parts == "2")
    assert docs[0] == docs[1]


_POOL_SCRIPT = """
import os, sys, time
from concurrent.futures import ProcessPoolExecutor
from sofa_gui.core.importers.chrome.parallel import die_with_parent

def work():
    return os.getpid()

def sleep():
    time.sleep(120)

if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, initializer=die_with_parent, initargs=(os.getpid(),))
    print(pool.submit(work).result(), flush=True)
    pool.submit(sleep)
    time.sleep(120)
"""


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="Linux only")
def test_pool_workers_die_with_the_process_that_started_them(tmp_path):
    """The app's loader child is killed on cancel and exit: its decode workers must not
    be left running (they were seen still alive 10 minutes later)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "pool.py"
    script.write_text(_POOL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env,
                            text=True)
    worker = int(proc.stdout.readline())
    assert Path(f"/proc/{worker}").exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{worker}/stat").read_text() if Path(f"/proc/{worker}").exists() \
            else ""
        if ") Z " in stat:
            break  # dead, waiting for its new parent to reap it
        time.sleep(0.1)
    alive = Path(f"/proc/{worker}").exists() and ") Z " not in Path(
        f"/proc/{worker}/stat").read_text()
    assert not alive


def test_the_app_loader_child_decodes_in_parts(tmp_path, monkeypatch):
    """The app's loader (a daemonic child) may start the decode pool: its progress says
    so and the trace equals the serial read."""
    from sofa_gui.app.background_load import ChildLoad
    from sofa_gui.core import store

    class State:
        messages: list = []
        cancelled = False

        def update(self, fraction, message=""):
            self.messages.append(message)

        def check_cancelled(self):
            pass

        def on_cancel(self, fn):
            pass

    path = _plain(_traces()[0], tmp_path)  # the bundled sample: ~4 default pieces
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "2")
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    state = State()
    job = ChildLoad(path, state)
    try:
        assert job.wait_trace() is True
    finally:
        job.stop()
    assert any(m.endswith("on 2 cores") for m in state.messages), state.messages[-5:]
    trace = store.load_cached(path)
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "1")
    assert_same_trace(trace, load_trace(path, use_cache=False))


@pytest.mark.parametrize("parts", [2, 3, 8])
def test_part_zero_takes_the_lead_share(parts):
    """The calling process's part 0 is LEAD_SHARE times the others (a worker's part also
    pays for sending its columns back); the other parts are equal."""
    cuts = [(b - 1, b) for b in range(100, 100_000, 100)]
    chosen = parallel._choose(cuts, 0, 100_000, parts)
    bounds = [0, *(lo for lo, _ in chosen), 100_000]
    sizes = np.diff(bounds)
    assert len(sizes) == parts
    assert abs(sizes[0] / sizes[1:].mean() - parallel.LEAD_SHARE) < 0.02
    assert sizes[1:].max() - sizes[1:].min() <= 200


@pytest.mark.parametrize("parts", [2, 3])
def test_part_zero_gives_way_to_the_callers_idle_work(parts):
    """With idle work waiting (the CLI's analysis imports), part 0 is LEAD_SHARE times
    the others less ``lead_less`` bytes, the others equal; it keeps at least half of
    what it has without idle work."""
    cuts = [(b - 1, b) for b in range(100, 1_000_000, 100)]
    plain = np.diff([0, *(lo for lo, _ in parallel._choose(cuts, 0, 1_000_000, parts)),
                     1_000_000])
    sizes = np.diff([0, *(lo for lo, _ in parallel._choose(cuts, 0, 1_000_000, parts,
                                                           lead_less=60_000)), 1_000_000])
    assert sizes[0] < plain[0] - 20_000
    assert sizes[1:].max() - sizes[1:].min() <= 200
    assert abs(sizes[0] + 60_000 - parallel.LEAD_SHARE * sizes[1:].mean()) <= 400
    capped = np.diff([0, *(lo for lo, _ in parallel._choose(cuts, 0, 1_000_000, parts,
                                                            lead_less=10**9)), 1_000_000])
    assert abs(capped[0] - plain[0] / 2) <= 200


def test_the_plan_leaves_room_for_idle_work(tmp_path, monkeypatch, caplog, small_pieces):
    from sofa_gui.core.idle_work import while_idle

    asked = []
    real_plan = parallel.plan

    def spy(path, parts, lead_less=0):
        asked.append(lead_less)
        return real_plan(path, parts, lead_less)

    monkeypatch.setattr(parallel, "plan", spy)
    path = _plain(_json_traces()[0], tmp_path)
    _load(path, 2, monkeypatch, caplog)
    with while_idle(lambda: None):
        _load(path, 2, monkeypatch, caplog)
    assert asked == [0, parallel.IDLE_WORK_BYTES]


def _arrays_of(data) -> list:
    return [*(v for d in (*data.chunks, *data.flows) for v in d.values()),
            *(v for m in data.memory for v in m)]


def test_a_parts_columns_come_back_through_a_file(tmp_path):
    """What the pool pickles holds no column array (a few kB instead of ~50 bytes per
    event); the arrays read back equal the part's own, dtype and shape included, and
    can be written to (the merge re-codes some in place)."""
    import pickle  # what the pool does with a part's result

    path = _plain(_traces()[0], tmp_path)  # the bundled sample, ~4 default pieces
    part = parallel.plan(path, 2)[1]
    kept = parallel.read_part(str(path), part, str(tmp_path / "a.bin"))
    sent = parallel.read_part(str(path), part, str(tmp_path / "b.bin"), False,
                              str(tmp_path / "cols.bin"))
    assert not any(isinstance(v, np.ndarray) for v in _arrays_of(sent.data))
    assert len(pickle.dumps(sent)) < len(pickle.dumps(kept)) / 10
    parallel.unship(sent.data, str(tmp_path / "cols.bin"))
    (tmp_path / "cols.bin").unlink()  # the mapping outlives the file
    mine, back = _arrays_of(kept.data), _arrays_of(sent.data)
    assert len(mine) == len(back) > 10
    for a, b in zip(mine, back):
        assert type(a) is type(b)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            assert b.flags.writeable
        else:
            assert a == b
