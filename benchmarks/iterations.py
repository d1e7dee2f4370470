"""Iteration detection speed on synthetic device streams, 1e4 .. 1e7 events.

Each stream repeats one step (Zipf-distributed kernel symbols over a realistic
alphabet) with 0.5% edits, a warm-up and a logging extra every 10 steps. The
table shows per-stage wall times (``--cpu``: process times) of ``pattern_iterations``
(marks: the landmark check and the per-iteration marks), the wall and CPU totals,
and whether every true step start was found (within 2 events). Goal: 1e6 events
in under 1 s.

    python benchmarks/iterations.py            # 1e4 .. 1e6
    python benchmarks/iterations.py --max 1e7  # adds 1e7 (needs ~3 GB RAM)
    python benchmarks/iterations.py --periods  # 1e6 events, periods 2 .. 10,000
    python benchmarks/iterations.py --min 1e6 --cpu --repeat 3  # 1e6 rows, CPU, best of 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "core"))

from iterations_synth import device_trace, training_stream  # noqa: E402

from sofa_gui.core.analysis.iterations.cut import cut_iterations  # noqa: E402
from sofa_gui.core.analysis.iterations.landmarks import Landmarks  # noqa: E402
from sofa_gui.core.analysis.iterations.marks import mark_iterations  # noqa: E402
from sofa_gui.core.analysis.iterations.pattern import choose_period, find_anchors  # noqa: E402
from sofa_gui.core.analysis.iterations.steps import landmark_iterations  # noqa: E402
from sofa_gui.core.analysis.iterations.stream import pick_stream  # noqa: E402
from sofa_gui.core.analysis.iterations.symbols import reduce_symbols, stream_keys  # noqa: E402
from sofa_gui.core.analysis.results import Iterations  # noqa: E402

#: Periods for ``--periods`` (short periods mean many occurrences, the costly case).
PERIODS = (2, 3, 5, 10, 30, 100, 1_000, 10_000)

CASES = [  # (events, alphabet, period)
    (10_000, 200, 100),
    (100_000, 500, 1_000),
    (1_000_000, 1_000, 2_000),
    (1_000_000, 2_000, 5_000),
    (10_000_000, 2_000, 5_000),
]


def run_case(n: int, alphabet: int, period: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    steps = max(2, n // period)
    st = training_stream(rng, period, steps, alphabet, warmup=period // 3, noise=0.005,
                         extra_every=10, extra_len=period // 50)
    trace = device_trace(st.seq, st.steps)
    s = trace.slices
    clock = Stopwatch()
    stream = pick_stream(trace)
    keys, labels = stream_keys(trace.names, s.name[stream.index], s.kind[stream.index],
                               s.copy_kind[stream.index])
    symbols = reduce_symbols(keys, labels)
    clock.lap("symbols")
    p = choose_period(symbols.seq)
    clock.lap("suffix")
    anchors = find_anchors(symbols.seq, p.length)
    clock.lap("anchors")
    cut = cut_iterations(trace, stream, symbols, anchors)
    clock.lap("cut")
    lm = Landmarks.of(trace)  # the landmark check and the per-iteration marks
    landmark_iterations(trace, lm)
    if cut is not None:
        mark_iterations(trace, Iterations("pattern", "", cut.starts, cut.ends, 1.0), lm)
    clock.lap("marks")
    truth = s.start[st.steps]
    found = cut.starts if cut is not None else np.zeros(0, np.int64)
    near = np.abs(found[np.clip(np.searchsorted(found, truth), 0, len(found) - 1)] - truth)
    return dict(n=len(st.seq), alphabet=alphabet, period=period, steps=steps,
                found=len(found), ok=bool(np.all(near <= 2 * 6_000)), wall=clock.wall,
                cpu=clock.cpu)


class Stopwatch:
    """Wall and process (CPU) seconds per stage: on a shared, loaded machine the CPU
    time is the steadier figure (wall time includes waiting for a core)."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._w, self._c = time.perf_counter(), time.process_time()

    def lap(self, stage: str) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.wall[stage], self.cpu[stage] = w - self._w, c - self._c
        self._w, self._c = w, c


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=float, default=1e6, help="largest stream size (events)")
    ap.add_argument("--periods", action="store_true",
                    help=f"instead: --events events with each period of {PERIODS}")
    ap.add_argument("--events", type=float, default=1e6, help="stream size for --periods")
    ap.add_argument("--cpu", action="store_true",
                    help="per-stage columns in CPU (process_time) seconds instead of wall")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case this many times and show each stage's fastest")
    ap.add_argument("--min", type=float, default=0, help="smallest stream size (events)")
    args = ap.parse_args(argv)
    cases = [(int(args.events), max(2, min(2_000, p)), p) for p in PERIODS] \
        if args.periods else [c for c in CASES if args.min <= c[0] <= args.max]
    stages = ("symbols", "suffix", "anchors", "cut", "marks")
    head = (f"{'events':>10} {'alph':>5} {'period':>6} {'steps':>6} {'found':>6} {'ok':>3} "
            + " ".join(f"{x:>8}" for x in stages)
            + f" {'total s':>8} {'cpu s':>8} {'µs/event':>8}")
    print(f"per stage: {'CPU (process_time)' if args.cpu else 'wall'} seconds")
    print(head)
    print("-" * len(head))
    for n, alphabet, period in cases:
        r = run_case(n, alphabet, period)
        for _ in range(args.repeat - 1):  # a loaded machine: keep each stage's fastest run
            again = run_case(n, alphabet, period)
            for clock in ("wall", "cpu"):
                r[clock] = {k: min(v, again[clock][k]) for k, v in r[clock].items()}
        per = r["cpu"] if args.cpu else r["wall"]
        total, cpu = sum(r["wall"].values()), sum(r["cpu"].values())
        print(f"{r['n']:>10,} {r['alphabet']:>5} {r['period']:>6} {r['steps']:>6} "
              f"{r['found']:>6} {'yes' if r['ok'] else 'NO':>3} "
              + " ".join(f"{per[x]:>8.3f}" for x in stages)
              + f" {total:>8.3f} {cpu:>8.3f} {1e6 * total / r['n']:>8.2f}", flush=True)

if __name__ == "__main__":
    main()
