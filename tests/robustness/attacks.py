"""Hostile inputs past the mutation fuzzer (issue 15): small files with a huge cost.

Each ``make_*`` writes one input into a folder and returns its path. The tests in
``tests/robustness`` use small sizes; ``benchmarks/fuzz.py --attacks`` runs the same
families at full size in child processes and prints time, peak memory and outcome.
"""

from __future__ import annotations

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
