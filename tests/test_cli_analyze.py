"""``sofa-gui analyze`` end to end on real traces, and on bad input (exit 2, one line)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from tracedata import DATA

MINITOY = DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
RANKS = DATA / "ranks"


def run_cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(cache), "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "sofa_gui", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def _file_extent_us(path: Path) -> tuple[Decimal, Decimal]:
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    timed = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i", "I")]
    return (min(Decimal(e["ts"]) for e in timed),
            max(Decimal(e["ts"]) + Decimal(e.get("dur", 0)) for e in timed))


def test_analyze_json_on_a_kineto_trace(tmp_path):
    r = run_cli("analyze", str(MINITOY), "--json", cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # exactly one JSON document on stdout
    tr = doc["trace"]
    assert tr["path"] == str(MINITOY)
    assert tr["format"] == "kineto"
    # events: what was loaded of the file (the app's, the report's and the text's count)
    assert tr["events"] == tr["load_report"]["loaded"] == 215
    assert tr["slices"] + tr["counter_samples"] == 115
    assert tr["skipped"] == {"flow event without a start (s)": 5}
    lo, hi = _file_extent_us(MINITOY)
    assert tr["start_us"] == float(lo) and tr["end_us"] == float(hi)  # the file's own clock
    assert {(lane["name"], lane["kind"], lane["events"]) for lane in tr["lanes"]} >= {
        ("stream 0", "gpu", 16), ("thread 598009 (pt_autograd_0)", "cpu", 43)}
    assert tr["ranks"] == []
    assert isinstance(doc["iterations"], dict) and isinstance(doc["findings"], list)
    assert len(doc["iterations"]["items"]) == 2  # ProfilerStep#1 and #2


def test_analyze_json_on_a_rank_folder_and_cached_rerun(tmp_path):
    cache = tmp_path / "cache"
    first = run_cli("analyze", str(RANKS), "--json", cache=cache)
    again = run_cli("analyze", str(RANKS), "--json", cache=cache)
    assert first.returncode == again.returncode == 0, first.stderr
    a, b = json.loads(first.stdout)["trace"], json.loads(again.stdout)["trace"]
    assert a == b
    assert a["format"] == "kineto-ranks" and a["ranks"] == [0, 1]
    assert all(lane["group"].startswith(("rank 0 · ", "rank 1 · ")) for lane in a["lanes"])
    assert len(list(cache.iterdir())) == 1


def test_analyze_text_output(tmp_path):
    r = run_cli("analyze", str(MINITOY), cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert "Format:   kineto" in r.stdout and "GPU 2 / stream 0" in r.stdout


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    good = MINITOY.read_bytes()
    plain = gzip.decompress(good)
    files = {
        "missing": None,
        "empty": b"",
        "truncated gzip": good[: len(good) // 2],
        "corrupt gzip": good[:100] + bytes(200) + good[300:],
        "not JSON": b"hello, this is not json\n",
        "wrong shape": b'{"events": [1, 2, 3]}',
        "truncated JSON": plain[: len(plain) // 2],
    }
    out = {}
    for label, data in files.items():
        p = tmp_path / (label.replace(" ", "_") + (".json.gz" if "gzip" in label else ".json"))
        if data is not None:
            p.write_bytes(data)
        out[label] = p
    return out


@pytest.mark.parametrize("label, extra", [
    ("missing", []), ("empty", ["--json"]), ("truncated gzip", []),
    ("corrupt gzip", ["--json"]), ("not JSON", []), ("wrong shape", ["--json"]),
    ("truncated JSON", []),
])
def test_bad_input_exits_2_with_one_error_line(tmp_path, label, extra):
    path = _bad_inputs(tmp_path)[label]
    cache = tmp_path / "cache"
    r = run_cli("analyze", str(path), *extra, cache=cache)
    assert r.returncode == 2, (label, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {path}: ")
    assert len(lines[0]) > len(f"error: {path}: ") + 5
    assert "Traceback" not in r.stderr and r.stdout == ""
    leftovers = [p for p in cache.rglob("*")] if cache.exists() else []
    assert leftovers == []
