"""Timeline frame times and memory at 1e5 / 1e6 / 1e7 events (and a real trace).

Each size runs in a fresh process (so RSS is its own).  A frame is a view
change through the widget's public API followed by a timed ``widget.grab()``
of the whole 1280x800 widget (axis, labels, lanes), offscreen, software
rendering.  Columns (ms unless noted):

* ``build s``: ``prepare(trace)`` (LOD index + colours); ``RSS MB``: process
  RSS after everything, ``index MB``: RSS added by prepare + first frames;
* ``first``: the trace's first frame after ``set_trace`` (full zoom-out; the process
  has drawn a tiny trace before, so fonts and glyph caches are warm, as in the app);
* ``full cold``: full zoom-out again after other views (LOD recomputed);
  ``full warm``: the same view repainted;
* ``1% cold``/``1% warm``: a new 1% window, then repainted;
* ``1% pan``: mean of 10 frames each panning the 1% window by 10%;
* ``50% pan``: mean of 10 frames each panning a half-trace window by 10%;
* ``wheel``: mean of 10 frames each zooming in 20% around a point;
* ``blocks``: drawn blocks at full zoom-out / in the 1% window.

Pan and wheel columns are medians over their frames.  A second table gives the
main thread's CPU time for the same frames: on a shared machine other processes
inflate wall time but hardly our CPU time.

Usage: ``python benchmarks/render.py [1e5 1e6 1e7] [--real PATH] [--repeat N]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared" / "traces" / "public"
DEFAULT_REAL = [
    SHARED / "holistic-trace-analysis/trace_diff/control/control.json.gz",
    ROOT / "resources/samples/resnet50_num_workers_0.pt.trace.json.gz",
]
LANES = 50


def synthetic(n: int, lanes: int = LANES, seed: int = 0):
    """``n`` slices over ``lanes`` lanes (5 GPUs): log-normal durations, exponential gaps,
    200 kernel names, every 20th slice a copy."""
    import numpy as np

    from sofa_gui.core.builder import TraceBuilder
    from sofa_gui.core.trace import CopyKind, Kind, LaneKind

    rng = np.random.default_rng(seed)
    b = TraceBuilder("synthetic", "synthetic")
    names = b.intern_many([f"void kernel_{i}<float>(float*)" for i in range(200)])
    copies = b.intern_many(["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"])
    per = n // lanes
    for lane in range(lanes):
        lid = b.lane(("gpu", lane), f"stream {lane}", LaneKind.GPU, f"GPU {lane // 10}",
                     device=lane // 10, stream=lane)
        dur = np.minimum(rng.lognormal(6, 1.5, per), 5e6).astype(np.int64) + 1
        gap = rng.exponential(400, per).astype(np.int64)
        start = 1_700_000_000_000_000_000 + np.cumsum(gap + dur) - dur  # epoch-like clock
        is_copy = rng.random(per) < 0.05
        which = rng.integers(0, 2, per)
        name = np.where(is_copy, copies[which], names[rng.integers(0, 200, per)])
        kind = np.where(is_copy, int(Kind.MEMCPY), int(Kind.KERNEL))
        ck = np.where(is_copy, np.where(which == 0, int(CopyKind.H2D), int(CopyKind.D2H)), 0)
        b.add_slices(start, dur, lid, name, kind=kind, copy_kind=ck)
    return b.finish(correlate=False)


_CPU: list[float] = []


def _frame(app, w) -> float:
    """Wall ms of one grab; its main-thread CPU ms goes to ``_CPU`` (less noisy on a
    shared machine: other processes inflate wall time, not our CPU time)."""
    c = time.thread_time()
    t = time.perf_counter()
    w.grab()
    dt = (time.perf_counter() - t) * 1e3
    _CPU.append((time.thread_time() - c) * 1e3)
    app.processEvents()
    return dt


def measure(trace, label: str, repeat: int) -> dict:
    import psutil
    from PySide6 import QtWidgets

    from sofa_gui.qt.timeline import TimelineWidget, prepare

    proc = psutil.Process()
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    w = TimelineWidget()
    w.resize(1280, 800)
    w.show()
    app.processEvents()
    w.set_trace(synthetic(2_000, seed=1))  # warm the process: fonts, glyph caches, Qt paths
    app.processEvents()
    w.grab()
    w.set_trace(None)
    app.processEvents()
    rss0 = proc.memory_info().rss
    t = time.perf_counter()
    prep = prepare(trace)
    build = time.perf_counter() - t
    w.set_trace(prep)
    t0 = trace.start_ns
    span = trace.end_ns - t0
    row = {"case": label, "events": len(trace.slices) + len(trace.counters),
           "build s": round(build, 2)}
    cpu = {}

    def timed(key, values):
        """Record wall values for ``key`` and the matching CPU times."""
        n = len(values)
        cpu.setdefault(key, []).extend(_CPU[-n:])
        return values

    first = timed("first", [_frame(app, w)])[0]
    blocks_full = w.drawn_block_count()
    full_warm = statistics.mean(timed("full warm", [_frame(app, w) for _ in range(5)]))

    def window(frac, at):
        a = t0 + int(span * at)
        w.zoom_to(a, a + int(span * frac))

    cold_full, cold1, warm1, pan1, pan50, wheel = [], [], [], [], [], []
    for r in range(repeat):
        window(0.01, 0.37 + 0.05 * r)
        cold1 += timed("1% cold", [_frame(app, w)])
        blocks_1 = w.drawn_block_count()
        warm1.append(statistics.mean(timed("1% warm", [_frame(app, w) for _ in range(5)])))
        for _ in range(10):
            a, b = w.visible_range()
            w.zoom_to(a + (b - a) // 10, b + (b - a) // 10)
            pan1 += timed("1% pan", [_frame(app, w)])
        window(0.5, 0.1)
        _frame(app, w)
        for _ in range(10):
            a, b = w.visible_range()
            w.zoom_to(a + (b - a) // 10, b + (b - a) // 10)
            pan50 += timed("50% pan", [_frame(app, w)])
        w.reset_zoom()
        cold_full += timed("full cold", [_frame(app, w)])
        for _ in range(10):
            m = w.model
            w.zoom_around(m.x0 + (m.x1 - m.x0) * 0.4, 0.8)
            wheel += timed("wheel", [_frame(app, w)])
    row.update({
        "first": first, "full cold": statistics.median(cold_full), "full warm": full_warm,
        "1% cold": statistics.median(cold1), "1% warm": statistics.median(warm1),
        "1% pan": statistics.median(pan1), "50% pan": statistics.median(pan50),
        "wheel": statistics.median(wheel),
        "cpu": {k: statistics.median(v) for k, v in cpu.items()},
        "blocks": f"{blocks_full} / {blocks_1}",
        "index MB": round((proc.memory_info().rss - rss0) / 2**20),
        "RSS MB": round(proc.memory_info().rss / 2**20),
    })
    w.close()
    return row


def _one(args) -> dict:
    if args.one == "real":
        from sofa_gui.core.importers import load_trace

        trace = load_trace(args.real[0], use_cache=False)
        label = Path(args.real[0]).name
    else:
        trace = synthetic(int(float(args.one)))
        label = f"synthetic {float(args.one):.0e}"
    return measure(trace, label, args.repeat)


FRAMES = ["first", "full cold", "full warm", "1% cold", "1% warm", "1% pan", "50% pan", "wheel"]
COLUMNS = ["case", "events", "build s", *FRAMES, "blocks", "index MB", "RSS MB"]


def _table(rows: list[dict], cpu: bool = False) -> str:
    def cell(r, c):
        v = r.get("cpu", {}).get(c, "") if cpu and c in FRAMES else r.get(c, "")
        return f"{v:.1f}" if isinstance(v, float) else str(v)

    cols = ["case", *FRAMES] if cpu else COLUMNS
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(cell(r, c) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="*", default=["1e5", "1e6", "1e7"])
    ap.add_argument("--real", action="append", help="real trace(s) to add (default: largest)")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(_one(args)))
        return
    jobs = [["--one", s] for s in args.sizes]
    reals = args.real or ([] if args.no_real else [str(p) for p in DEFAULT_REAL if p.exists()])
    jobs += [["--real", r] for r in reals]
    rows = []
    for job in jobs:
        cmd = [sys.executable, __file__, *job, "--repeat", str(args.repeat)]
        if job[0] == "--real":
            cmd += ["--one", "real"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode:
            print(f"{job}: failed\n{res.stderr[-2000:]}", file=sys.stderr)
            continue
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
        print(_table(rows[-1:]).splitlines()[-1], flush=True)
    print("\nwall-clock ms per frame (median; first: one frame; full warm: mean of 5):\n")
    print(_table(rows))
    print("\nmain-thread CPU ms per frame (median), same frames:\n")
    print(_table(rows, cpu=True))


if __name__ == "__main__":
    main()
