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


def best_overlap(ts: np.ndarray, te: np.ndarray, fs: np.ndarray, fe: np.ndarray) -> np.ndarray:
    """Per true step: the best intersection-over-union with any found iteration."""
    if len(fs) == 0:
        return np.zeros(len(ts))
    inter = np.maximum(0, np.minimum(te[:, None], fe[None, :]) - np.maximum(ts[:, None],
                                                                           fs[None, :]))
    union = np.maximum(te[:, None], fe[None, :]) - np.minimum(ts[:, None], fs[None, :])
    return (inter / np.maximum(union, 1)).max(axis=1)
