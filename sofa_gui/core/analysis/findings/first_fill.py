"""What the warm-up iterations wait for and run once: the main thread's wait for input
beyond a steady step's (a loader's workers starting and filling their prefetch queue, a
pipeline's first pass) and the one-off calls outside the warm-up rows. The start-up
finding tells one-off work from a slow start with them."""

from __future__ import annotations

import numpy as np

from ..host_side import window_of
from .context import Ctx
from .input_removal import workers_behind
from .work import one_off_calls


def worker_fill(ctx: Ctx, warm: np.ndarray, rows: np.ndarray) -> float:
    """ns the warm-up iterations wait for data beyond a steady iteration's wait, when the
    run's DataLoader has workers: their start-up and first prefetch, one-off by nature
    (the same ``__next__`` call as every step, so call counts alone call it a slow start).
    0.0 when the steady steps, too, wait long for the workers: no queue ever fills."""
    if ctx.facts.value("dataloader") != "workers" or workers_behind(ctx):
        return 0.0
    return input_fill(ctx, warm, rows)


def input_fill(ctx: Ctx, warm: np.ndarray, rows: np.ndarray) -> float:
    """ns the warm-up iterations' main thread waits for input beyond a steady one's wait."""
    host = ctx.bd.host
    if host is None or not len(warm) or not len(rows):
        return 0.0
    dl = host.column("data_loading").astype(np.float64)
    return float(np.maximum(dl[warm] - np.median(dl[rows]), 0.0).sum())


def one_off_events(ctx: Ctx) -> np.ndarray:
    """One-off slices outside warm-up rows' excess: all of them when there are no
    iterations, else those outside the warm-up rows (in steady rows or outside every
    iteration)."""
    idx = one_off_calls(ctx)
    if not len(idx) or ctx.bd.whole_trace:
        return idx
    s = ctx.trace.slices
    w = window_of(s.start[idx], ctx.bd.starts, ctx.bd.ends)
    return idx[~np.isin(w, ctx.ph.warmup)]
