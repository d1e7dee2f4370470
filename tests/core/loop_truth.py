"""Ground truth of the ``tests/data/torch-loops`` captures and how well iterations match it.

Each capture ``NAME.json.gz`` (ProfilerStep annotations removed) has a sidecar
``NAME.truth.json`` written by ``benchmarks/gen_torch_loops.py`` with the true
step windows (µs on the trace clock) and what the loop did.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

LOOPS_DIR = Path(__file__).resolve().parents[1] / "data" / "torch-loops"
LOOP_NAMES = sorted(p.name[: -len(".truth.json")] for p in LOOPS_DIR.glob("*.truth.json"))


def truth(name: str) -> dict:
    return json.loads((LOOPS_DIR / f"{name}.truth.json").read_text())


def true_windows_ns(t: dict) -> tuple[np.ndarray, np.ndarray]:
    s = np.array([round(x["start_us"] * 1000) for x in t["steps"]], np.int64)
    e = np.array([round(x["end_us"] * 1000) for x in t["steps"]], np.int64)
    return s, e


def busy_overlap(trace, lane: int, ts: np.ndarray, te: np.ndarray, fs: np.ndarray,
                 fe: np.ndarray) -> np.ndarray:
    """Per true step: the best overlap of its *work* with a found iteration's.

    Work is the time the loop's thread spends inside ops (depth 0); overlap is
    work(true & found) / work(true | found). Idle time between two steps (a
    preemption, the profiler's own step call) belongs to either side without
    changing what ran in which step, so it does not count.
    """
    s = trace.slices
    idx = trace.lane_slices(lane)
    idx = idx[s.depth[idx] == 0]
    a, b = np.sort(s.start[idx]), np.sort(s.end[idx])  # disjoint at depth 0: same order
    cum = np.r_[0, np.cumsum(b - a)]

    def work(lo, hi):  # busy ns inside [lo, hi) for arrays lo, hi
        i = np.searchsorted(b, lo, "right")  # first op ending after lo
        j = np.searchsorted(a, hi, "left")  # ops starting before hi
        tot = cum[np.maximum(j, i)] - cum[i]
        head = np.clip(lo - a[np.minimum(i, len(a) - 1)], 0, None) * (i < j)
        tail = np.clip(b[np.maximum(j - 1, 0)] - hi, 0, None) * (j > i)
        return np.maximum(tot - head - tail, 0)

    if len(fs) == 0:
        return np.zeros(len(ts))
    lo = np.maximum(ts[:, None], fs[None, :])
    hi = np.minimum(te[:, None], fe[None, :])
    inter = np.where(hi > lo, work(lo.ravel(), hi.ravel()).reshape(lo.shape), 0)
    wt = work(ts, te)[:, None]
    wf = work(fs, fe)[None, :]
    return (inter / np.maximum(wt + wf - inter, 1)).max(axis=1)
