"""The analysis cache: cached results are the computed ones, on every test trace.

``analyze --json`` output (trace summary + analysis) must be identical between
a cold run and a cached reopen; stale or damaged entries are recomputed; values
the cache cannot store faithfully leave no entry.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tracedata import DATA, SHARED

from sofa_gui.core.analysis import cache, codec
from sofa_gui.core.analysis.pipeline import STEPS, Options
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.importers import load_trace
from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.summary import trace_dict
from sofa_gui.core.trace import Kind

AUTO = Options(iterations="auto")
KEY = dataclasses.asdict(AUTO)  # the cache key of AUTO


def _traces() -> list[Path]:
    out = [demo_trace_path(), DATA / "ranks", DATA / "recording-torch-pyspy",
           DATA / "sofa-demo-sofalog", DATA / "sofa-deepprof-gputrace" / "gputrace.csv",
           *sorted((DATA / "kineto").glob("*.json.gz")), *sorted((DATA / "xplane").glob("*.pb")),
           *sorted((DATA / "torch-loops").glob("*.json.gz")),
           *sorted(p for p in (DATA / "tf").iterdir() if p.is_dir())]
    if SHARED.is_dir():
        out += sorted(SHARED.rglob("*.json.gz"))
    return out


def _cli_doc(trace, analysis) -> str:
    """What ``analyze --json`` prints."""
    return json.dumps({"trace": trace_dict(trace), **analysis.to_dict(trace)}, indent=1,
                      allow_nan=False)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.name)
def test_cached_analysis_equals_computed(path, cache_dir):
    cold = load_trace(path)
    assert cold.cache_entry is not None
    computed = cache.analyze_cached(cold, AUTO)
    assert list(Path(cold.cache_entry).glob("analysis-*.msgpack")), "no analysis entry written"
    again = load_trace(path)
    assert again.cache_entry == cold.cache_entry
    cached = cache.load(again.cache_entry, KEY)
    assert cached is not None
    assert _cli_doc(again, cached) == _cli_doc(cold, computed)


def test_options_and_code_version_key_the_entry(cache_dir, monkeypatch):
    trace = load_trace(demo_trace_path())
    auto = cache.analyze_cached(trace, AUTO)
    by_pattern = dataclasses.asdict(Options(iterations="pattern"))
    assert cache.load(trace.cache_entry, by_pattern) is None
    pattern = cache.analyze_cached(trace, Options(iterations="pattern"))
    assert cache.load(trace.cache_entry, by_pattern).to_dict() == pattern.to_dict()
    assert cache.load(trace.cache_entry, KEY).to_dict() == auto.to_dict()
    monkeypatch.setattr(cache, "_code_hash", "another-analysis-version")
    assert cache.load(trace.cache_entry, KEY) is None


def test_a_hit_hands_over_every_part_at_once(cache_dir):
    trace = load_trace(demo_trace_path())
    computed = cache.analyze_cached(trace, AUTO)
    seen = []
    hit = cache.analyze_cached(trace, AUTO, on_result=lambda a, part: seen.append(part))
    assert seen == [step.part for step in STEPS]
    assert hit.to_dict(trace) == computed.to_dict(trace)


def test_damaged_entry_is_recomputed(cache_dir):
    trace = load_trace(demo_trace_path())
    first = cache.analyze_cached(trace, AUTO)
    f = cache.entry_file(trace.cache_entry, KEY)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    assert cache.load(trace.cache_entry, KEY) is None
    assert not f.exists()
    assert cache.analyze_cached(trace, AUTO).to_dict() == first.to_dict()
    assert f.exists()


def test_recompute_ignores_the_stored_results(cache_dir, monkeypatch):
    trace = load_trace(demo_trace_path())
    cache.analyze_cached(trace, AUTO)
    calls = []
    from sofa_gui.core.analysis import pipeline

    real = pipeline.analyze
    monkeypatch.setattr(pipeline, "analyze", lambda *a, **k: calls.append(1) or real(*a, **k))
    cache.analyze_cached(trace, AUTO)
    assert calls == []
    cache.analyze_cached(trace, AUTO, recompute=True)
    assert calls == [1]


def test_no_entry_without_a_trace_cache(tmp_path):
    trace = load_trace(demo_trace_path(), use_cache=False)
    assert trace.cache_entry is None
    assert cache.save(None, KEY, 1) is False
    assert cache.save(tmp_path, KEY, 1) is False  # no manifest: not an entry
    assert not list(tmp_path.iterdir())


def test_codec_round_trips_types_exactly():
    # a results dataclass whose fields hold every kind of value the codec knows
    value = Iterations("pattern", "s", np.arange(6, dtype=np.int16).reshape(2, 3),
                       np.float32(1.5), (1, "x", None, b"\x00"),
                       {3: [Kind.KERNEL, {1.5, 2.5}], (1, 2): np.int64(7)}, None, "", [])
    back = codec.decode(codec.encode(value))
    assert type(back) is Iterations
    assert back.starts.dtype == np.int16 and back.starts.shape == (2, 3)
    assert (back.starts == value.starts).all()
    assert type(back.ends) is np.float32 and back.ends == 1.5
    assert back.confidence == value.confidence and type(back.confidence) is tuple
    assert back.pattern[3][0] is Kind.KERNEL and back.pattern[3][1] == {1.5, 2.5}
    assert type(back.pattern[(1, 2)]) is np.int64


@dataclass
class _Foreign:
    a: int


def test_codec_refuses_classes_outside_the_package():
    with pytest.raises(codec.Unsupported):
        codec.encode(_Foreign(1))


def test_codec_refuses_foreign_classes_and_objects(tmp_path):
    with pytest.raises(codec.Unsupported):
        codec.encode(Path("x"))
    with pytest.raises(codec.Unsupported):
        codec.encode(np.array([object()], dtype=object))
    with pytest.raises(codec.Unsupported):
        codec.decode(["C", "os:system", [], []])
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "manifest.json").write_text("{}")
    assert cache.save(entry, KEY, Path("x")) is False
    assert [p.name for p in entry.iterdir()] == ["manifest.json"]


@pytest.mark.parametrize("module", ["units.py", "names.py", "kinds.py", "nesting.py",
                                    "trace.py"])
def test_code_version_follows_the_trace_model_modules(tmp_path, monkeypatch, module):
    # results also depend on the model modules the analysis reads: an edited units.py
    # (say) must not serve results computed by the old one
    import shutil
    core = Path(cache.__file__).resolve().parents[1]
    copy = tmp_path / "core"
    shutil.copytree(core / "analysis", copy / "analysis",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for f in core.glob("*.py"):
        shutil.copy(f, copy / f.name)
    monkeypatch.setattr(cache, "_CODE_ROOT", copy / "analysis")
    monkeypatch.setattr(cache, "_MODEL_ROOT", copy, raising=False)
    monkeypatch.setattr(cache, "_code_hash", None)
    before = cache.code_version()
    with open(copy / module, "a") as f:
        f.write("\n# changed\n")
    monkeypatch.setattr(cache, "_code_hash", None)
    assert cache.code_version() != before
