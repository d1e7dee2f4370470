"""The analysis cache is data only: a planted or damaged file never runs code or lies.

Every kind of payload a hostile cache file could carry (a callable named by module and
attribute, an unregistered class, fields a class does not have, object arrays, pickle,
msgpack extensions) is refused: the entry is dropped and the analysis runs again. A
fuzz test feeds the codec arbitrary tags and values; one-byte flips anywhere in the file
are caught by its checksum.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_analysis_cache import AUTO, KEY

from sofa_gui.core.analysis import cache, codec
from sofa_gui.core.importers import load_trace
from sofa_gui.core.samples import demo_trace_path

ROOT = Path(__file__).resolve().parents[2]


def _file_of(node) -> bytes:
    """A cache file holding ``node``, with a correct checksum (as an attacker writes it)."""
    body = msgspec.msgpack.encode(node)
    return cache.MAGIC + hashlib.sha256(body).digest() + body


def _payloads(marker: Path) -> dict[str, object]:
    cmd = f"touch {marker}"
    ok = codec.encode(np.arange(3))
    return {
        "enum-callable": ["E", "sofa_gui.core.analysis.cache:os.system", cmd],
        "enum-builtin": ["E", "builtins:eval", f"__import__('os').system({cmd!r})"],
        "class-os-system": ["C", "os:system", [], []],
        "class-subprocess": ["C", "subprocess:Popen", ["args"], [["L", ["sh", "-c", cmd]]]],
        "class-dotted-attr": ["C", "sofa_gui.core.store:os.system", [], []],
        "class-by-qualname-path": ["C", "Analysis.__init__.__globals__", [], []],
        "enum-not-enum": ["E", "Analysis", 1],
        "class-not-dataclass": ["C", "Kind", [], []],
        "extra-field": ["C", "Fix", ["__class__", "text"], [1, "x"]],
        "missing-fields": ["C", "Analysis", [], []],
        "object-dtype": ["A", "|O", [1], b"\0" * 8],
        "structured-dtype": ["A", "[('a', 'O')]", [1], b"\0" * 8],
        "void-dtype": ["S", "|V8", b"\0" * 8],
        "bad-shape": ["A", "<i8", [10 ** 12], ok[3]],
        "unknown-tag": ["X", "os.system", cmd],
        "raw-map": {"__reduce__": cmd},
        "not-an-analysis": ok,
    }


def _plant(entry: Path, data: bytes) -> Path:
    f = cache.entry_file(entry, KEY)
    f.write_bytes(data)
    os.chmod(f, 0o600)
    return f


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """A demo trace with its trace cache entry, its analysis and the analysis file."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path_factory.mktemp("payloads") / "cache"))
        trace = load_trace(demo_trace_path())
        result = cache.analyze_cached(trace, AUTO)
    return trace, result, cache.entry_file(trace.cache_entry, KEY).read_bytes()


@pytest.fixture
def cached(computed):
    """:func:`computed` with its analysis file as written."""
    trace, result, good = computed
    _plant(trace.cache_entry, good)
    return trace, result


@pytest.mark.parametrize("kind", sorted(_payloads(Path("x"))))
def test_each_planted_payload_is_dropped_and_recomputed(cached, tmp_path, kind):
    trace, _ = cached
    marker = tmp_path / "ran"
    f = _plant(trace.cache_entry, _file_of(_payloads(marker)[kind]))
    assert cache.load(trace.cache_entry, KEY) is None
    assert not f.exists() and not marker.exists()


@pytest.mark.parametrize("data", [
    pickle.dumps(os.system), b"cos\nsystem\n(S'true'\ntR.",
    msgspec.msgpack.encode(msgspec.msgpack.Ext(1, b"os.system")), b"", b"\xc1" * 64,
    b"\x91" * 100_000 + b"\xc0", b"\x92\xa1L\x91" * 400 + b"\xc0",
], ids=["pickle", "pickle-protocol-0", "msgpack-ext", "empty", "garbage", "deep-msgpack",
        "deep-tags"])
def test_foreign_formats_are_dropped(cached, data):
    trace, _ = cached
    f = _plant(trace.cache_entry, data)
    assert cache.load(trace.cache_entry, KEY) is None and not f.exists()
    f = _plant(trace.cache_entry, _file_of_raw(data))
    assert cache.load(trace.cache_entry, KEY) is None and not f.exists()


def _file_of_raw(body: bytes) -> bytes:
    return cache.MAGIC + hashlib.sha256(body).digest() + body


def test_planted_callable_runs_nothing_in_analyze(cached, tmp_path):
    """The planted entry of the audit, end to end: ``analyze`` prints one warning line,
    recomputes and runs nothing."""
    trace, _ = cached
    marker = tmp_path / "ran"
    _plant(trace.cache_entry, _file_of(_payloads(marker)["enum-callable"]))
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               SOFA_GUI_CACHE_DIR=str(Path(trace.cache_entry).parent))
    out = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(demo_trace_path())],
                         env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert not marker.exists()
    assert "Traceback" not in out.stderr
    warnings = [line for line in out.stderr.splitlines() if "analysis cache" in line]
    assert len(warnings) == 1 and "not a registered result type" in warnings[0]


def test_flipped_bytes_are_detected_and_recomputed(cached):
    trace, computed = cached
    f = cache.entry_file(trace.cache_entry, KEY)
    good = f.read_bytes()
    rng = np.random.default_rng(7)
    spots = sorted({0, len(cache.MAGIC), len(cache.MAGIC) + 40, len(good) - 1,
                    *rng.integers(0, len(good), 40).tolist()})
    for pos in spots:
        bad = bytearray(good)
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        _plant(trace.cache_entry, bytes(bad))
        assert cache.load(trace.cache_entry, KEY) is None, pos
        assert not f.exists()
    assert cache.analyze_cached(trace, AUTO).to_dict(trace) == computed.to_dict(trace)
    assert f.read_bytes() == good


def test_cache_files_are_private_whatever_the_umask(cached):
    trace, _ = cached
    old = os.umask(0o002)
    try:
        cache.analyze_cached(trace, AUTO, recompute=True)
    finally:
        os.umask(old)
    assert os.stat(cache.entry_file(trace.cache_entry, KEY)).st_mode & 0o777 == 0o600


def test_a_group_writable_analysis_file_is_not_read(cached):
    trace, _ = cached
    f = cache.entry_file(trace.cache_entry, KEY)
    os.chmod(f, 0o666)
    assert cache.load(trace.cache_entry, KEY) is None and not f.exists()


# -- the codec alone ------------------------------------------------------------------------
_TAGS = st.sampled_from(["A", "S", "C", "E", "L", "T", "D", "Z", "F", "", "X", "os:system"])
_NAMES = st.sampled_from([*codec.result_types(), "os:system", "builtins:eval",
                          "sofa_gui.core.analysis.cache:os.system", "Analysis.__init__"])
_LEAVES = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
           | st.binary(max_size=24) | _NAMES
           | st.sampled_from(["<i8", "|O", "<f4", "|V8", "<U2", "|b1", "<M8[ns]"]))
_NODES = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=5),
    st.tuples(_TAGS, inner).map(list),
    st.tuples(_TAGS, _NAMES, st.lists(inner, max_size=4), st.lists(inner, max_size=4))
    .map(list),
    st.tuples(_TAGS, st.lists(inner, max_size=4), st.lists(inner, max_size=4)).map(list),
), max_leaves=30)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_NODES)
def test_codec_fuzz_decodes_or_refuses(node):
    """Arbitrary tags and values: a value or :class:`codec.Unsupported`, nothing else."""
    try:
        codec.decode(node)
    except codec.Unsupported:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_codec_loads_any_bytes_or_refuses(data):
    try:
        codec.loads(data)
    except codec.Unsupported:
        pass


_PLAIN_DATA = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 64 - 1) | st.text() | st.binary()
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4) | st.integers(-9, 9), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=100, deadline=None)
@given(_PLAIN_DATA)
def test_codec_round_trips_plain_data(value):
    node = msgspec.msgpack.decode(msgspec.msgpack.encode(codec.encode(value)))
    assert codec.decode(node) == value


def test_codec_names_no_module_or_attribute():
    """The codec module resolves nothing by name: no import machinery, no getattr."""
    text = Path(codec.__file__).read_text()
    assert "importlib" not in text and "getattr(" not in text.replace(
        "getattr(obj, n)", "") and "__import__" not in text
