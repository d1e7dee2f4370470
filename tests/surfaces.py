"""The three traces every surface must agree on, and their numbers read from the files.

The bundled ResNet-50 sample (legacy Kineto, 6 steps), HTA ``negative_queue`` rank 0
(A100, 5 steps, the device runs ~160 ms behind its host) and HTA ``nccl_data`` (rank 0
of 2, 3 steps); each step's duration is its ``ProfilerStep#N`` event in the file.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

from tracedata import shared_trace

from sofa_gui.core.samples import demo_trace_path

TRACES = {
    "sample": None,
    "negative_queue": "holistic-trace-analysis/negative_queue_length_values_check/rank0.json.gz",
    "nccl_data": "holistic-trace-analysis/nccl_parser_config/nccl_data.json.gz",
}


def trace_path(key: str) -> Path:
    rel = TRACES[key]
    return Path(demo_trace_path()) if rel is None else Path(shared_trace(rel))


@cache
def file_steps(key: str) -> tuple[tuple[str, int], ...]:
    """(name, duration ns) of each ProfilerStep#N of the host thread, as the file has it."""
    with gzip.open(trace_path(key)) as f:
        events = json.load(f)["traceEvents"]
    steps = {}
    for e in events:
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep#") and e.get("ph") == "X" \
                and e.get("cat") in ("Operator", "user_annotation"):
            steps.setdefault(name, (float(e["ts"]), round(float(e["dur"]) * 1000)))
    return tuple((n, d) for n, (_ts, d) in sorted(steps.items(), key=lambda kv: kv[1][0]))


def median_of(durations: list[int]) -> tuple[int, int]:
    """(index, ns) of the lower-median step, ties by position (the one median)."""
    order = sorted(range(len(durations)), key=lambda i: (durations[i], i))
    k = order[(len(order) - 1) // 2]
    return k, durations[k]
