"""The corpus generators' truth (``benchmarks/corpus/common.py``): each timed variant keeps
its phases, not only the run, so a fix's gain can be traced to the phase it comes from;
more variants than the fix (``also``) are measured beside it; each timed round starts
from a collected heap."""

from __future__ import annotations

import gc
import gzip
import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def common():
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("corpus.common")
    finally:
        sys.path.remove(str(BENCH))


def rounds(step_s: float, phases: dict[str, float], n: int = 4) -> list:
    return [[(step_s, dict(phases))] * n for _ in range(3)]


def test_every_variant_keeps_its_phases_and_its_speedup(common):
    c = common.Case("c", lambda v: None, "pytorch", "training", 4, {}, fix="one read",
                    also=("other",))
    got = {"run": rounds(0.010, {"sync": 0.008}), "fix": rounds(0.002, {"sync": 0.0005}),
           "other": rounds(0.005, {"sync": 0.003})}
    t = common.summarize(c, got)
    assert t["phases_ms"] == {"sync": 8.0}
    assert t["fix"]["phases_ms"] == {"sync": 0.5} and t["fix"]["speedup"] == 5.0
    assert t["variants"]["other"]["phases_ms"] == {"sync": 3.0}
    assert t["variants"]["other"]["speedup"] == 2.0
    assert common.variants_of(c) == ["run", "fix", "other"]


def test_a_share_variant_measures_its_bound_without_claiming_a_fix(common):
    c = common.Case("c", lambda v: None, "pytorch", "training", 4, {},
                    share_from_fix="host_overhead", share_variant="fused")
    got = {"run": rounds(0.010, {}), "fused": rounds(0.0096, {})}
    t = common.summarize(c, got)
    assert t["fix"] is None and t["shares"]["host_overhead"] == pytest.approx(0.04)
    assert t["variants"]["fused"]["speedup"] == pytest.approx(1.042, abs=1e-3)


def test_a_second_share_comes_from_an_also_variant_out_of_what_stays_compute(common):
    """A fix inside the run's own work (a fused optimizer beside a communication-bound
    step) states its bound's share beside the main one, out of the compute left over."""
    c = common.Case("c", lambda v: None, "pytorch", "training", 4, {}, fix="ddp",
                    share_from_fix="communication", share_variant="bare", also=("fused",),
                    also_share=("host_overhead", "fused"))
    got = {"run": rounds(0.010, {}), "fix": rounds(0.004, {}), "bare": rounds(0.002, {}),
           "fused": rounds(0.009, {})}
    t = common.summarize(c, got)
    assert t["shares"] == {"communication": 0.8, "host_overhead": 0.1, "compute": 0.1}
    assert t["variants"]["fused"]["speedup"] == pytest.approx(1.111, abs=1e-3)
    # a variant that saves more than the compute left over takes that compute, no more
    got["fused"] = rounds(0.007, {})
    assert common.summarize(c, got)["shares"] == {"communication": 0.8, "host_overhead": 0.2}
    # without ``also_share`` the variant is only timed
    c.also_share = ("", "")
    assert common.summarize(c, got)["shares"] == {"communication": 0.8, "compute": 0.2}


def test_each_timed_round_starts_from_a_collected_heap(common, monkeypatch):
    """The garbage a variant's build leaves is collected before its steps are timed."""
    events = []
    monkeypatch.setattr(common, "time_steps",
                        lambda step, first, n, *a: events.append(("time", first)) or [(0.001, {})])
    monkeypatch.setattr(gc, "collect", lambda *a: events.append(("gc", None)) or 0)
    # a quiet machine: a busy neighbour would have the round measured again
    monkeypatch.setattr(common.Others, "cores", lambda self: 0.0)
    c = common.Case("c", lambda v: None, "pytorch", "training", 2, {}, warmup=1)
    common.measure(c, rounds=1)
    assert events == [("time", 0), ("gc", None), ("time", 1)]


def test_captures_are_stored_as_gzip_xplanes_that_open_as_written(common, tmp_path):
    from tracedata import DATA

    from sofa_gui.core.importers import load_trace

    run = tmp_path / "capture-1" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    raw = (DATA / "xplane" / "tw003.xplane.pb").read_bytes()
    (run / "vm.xplane.pb").write_bytes(raw)
    common.gzip_profiles(tmp_path / "capture-1")
    common.gzip_profiles(tmp_path / "capture-2.json.gz")  # a PyTorch file: left alone
    assert [p.name for p in run.iterdir()] == ["vm.xplane.pb.gz"]
    gz = (run / "vm.xplane.pb.gz").read_bytes()
    assert gzip.decompress(gz) == raw and gz[4:8] == bytes(4)  # no time stamp, as gzip -n
    assert gz[3] & 0x08 == 0  # no file name
    t = load_trace(tmp_path / "capture-1", use_cache=False)
    assert t.meta.extra["profile_run"]["hosts"] == ["vm"] and len(t.slices) > 1000
