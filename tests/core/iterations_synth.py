"""Synthetic training-like event streams and traces for iteration-detection tests and benchmarks.

A "step" is a fixed word of kernel symbols (Zipf-distributed, like real kernel
mixes); the stream repeats it with optional warm-up, edits (substitutions,
insertions, deletions) and a periodic extra (logging every m steps). Traces put
the symbols on one GPU stream and, optionally, the host side: a data-loader
call, launch calls linked by correlation id, and ProfilerStep annotations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.trace import CopyKind, Kind, LaneKind, Trace

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@dataclass
class Stream:
    seq: np.ndarray  # int64 symbol per event (>= 1)
    steps: np.ndarray  # int64 index of each step's first event
    step_len: int  # symbols per clean step


def zipf_word(rng, length: int, alphabet: int) -> np.ndarray:
    """A step's kernel sequence: a few kernels are common, most are rare."""
    p = 1.0 / np.arange(1, alphabet + 1) ** 1.1
    return rng.choice(alphabet, size=length, p=p / p.sum()).astype(np.int64) + 2


def training_stream(rng, period: int, steps: int, alphabet: int = 200, *, warmup: int = 0,
                    noise: float = 0.0, extra_every: int = 0, extra_len: int = 0,
                    word: np.ndarray | None = None) -> Stream:
    """``steps`` repeats of one word (symbol 1 first: the input copy), with noise."""
    if word is None:
        word = zipf_word(rng, period - 1, alphabet)
        word = np.r_[1, word]
    extra = zipf_word(rng, max(extra_len, 1), alphabet) + alphabet
    parts = [rng.integers(2, alphabet + 2, warmup)] if warmup else []
    firsts = []
    pos = warmup
    for k in range(steps):
        step = _edit(rng, word, noise, alphabet) if noise else word
        firsts.append(pos)
        parts.append(step)
        pos += len(step)
        if extra_every and (k + 1) % extra_every == 0 and k + 1 < steps:
            parts.append(extra)
            pos += len(extra)
    return Stream(np.concatenate(parts).astype(np.int64), np.array(firsts, np.int64), len(word))


def _edit(rng, word: np.ndarray, rate: float, alphabet: int) -> np.ndarray:
    """Substitute, delete and insert symbols at ``rate`` in total (never the first)."""
    out = word.copy()
    r = rng.random(len(out))
    r[0] = 1.0
    sub = r < rate / 3
    out[sub] = rng.integers(2, alphabet + 2, int(sub.sum()))
    keep = ~((r >= rate / 3) & (r < 2 * rate / 3))
    ins = np.flatnonzero((r >= 2 * rate / 3) & (r < rate))
    out = np.insert(out, ins, rng.integers(2, alphabet + 2, len(ins)))
    keep = np.insert(keep, ins, True)
    return out[keep]


def random_stream(rng, n: int, alphabet: int) -> np.ndarray:
    return rng.integers(2, alphabet + 2, n).astype(np.int64)


def device_trace(seq: np.ndarray, steps: np.ndarray | None = None, *, event_ns: int = 5_000,
                 step_pause_ns: int = 200_000, host: bool = False, loader: bool = False,
                 annotate: bool = False, optimizer_tail: int = 0, names: dict | None = None,
                 rng=None) -> Trace:
    """One GPU stream running ``seq`` back to back, pausing before each step.

    ``host`` adds a main thread that launches every event (cudaLaunchKernel in an
    aten op, linked by correlation id); ``loader`` a data-loader call before each
    step's launches; ``annotate`` ProfilerStep#N ranges; ``optimizer_tail`` wraps
    the last that many launches of each step in ``Optimizer.step#SGD.step``.
    """
    n = len(seq)
    steps = np.zeros(0, np.int64) if steps is None else np.asarray(steps, np.int64)
    is_first = np.zeros(n, bool)
    is_first[steps[steps < n]] = True
    dur = np.full(n, event_ns, np.int64)
    if rng is not None:
        dur = (dur * rng.uniform(0.5, 1.5, n)).astype(np.int64)
    b = TraceBuilder("synthetic", "synthetic")
    gpu = b.lane(("gpu", 0, 7), "stream 7", LaneKind.GPU, "GPU 0", device=0, stream=7)
    label = names or {}
    text = [label.get(int(x), "Memcpy HtoD (Pageable -> Device)" if x == 1 else f"kernel_{x}")
            for x in np.unique(seq)]
    name_of = dict(zip(np.unique(seq).tolist(), b.intern_many(text).tolist()))
    name_ids = np.array([name_of[int(x)] for x in seq], np.int32)
    kind = np.where(seq == 1, int(Kind.MEMCPY), int(Kind.KERNEL)).astype(np.int8)
    copy = np.where(seq == 1, int(CopyKind.H2D), 0).astype(np.int8)
    if not host:
        gap = np.where(is_first, step_pause_ns, 1_000)
        start = np.cumsum(gap + np.r_[0, dur[:-1]])
        b.add_slices(start, dur, gpu, name_ids, kind=kind, device=0, stream=7, copy_kind=copy)
        return b.finish()
    return _with_host(b, gpu, seq, steps, is_first, dur, name_ids, kind, copy, step_pause_ns,
                      loader, annotate, optimizer_tail)


def _with_host(b, gpu, seq, steps, is_first, dur, name_ids, kind, copy, pause, loader,
               annotate, optimizer_tail) -> Trace:
    n = len(seq)
    cpu = b.lane(("cpu", 1, 1), "thread 1", LaneKind.CPU, "process 1", pid=1, tid=1)
    launch_gap = np.where(is_first, pause, 2_000)
    launch = np.cumsum(launch_gap + 3_000) - 3_000  # runtime call starts
    op_start, op_dur = launch - 500, np.full(n, 4_000)
    b.add_slices(op_start, op_dur, cpu, [f"aten::op_{x % 7}" for x in seq], kind=Kind.CPU_OP)
    corr = np.arange(n, dtype=np.int64) + 1
    b.add_slices(launch, 3_000, cpu, ["cudaLaunchKernel"] * n, kind=Kind.RUNTIME,
                 correlation=corr)
    gstart = np.empty(n, np.int64)
    t = 0
    ready = launch + 3_000 + 1_000
    for i in range(n):
        t = max(t, int(ready[i]))
        gstart[i] = t
        t += int(dur[i])
    b.add_slices(gstart, dur, gpu, name_ids, kind=kind, device=0, stream=7, copy_kind=copy,
                 correlation=corr)
    first = np.flatnonzero(is_first)
    if loader:
        b.add_slices(launch[first] - pause + 1_000, pause - 3_000, cpu, [LOADER] * len(first),
                     kind=Kind.CPU_OP)
    if annotate:
        ann_start = launch[first] - pause + 500
        ann_end = np.r_[ann_start[1:], gstart[-1] + dur[-1]]
        b.add_slices(ann_start, ann_end - ann_start, cpu,
                     [f"ProfilerStep#{k + 5}" for k in range(len(first))], kind=Kind.ANNOTATION)
    if optimizer_tail:
        last = np.r_[first[1:], n] - 1
        lo = np.maximum(last - optimizer_tail + 1, first)
        b.add_slices(op_start[lo] - 100, op_start[last] + 4_200 - op_start[lo], cpu,
                     ["Optimizer.step#SGD.step"] * len(last), kind=Kind.ANNOTATION)
    return b.finish()
