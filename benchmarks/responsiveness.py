"""GUI responsiveness while opening a 1e6-event Kineto trace: the main thread's heartbeat.

Generates a synthetic PyTorch-profiler (Kineto) JSON with about 1e6 events
(ProfilerStep annotations, CPU ops, cudaLaunchKernel + kernels linked by
correlation ids, memcpy), opens it in the real main window (offscreen), and
records the gaps of a 5 ms heartbeat ``QTimer`` on the GUI thread from the
open request until the analysis is done. Each mode runs in a fresh process with
its own empty cache:

* ``thread``  -- decode on a worker thread (the GIL is held by the JSON decoder);
* ``process`` -- decode in a spawned child that writes the Arrow cache, then
  memory-map it (what the app does for big files, ``load_mode="auto"``); the
  child then analyses the trace while the GUI process indexes the timeline;
* ``cached``  -- reopen: the trace cache and the analysis cache are already there.

Columns: the longest heartbeat gap (ms) and the main thread's own CPU time during
it (a gap with little CPU is time spent waiting: for the GIL, or for a core on a
busy machine), the most main-thread CPU between two beats, p99 gap, gaps over
100 ms, the load average during the run, and seconds until the trace, the
iterations and the findings are shown. The goal is max gap <= 100 ms.

The heartbeat goes on for 0.5 s after the analysis is done, so the panels' updates
and repaints that follow it count as part of the open. ``--tiles 13`` opens the
bundled ResNet-50 sample tiled 13 times (984,094 real-content events) instead.

Usage: ``python benchmarks/responsiveness.py [--events 1000000] [--modes thread process cached]
[--repeat N] [--tiles N]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEARTBEAT_MS = 5
TAIL_MS = 500  # heartbeat kept after the analysis is done


def generate(path: Path, n_events: int, seed: int = 0) -> int:
    """Write a Kineto-style trace of about ``n_events`` events; returns the count."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    ops = [f"aten::op_{k}" for k in range(300)]
    kernels = [f"void at::native::kernel_{k}<float, 4>(float*, int)" for k in range(400)]
    per_step = 2000  # events per iteration: 1 step + 499 (op, launch, kernel) + memcpy/extra
    steps = max(n_events // per_step, 1)
    events: list[dict] = []
    t, corr = 1_000_000.0, 1
    for s in range(steps):
        step_start = t
        t += 2000.0  # data loading
        events.append({"ph": "X", "cat": "cpu_op", "name": "enumerate(DataLoader)#_Iter.__next__",
                       "pid": 1, "tid": 1, "ts": step_start + 1, "dur": 1990.0, "args": {}})
        gpu_t = t + 50
        for _k in range((per_step - 2) // 4):
            op, ker = rng.integers(len(ops)), rng.integers(len(kernels))
            d = float(rng.uniform(5, 30))
            events.append({"ph": "X", "cat": "cpu_op", "name": ops[op], "pid": 1, "tid": 1,
                           "ts": t, "dur": d, "args": {"External id": corr}})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 1, "tid": 1, "ts": t + 1, "dur": d - 2,
                           "args": {"correlation": corr, "External id": corr}})
            kd = float(rng.uniform(3, 40))
            gpu_t = max(gpu_t, t + 5)
            events.append({"ph": "X", "cat": "kernel", "name": kernels[ker], "pid": 0, "tid": 7,
                           "ts": gpu_t, "dur": kd,
                           "args": {"device": 0, "stream": 7, "correlation": corr,
                                    "grid": [128, 1, 1], "block": [256, 1, 1]}})
            events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]",
                           "pid": 1, "tid": 1, "ts": t + 2, "s": "t",
                           "args": {"Bytes": 4096, "Total Allocated": 1 << 20}})
            gpu_t += kd
            t += d + 1
            corr += 1
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                       "pid": 1, "tid": 1, "ts": step_start, "dur": t - step_start + 1,
                       "args": {}})
        t += 10
    meta = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}],
           "traceEvents": meta + events}
    path.write_bytes(orjson.dumps(doc))
    return len(events)


def run_one(path: Path, mode: str) -> dict:
    """Open ``path`` in a main window and measure the heartbeat (in this process)."""
    from PySide6.QtCore import QElapsedTimer, QSettings, QTimer

    from sofa_gui.qt.app import freeze_startup_objects
    from sofa_gui.qt.application import make_app
    from sofa_gui.qt.main_window import MainWindow

    app = make_app()
    tmp = tempfile.mkdtemp(prefix="sofa-bench-")
    win = MainWindow(QSettings(os.path.join(tmp, "s.ini"), QSettings.Format.IniFormat),
                     restore_state=False)
    win.session.load_mode = "thread" if mode == "thread" else "auto"
    win.resize(1600, 1000)
    win.show()
    app.processEvents()
    freeze_startup_objects()  # as run_window does
    clock = QElapsedTimer()
    beats: list[int] = []
    marks: dict[str, float] = {}
    s = win.session

    def mark(name):
        marks.setdefault(name, clock.nsecsElapsed() / 1e9)

    s.trace_changed.connect(lambda: mark("trace"))
    s.on_analysis("iterations", lambda: mark("iterations"))
    s.on_analysis("findings", lambda: mark("findings"))
    # keep beating a while after the analysis: the panels' updates and the repaint that
    # follow it are part of the open
    s.analysis_finished.connect(lambda: (mark("done"), QTimer.singleShot(TAIL_MS, app.quit)))
    s.load_failed.connect(lambda p, r: (marks.setdefault("error", r), app.quit()))
    s.job_crashed.connect(lambda m: (marks.setdefault("error", m), app.quit()))
    cpu: list[float] = []
    hb = QTimer()
    hb.setInterval(HEARTBEAT_MS)
    hb.timeout.connect(lambda: (beats.append(clock.nsecsElapsed()), cpu.append(time.thread_time())))
    load0 = os.getloadavg()[0]
    clock.start()
    cpu0 = time.thread_time()
    hb.start()
    win.open_path(path)
    app.exec()
    hb.stop()
    beats = [0] + beats + [clock.nsecsElapsed()]
    cpu = [cpu0] + cpu + [time.thread_time()]
    pairs = sorted(((b - a) / 1e6, (d - c) * 1e3, a / 1e9)
                   for a, b, c, d in zip(beats, beats[1:], cpu, cpu[1:]))
    gaps = [g for g, _c, _t in pairs]
    out = {"mode": mode, "max_gap_ms": gaps[-1], "p99_gap_ms": gaps[int(0.99 * (len(gaps) - 1))],
           "gaps_over_100ms": sum(g > 100 for g in gaps),
           "max_gap_main_cpu_ms": pairs[-1][1], "max_main_cpu_ms": max(c for _g, c, _t in pairs),
           "slow_gaps": [(round(t, 2), round(g)) for g, _c, t in pairs if g > 100],
           "load": (load0 + os.getloadavg()[0]) / 2,
           "events": s.trace.events if s.trace is not None else 0,
           **{f"t_{k}": v for k, v in marks.items()}}
    win.session.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e6)
    ap.add_argument("--modes", nargs="+", default=["thread", "process", "cached"])
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode (one row each)")
    ap.add_argument("--tiles", type=int, default=0,
                    help="open the bundled sample tiled N times (see ingest.py) instead")
    ap.add_argument("--child", nargs=2, metavar=("PATH", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(Path(args.child[0]), args.child[1])))
        return
    work = Path(tempfile.mkdtemp(prefix="sofa-resp-"))
    t0 = time.perf_counter()
    if args.tiles:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from ingest import write_tiled

        trace = work / f"resnet50_x{args.tiles}.pt.trace.json"
        n = write_tiled(trace, args.tiles)
    else:
        trace = work / "synthetic_1e6.pt.trace.json"
        n = generate(trace, int(args.events))
    print(f"generated {n:,} events, {trace.stat().st_size / 1e6:.0f} MB JSON "
          f"in {time.perf_counter() - t0:.1f} s")
    rows = []
    for mode in [m for m in args.modes for _ in range(args.repeat)]:
        cache = work / ("cache-shared" if mode in ("process", "cached") else f"cache-{mode}")
        if mode != "cached" and cache.exists():
            import shutil

            shutil.rmtree(cache)
        env = dict(os.environ, SOFA_GUI_CACHE_DIR=str(cache))
        res = subprocess.run([sys.executable, __file__, "--child", str(trace), mode], env=env,
                             capture_output=True, text=True, check=False)
        lines = [x for x in res.stdout.splitlines() if x.startswith("{")]
        if not lines:
            print(f"{mode}: failed\n{res.stderr[-2000:]}")
            continue
        rows.append(json.loads(lines[-1]))
    print()
    print("| mode | max gap ms | its main-thread CPU ms | max main CPU between beats ms |"
          " p99 gap ms | gaps > 100 ms | load avg | trace shown s | iterations s | findings s |"
          " all done s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['max_gap_ms']:.0f} | {r['max_gap_main_cpu_ms']:.0f} | "
              f"{r['max_main_cpu_ms']:.0f} | {r['p99_gap_ms']:.0f} | "
              f"{r['gaps_over_100ms']} | {r['load']:.1f} | {r.get('t_trace', float('nan')):.2f} | "
              f"{r.get('t_iterations', float('nan')):.2f} | "
              f"{r.get('t_findings', float('nan')):.2f} | "
              f"{r.get('t_done', float('nan')):.2f} |" + (f" error: {r['error']}"
                                                               if "error" in r else ""))
    print()
    for r in rows:
        print(f"{r['mode']}: gaps over 100 ms at (s, ms): {r['slow_gaps']}; trace shown at "
              f"{r.get('t_trace', 0):.2f} s")


if __name__ == "__main__":
    main()
