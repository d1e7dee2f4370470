"""Hostile inputs past the mutation fuzzer (issue 15): small files with a huge cost.

Each ``make_*`` writes one input into a folder and returns its path. The tests in
``tests/robustness`` use small sizes; ``benchmarks/fuzz.py --attacks`` runs the same
families at full size in child processes and prints time, peak memory and outcome.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def _event(name: str, ts: float, tid: int, dur: float = 1.0, **extra) -> dict:
    return {"ph": "X", "name": name, "cat": "cpu_op", "ts": ts, "dur": dur, "pid": 1,
            "tid": tid, **extra}


def many_threads(folder: Path, threads: int, per_thread: int = 2) -> Path:
    """A Chrome trace with ``threads`` lanes (load time was quadratic in them)."""
    evs = [_event("op", t * 10 + i * 3, t, 2) for t in range(threads) for i in range(per_thread)]
    path = folder / f"threads-{threads}.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


def _gzip_stream(path: Path, parts) -> Path:
    """Write ``parts`` (bytes, or (byte, count) runs of one repeated byte) gzip-compressed."""
    with gzip.open(path, "wb", compresslevel=9) as f:
        for part in parts:
            if isinstance(part, tuple):
                byte, count = part
                block = byte * min(count, 1 << 20)
                for _ in range(count // len(block)):
                    f.write(block)
                f.write(byte * (count % len(block)))
            else:
                f.write(part)
    return path


ONE_EVENT = json.dumps(_event("op", 1.0, 1)).encode()


def trailing_blank_gzip(folder: Path, blank: int, where: str = "after") -> Path:
    """One event then ``blank`` bytes of spaces (after the document, or inside the array)."""
    path = folder / f"blank-{where}-{blank}.json.gz"
    if where == "after":
        parts = [b'{"traceEvents": [', ONE_EVENT, b"]}", (b" ", blank)]
    elif where == "array":
        parts = [b'{"traceEvents": [', ONE_EVENT, b",", (b" ", blank), ONE_EVENT, b"]}"]
    else:  # before the events array, between header keys
        parts = [b'{"a": 1,', (b" ", blank), b'"traceEvents": [', ONE_EVENT, b"]}"]
    return _gzip_stream(path, parts)


def huge_header_value(folder: Path, size: int, after: bool = False) -> Path:
    """A top-level key (before or after the events) holding a ``size``-byte string."""
    path = folder / f"header-{size}-{after}.json.gz"
    value = [b'"big": "', (b"x", size), b'"']
    if after:
        parts = [b'{"traceEvents": [', ONE_EVENT, b"], ", *value, b"}"]
    else:
        parts = [b"{", *value, b', "traceEvents": [', ONE_EVENT, b"]}"]
    return _gzip_stream(path, parts)


def nested_args(folder: Path, depth: int, events: int = 100) -> Path:
    """``events`` events, one of whose args nest ``depth`` levels deep."""
    evs = [_event("op", i * 10.0, 1, 2.0) for i in range(events)]
    deep = "[" * depth + "1" + "]" * depth
    text = json.dumps({"traceEvents": evs})
    bad = json.dumps(_event("deep", 5.0, 1, 1.0))[:-1] + ', "args": {"x": ' + deep + "}}"
    path = folder / f"nested-{depth}.json"
    path.write_text(text.replace('"traceEvents": [', '"traceEvents": [' + bad + ", ", 1))
    return path
