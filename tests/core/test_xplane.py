"""XProf XSpace importer against a real JAX profile, checked by an independent decoder."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import pick_importer
from sofa_gui.core.importers.xplane.xspace import IMPORTER
from sofa_gui.core.progress import NullProgress
from sofa_gui.core.trace import Kind, LaneKind

DATA = Path(__file__).resolve().parents[1] / "data" / "xplane"
TW003 = DATA / "tw003.xplane.pb"


def _walk(b: bytes) -> dict[int, list]:
    """Field number -> raw values (ints for varints, bytes for length-delimited).

    Written separately from the importer's reader on purpose: the test's truth.
    """
    out: dict[int, list] = {}
    i = 0
    while i < len(b):
        key = 0
        for shift in range(0, 70, 7):
            key |= (b[i] & 127) << shift
            i += 1
            if b[i - 1] < 128:
                break
        if key & 7 == 0:
            v = 0
            for shift in range(0, 70, 7):
                v |= (b[i] & 127) << shift
                i += 1
                if b[i - 1] < 128:
                    break
        elif key & 7 == 2:
            n = 0
            for shift in range(0, 70, 7):
                n |= (b[i] & 127) << shift
                i += 1
                if b[i - 1] < 128:
                    break
            v, i = b[i:i + n], i + n
        elif key & 7 == 1:
            v, i = b[i:i + 8], i + 8
        else:
            v, i = b[i:i + 4], i + 4
        out.setdefault(key >> 3, []).append(v)
    return out


def _truth() -> dict[str, int]:
    """Events per plane name."""
    counts: Counter = Counter()
    for plane in _walk(TW003.read_bytes()).get(1, []):
        p = _walk(plane)
        name = p.get(2, [b""])[0].decode()
        counts[name] += sum(len(_walk(line).get(4, [])) for line in p.get(3, []))
    return dict(counts)


@pytest.fixture(scope="module")
def trace():
    return IMPORTER.load(TW003, NullProgress())


def test_sniffed_as_xplane():
    assert IMPORTER.can_open(TW003) >= 0.9
    assert pick_importer(TW003) is IMPORTER


def test_event_counts_match_independent_decoder(trace):
    truth = _truth()
    assert truth["/host:CPU"] == 3415 and sum(truth.values()) == 3650
    assert {"/host:metadata", "Task Environment"} <= set(truth)
    rep = trace.meta.load_stats
    assert rep.read == sum(truth.values())
    assert rep.loaded + rep.skipped_total == rep.read
    host = trace.lanes.kind[trace.slices.lane] == int(LaneKind.CPU)
    assert int(host.sum()) == truth["/host:CPU"]
    dev = trace.lanes.device[trace.slices.lane]
    for n in range(8):
        assert int(((dev == n) & ~host).sum()) == truth[f"/device:GPU:{n}"], n
    assert any("Task Environment" in note for note in rep.notes)


def test_lanes(trace):
    lanes = trace.lanes
    gpu = np.flatnonzero(lanes.kind == int(LaneKind.GPU))
    assert sorted({int(lanes.device[i]) for i in gpu}) == list(range(8))
    for i in gpu:
        assert lanes.name[i] == f"Stream #{lanes.stream[i]}(Kernel)"
    cpu = np.flatnonzero(lanes.kind == int(LaneKind.CPU))
    assert len(cpu) == 32 and all(lanes.group[i] == "Host CPU" for i in cpu)
    assert "python" in {lanes.name[i] for i in cpu}


def test_times_kinds_args_and_flows(trace):
    s = trace.slices
    assert (s.dur >= 0).all() and len(s) == 3650
    on_gpu = trace.lanes.kind[s.lane] == int(LaneKind.GPU)
    assert set(s.kind[on_gpu].tolist()) == {int(Kind.KERNEL)}
    assert (s.correlation[on_gpu] >= 0).all()
    # every kernel is linked to its host launch through correlation_id
    assert len(trace.flows) == int(on_gpu.sum()) == 235
    assert (s.kind[trace.flows.src] == int(Kind.RUNTIME)).all()
    k = int(np.flatnonzero(on_gpu)[0])
    args = trace.args.get(int(s.args[k]))
    assert args["correlation_id"] == s.correlation[k] and "kernel_details" in args
    # start = line.timestamp_ns + offset_ps / 1000, end = start + duration_ps / 1000
    assert (s.start.min(), s.end.max()) == _time_span()


def _time_span() -> tuple[int, int]:
    lo, hi = None, None
    for plane in _walk(TW003.read_bytes()).get(1, []):
        for line in _walk(plane).get(3, []):
            ln = _walk(line)
            base = ln.get(3, [0])[0]
            for ev in ln.get(4, []):
                e = _walk(ev)
                start = base + e.get(2, [0])[0] // 1000
                end = start + e.get(3, [0])[0] // 1000
                lo = start if lo is None else min(lo, start)
                hi = end if hi is None else max(hi, end)
    return lo, hi


def test_truncated_file_is_a_format_error(tmp_path):
    raw = TW003.read_bytes()
    for cut in (len(raw) - 1, len(raw) // 2, 7):
        p = tmp_path / "cut.xplane.pb"
        p.write_bytes(raw[:cut])
        with pytest.raises(TraceFormatError, match="truncated|corrupt|past"):
            IMPORTER.load(p, NullProgress())


def test_bit_flips_are_format_errors_or_load(tmp_path):
    raw = bytearray(TW003.read_bytes())
    rng = np.random.default_rng(3)
    errors = 0
    for pos in rng.integers(0, len(raw), 40):
        bad = bytearray(raw)
        bad[pos] ^= 0x80 | (1 << int(rng.integers(0, 7)))
        p = tmp_path / "flip.xplane.pb"
        p.write_bytes(bytes(bad))
        try:
            tr = IMPORTER.load(p, NullProgress())
        except TraceFormatError as exc:
            errors += 1
            assert "\n" not in exc.reason
        else:
            st = tr.meta.load_stats
            assert st.loaded + st.skipped_total == st.read
    assert errors > 0


def test_not_xspace(tmp_path):
    p = tmp_path / "x.xplane.pb"
    p.write_bytes(b'{"traceEvents": []}')
    assert IMPORTER.can_open(p) == 0.0
    with pytest.raises(TraceFormatError, match="not an XSpace"):
        IMPORTER.load(p, NullProgress())
    p.write_bytes(b"\x0a\x03\x0f\x00\x00")  # a plane holding a group-start tag
    with pytest.raises(TraceFormatError, match="wire type|field number"):
        IMPORTER.load(p, NullProgress())


def test_cli_analyze_json(tmp_path):
    res = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(TW003), "--json"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)
