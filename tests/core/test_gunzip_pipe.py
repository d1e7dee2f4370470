"""A large gzip trace inflated by a child process gives the one-process read's trace.

The child sends the decompressed text through a pipe while the caller decodes it; the
trace, the analysis and every error (truncated, corrupt, over the decompression cap)
must be the same as when one process inflates and decodes, and the child must stop
when the read stops early.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from test_analysis_cache import AUTO, cache_traces, cli_doc
from test_store import assert_same_trace

from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace
from sofa_gui.core.importers.chrome import gunzip


def gzip_traces() -> list[Path]:
    out = []
    for p in cache_traces():
        out += sorted(p.glob("*.json.gz")) if p.is_dir() else [p]
    return [p for p in out if p.name.endswith(".json.gz")][:6]


class Spy:
    """Counts the children started."""

    def __init__(self, monkeypatch):
        self.started = 0
        real = gunzip.PipedGzip

        def make(*a, **k):
            self.started += 1
            return real(*a, **k)
        monkeypatch.setattr(gunzip, "PipedGzip", make)


def load(path: Path, monkeypatch, piped: bool):
    monkeypatch.delenv("SOFA_GUI_DECODE_PARTS", raising=False)
    monkeypatch.setattr(gunzip, "usable_cpus", lambda: 2)
    monkeypatch.setenv("SOFA_GUI_PIPE_GZIP_MIN_BYTES", "0" if piped else "1e15")
    return load_trace(path, use_cache=False)


@pytest.mark.parametrize("src", gzip_traces(), ids=lambda p: p.name)
def test_piped_gzip_gives_the_one_process_trace(src, monkeypatch):
    serial = load(src, monkeypatch, piped=False)
    spy = Spy(monkeypatch)
    piped = load(src, monkeypatch, piped=True)
    assert spy.started == 1
    assert_same_trace(serial, piped)
    assert cli_doc(piped, analyze(piped, AUTO)) == cli_doc(serial, analyze(serial, AUTO))


def test_gzip_files_are_inflated_in_process_unless_asked(monkeypatch):
    monkeypatch.delenv("SOFA_GUI_PIPE_GZIP_MIN_BYTES", raising=False)
    monkeypatch.delenv("SOFA_GUI_DECODE_PARTS", raising=False)
    monkeypatch.setattr(gunzip, "usable_cpus", lambda: 2)
    spy = Spy(monkeypatch)
    path = gzip_traces()[0]
    load_trace(path, use_cache=False)
    assert spy.started == 0
    monkeypatch.setenv("SOFA_GUI_PIPE_GZIP_MIN_BYTES", str(path.stat().st_size + 1))
    load_trace(path, use_cache=False)
    assert spy.started == 0  # smaller than asked for
    monkeypatch.setenv("SOFA_GUI_PIPE_GZIP_MIN_BYTES", str(path.stat().st_size))
    load_trace(path, use_cache=False)
    assert spy.started == 1


@pytest.mark.parametrize(("parts", "cores"), [("1", 2), (None, 1)])
def test_one_process_when_asked_or_on_one_core(parts, cores, monkeypatch):
    spy = Spy(monkeypatch)
    monkeypatch.setenv("SOFA_GUI_PIPE_GZIP_MIN_BYTES", "0")
    monkeypatch.setattr(gunzip, "usable_cpus", lambda: cores)
    if parts:
        monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", parts)
    load_trace(gzip_traces()[0], use_cache=False)
    assert spy.started == 0


def _error(path: Path, monkeypatch, piped: bool) -> str:
    with pytest.raises(TraceFormatError) as err:
        load(path, monkeypatch, piped)
    return str(err.value)


def test_truncated_and_corrupt_gzip_say_the_same_through_the_pipe(tmp_path, monkeypatch):
    good = gzip_traces()[0].read_bytes()
    cases = {"truncated.json.gz": (good[: len(good) // 2], "truncated gzip"),
             "bad-crc.json.gz": (good[:-8] + bytes(8), "CRC check failed"),
             "garbled.json.gz": (good[:len(good) // 3] + bytes(64) + good[len(good) // 3 + 64:],
                                 "")}
    for name, (data, says) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        one = _error(path, monkeypatch, piped=False)
        assert says in one
        assert _error(path, monkeypatch, piped=True) == one


def _big_gzip(tmp_path: Path) -> Path:
    """A real trace whose text is over 8 MiB, so the child is still writing when read."""
    text = gzip.decompress(gzip_traces()[0].read_bytes())
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(text + b" " * max(0, (9 << 20) - len(text)), 1))
    return path


def test_the_decompression_cap_holds_and_stops_the_child(tmp_path, monkeypatch):
    path = _big_gzip(tmp_path)
    monkeypatch.setenv("SOFA_GUI_MAX_DECOMPRESSED_BYTES", str(1 << 20))
    assert "decompresses to more than" in _error(path, monkeypatch, piped=True)


def test_closing_early_stops_the_child(tmp_path):
    path = _big_gzip(tmp_path)
    stream = gunzip.PipedGzip(path, path.stat().st_size)
    assert len(stream.read(1 << 16)) == 1 << 16
    assert stream.tell() > 0
    stream.close()
    assert not stream.process.is_alive()


def test_a_killed_child_is_one_clear_error(tmp_path):
    path = _big_gzip(tmp_path)
    stream = gunzip.PipedGzip(path, path.stat().st_size)
    stream.read(1 << 16)
    stream.process.kill()
    stream.process.join(5)
    with pytest.raises(OSError, match="decompressing the file ended early"):
        while stream.read(4 << 20):
            pass
    stream.close()


def test_reads_return_the_asked_size_until_the_end(tmp_path):
    path = _big_gzip(tmp_path)
    want = gzip.decompress(path.read_bytes())
    stream = gunzip.PipedGzip(path, path.stat().st_size)
    got, sizes = bytearray(), []
    while block := stream.read(3 << 20):
        sizes.append(len(block))
        got += block
    stream.close()
    assert bytes(got) == want
    assert all(n == 3 << 20 for n in sizes[:-1])
