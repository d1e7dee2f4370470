"""The Chrome reader's fast paths give the same trace as the general one.

Events whose first key is ``ph`` are decoded into one struct class per phase
(X and flow events in groups of their own); anything else takes the general
path. These tests write the same events both ways, and mix in what makes the
fast path give up part-way, and compare everything the trace holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.importers.chrome import decode as chrome_decode
from sofa_gui.core.importers.chrome.trace import IMPORTER
from sofa_gui.core.progress import NullProgress

EPOCH = 1712195495519695  # µs; with 3 decimals float64 misses the ns digit


class _Ts(float):
    """A ts written with exactly three decimals (``json.dumps`` would round it)."""

    def __new__(cls, micros: int, frac: int):
        obj = super().__new__(cls, micros + frac / 1000)
        obj.text = f"{micros}.{frac:03d}"
        return obj


def _events(base: int = 1000, n: int = 300) -> list[dict]:
    out = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
           {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}]
    for k in range(n):
        t = base + 10 * k

        def ts(d: int, frac: int = 125, t=t):
            return _Ts(t + d, frac)

        out += [
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 7}", "pid": 1, "tid": 2,
             "ts": ts(0), "dur": 6.5, "args": {"External id": k}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
             "ts": ts(1), "dur": 2.25, "args": {"correlation": k, "cbid": 211}},
            {"ph": "s", "id": k, "pid": 1, "tid": 2, "ts": ts(1), "cat": "ac2g",
             "name": "ac2g"},
            {"ph": "X", "cat": "kernel", "name": "gemm" if k % 3 else "ncclKernel_AllReduce",
             "pid": 0, "tid": 7, "ts": ts(4), "dur": 3.0,
             "args": {"device": 0, "stream": 7, "correlation": k, "grid": [1, 2, 3]}},
            {"ph": "f", "id": k, "pid": 0, "tid": 7, "ts": ts(4), "cat": "ac2g", "name": "ac2g",
             "bp": "e"},
        ]
        if k % 50 == 0:
            out += [
                {"ph": "i", "s": "g", "name": "mark", "pid": 1, "tid": 2, "ts": ts(2, 375)},
                {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": ts(2),
                 "args": {"Device Type": 1, "Device Id": 0, "Bytes": 64,
                          "Total Allocated": 64 * (k + 1)}},
                {"ph": "C", "name": "queue", "pid": 1, "tid": 2, "ts": ts(3),
                 "args": {"depth": k}},
                {"ph": "B", "name": "region", "pid": 1, "tid": 3, "ts": ts(0, 625)},
                {"ph": "E", "pid": 1, "tid": 3, "ts": ts(5)},
                {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
                 "pid": 0, "tid": 8, "ts": ts(6, 875), "dur": 1.0,
                 "args": {"device": 0, "stream": 8, "correlation": 10_000 + k, "bytes": 4096}},
                {"ph": "X", "name": "bad", "pid": 1, "tid": 2, "ts": ts(0)},  # no dur
                {"ph": "s", "pid": 1, "tid": 2, "ts": ts(0), "cat": "ac2g"},  # no id
                {"ph": "f", "id": 99_999, "pid": 1, "tid": 2, "cat": "ac2g"},  # no ts
            ]
    return out


def _text(events: list[dict], ph_first: bool) -> str:
    rows = []
    for e in events:
        e = dict(e)
        if not ph_first:  # same event, "ph" moved to the end
            e["ph"] = e.pop("ph")
        ts = e.get("ts")
        if isinstance(ts, _Ts):
            e["ts"] = "@ts@"
            rows.append(json.dumps(e).replace('"@ts@"', ts.text))
        else:
            rows.append(json.dumps(e))
    return '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(rows) + "\n]}"


def _canonical(t) -> dict:
    """Everything the trace holds, independent of lane and name id order."""
    disp = np.asarray(t.lanes.display_order())
    rank = np.empty(len(disp), np.int64)
    rank[disp] = np.arange(len(disp))
    s = t.slices
    rows = sorted(zip(s.start.tolist(), s.dur.tolist(), rank[s.lane].tolist(),
                      [t.names[i] for i in s.name.tolist()], s.kind.tolist(), s.depth.tolist(),
                      s.device.tolist(), s.stream.tolist(), s.bytes.tolist(),
                      s.copy_kind.tolist(), s.correlation.tolist(),
                      [json.dumps(t.args.get(int(a)), sort_keys=True) for a in s.args]))
    key = [(int(s.start[i]), int(rank[s.lane[i]]), t.name_of(i)) for i in range(len(s))]
    flows = sorted((key[a], key[b], k) for a, b, k in
                   zip(t.flows.src.tolist(), t.flows.dst.tolist(), t.flows.kind.tolist()))
    lanes = [(t.lanes.name[i], t.lanes.group[i], int(t.lanes.kind[i]), int(t.lanes.depth[i]))
             for i in disp.tolist()]
    c = t.counters
    counters = sorted(zip([c.table.name[i] for i in c.series.tolist()], c.time.tolist(),
                          c.value.tolist()))
    report = t.meta.load_stats
    return {"slices": rows, "flows": flows, "lanes": lanes, "counters": counters,
            "read": report.read, "loaded": report.loaded, "skipped": dict(report.skipped)}


def _load(tmp_path: Path, text: str, name: str):
    p = tmp_path / name
    p.write_text(text)
    return IMPORTER.load(p, NullProgress())


@pytest.mark.parametrize("chunk", [700, 1 << 20])
def test_phase_first_events_load_like_any_other_key_order(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(chrome_decode, "CHUNK", chunk)
    events = _events()
    fast = _load(tmp_path, _text(events, True), "fast.json")
    general = _load(tmp_path, _text(events, False), "general.json")
    assert _canonical(fast) == _canonical(general)
    assert len(fast.slices) == 918 and len(fast.flows) >= 300
    assert fast.meta.load_stats.skipped["X event without dur"] == 6
    assert fast.meta.load_stats.skipped["flow event without id"] == 6
    assert fast.meta.load_stats.skipped["missing ts"] == 6


def test_fast_path_gives_up_part_way_without_changing_the_result(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_decode, "CHUNK", 2000)
    events = _events(n=200)
    events[600:600] = [{"ph": "O", "name": "snapshot", "pid": 1, "tid": 2, "ts": 5.0, "id": 1},
                       {"ph": "X", "cat": "my_own_category", "name": "custom", "pid": "worker",
                        "tid": 2, "ts": 6.0, "dur": 1.0}]
    fast = _load(tmp_path, _text(events, True), "fast.json")
    general = _load(tmp_path, _text(events, False), "general.json")
    assert _canonical(fast) == _canonical(general)
    assert fast.meta.load_stats.skipped["unsupported phase 'O'"] == 1
    assert "custom" in fast.names


def test_exact_ns_for_every_phase_group_in_one_piece(tmp_path):
    events = _events(base=EPOCH, n=60)
    fast = _load(tmp_path, _text(events, True), "fast.json")
    general = _load(tmp_path, _text(events, False), "general.json")
    assert _canonical(fast) == _canonical(general)
    starts = set(fast.slices.start.tolist())
    first = EPOCH * 1000 + 125  # ts 1712195495519695.125 µs
    # op, launch, kernel, instant, memcpy and B: all exact to the ns
    assert {first, first + 1000, first + 4000, first + 2250, first + 6750, first + 500} <= starts


def test_exact_ns_from_written_decimals_matches_decimal_arithmetic():
    from sofa_gui.core.importers.chrome.values import exact_ns, ns_exact, to_ns

    rng = np.random.default_rng(11)
    forms = [lambda w, f: f"{w}.{f:03d}", lambda w, f: f"{w}.{f % 100:02d}",
             lambda w, f: f"{w}.{f:03d}7", lambda w, f: w, lambda w, f: f"-{w}.{f:03d}",
             lambda w, f: f"{w / 1e3:.6e}", lambda w, f: f"{w}.0", lambda w, f: "NaN",
             lambda w, f: f"{w + 2 ** 52}.{f:03d}"]  # beyond 2**52 µs: exact arithmetic
    written = [forms[k % len(forms)](int(rng.integers(4 * 10 ** 12, 4 * 10 ** 15)),
                                     int(rng.integers(0, 1000))) for k in range(5000)]
    ts = np.array([float(w) for w in written])
    ok = np.isfinite(ts)
    approx = to_ns(np.where(ok, ts, 0.0))
    got = exact_ns(approx, ts, written)
    want = [ns_exact(w) if ns_exact(w) is not None else a
            for w, a in zip(written, approx.tolist())]
    assert got.tolist() == want


@pytest.mark.parametrize("blanks", [0, 1, 255, 256, 257, 5000, 70_000])
@pytest.mark.parametrize("lo", [0, 3, 9])
def test_last_non_blank_looks_back_from_the_end_only(blanks, lo):
    """The blank-run cut asks for the last non-blank byte of each new block; it must be
    right across its doubling look-back windows and respect ``lo``."""
    from sofa_gui.core.importers.chrome.decode import _last_non_blank

    body = bytearray(b'{"a": 1}, \n{"b": [1, 2]}')
    buf = body + bytearray(b" \t\r\n"[i % 4] for i in range(blanks))
    want = len(body) - 1 if len(body) - 1 >= lo else -1
    assert _last_non_blank(buf, lo) == want
    assert _last_non_blank(bytearray(b" " * blanks), 0) == -1
    assert _last_non_blank(buf, len(buf)) == -1


def test_text_ids_get_codes_in_first_seen_order():
    """Text pids/tids are coded in the order the file shows them, not in set (hash)
    order, so the codes are the same on every run and in every decode part."""
    from sofa_gui.core.importers.chrome.ids import _FIRST_SYNTHETIC, IdCodes, pack, pack_one

    ids = IdCodes()
    texts = [f"worker {c}" for c in "qwertyuiopasdfghjklzxcvbnm"]
    got = ids.codes([7, *texts, texts[3], "12"])
    assert got.tolist() == [7, *range(_FIRST_SYNTHETIC, _FIRST_SYNTHETIC + 26),
                            _FIRST_SYNTHETIC + 3, 12]
    assert [ids.label(c) for c in got[1:27].tolist()] == texts
    pid, tid = np.array([5, -3, 1 << 30]), np.array([-(1 << 31) + 1, 9, -1])
    assert [pack_one(p, t) for p, t in zip(pid.tolist(), tid.tolist())] == \
        pack(pid, tid).tolist()


def test_int_ids_keep_their_value_after_text_ids_were_seen():
    """A trace with text tids has int pids: once text was seen, plain ints in range still
    code as themselves (the C fast path), and a list mixing ints, big ints and text gets
    the same codes as value by value."""
    from sofa_gui.core.importers.chrome.ids import _FIRST_SYNTHETIC, IdCodes

    ids = IdCodes()
    assert ids.codes(["25738", "stream 7"]).tolist() == [25738, _FIRST_SYNTHETIC]
    assert ids.int_codes([1, 2]) is None  # flows: not every value so far was an int
    assert ids.codes([3, 4, -5]).tolist() == [3, 4, -5]
    mixed = [3, 1 << 40, "stream 7", "x", 4]
    assert ids.codes(mixed).tolist() == [ids.code(v) for v in mixed]
    assert ids.codes(mixed).tolist() == [3, _FIRST_SYNTHETIC + 1, _FIRST_SYNTHETIC,
                                         _FIRST_SYNTHETIC + 2, 4]
    assert ids.codes([]).tolist() == []
