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
  child then analyzes the trace while the GUI process indexes the timeline;
* ``cached``  -- reopen: the trace cache and the analysis cache are already there;
* ``cli``     -- the reference without a GUI: ``sofa-gui analyze --json --no-cache``
  (its wall and CPU seconds fill the "analysis done" and CPU columns).

Columns: the longest heartbeat gap (ms) and the main thread's own CPU time during
it (a gap with little CPU is time spent waiting: for the GIL, or for a core on a
busy machine), the most main-thread CPU between two beats, p99 gap, gaps over
100 ms, the load average during the run, seconds until the trace, the iterations
and the findings are shown, until the analysis is done and until every panel is
built (some are built a few widgets per event-loop turn, see sofa_gui/qt/sliced.py),
and the CPU seconds of the app and its loader children together (a figure that a busy
machine inflates far less than wall time; it includes the spare loader the app starts
for the next open, ~0.6 s). The goal is max gap <= 100 ms.

Below the table, each of the longest gaps is listed with what the GUI thread was
seen running during it (a watchdog thread samples its Python stack every 5 ms; a
stack that is only the benchmark's own frame is Qt's C++ code or a wait for the
GIL); ``--phases`` also lists when each progress message first showed.

The heartbeat goes on for 0.5 s after every panel is built, so the repaints that
follow count as part of the open. ``--tiles 13`` opens the bundled ResNet-50 sample
tiled 13 times (984,094 real-content events) instead; ``--trace PATH`` opens an
existing file (e.g. one ``ingest.py`` wrote) without generating anything.

Usage: ``python benchmarks/responsiveness.py [--events 1000000] [--modes thread process cached]
[--repeat N] [--tiles N | --trace PATH] [--phases]``; modes also ``cli``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


class Blame:
    """A watchdog thread naming what the GUI thread runs while a heartbeat is late.

    Every 5 ms it samples the main thread's Python stack (outermost and innermost
    ``sofa_gui`` frames) and, on Linux, its state in the kernel (``[D fdatasync]``:
    blocked in that system call; ``[S futex]``: waiting for the GIL or a lock; nothing
    when it is on a CPU or waiting for one). A heartbeat gap over ``late_ms`` is
    reported with the stacks seen during it, most seen first: which slot stalls, not
    just how long. A stack that is only the benchmark's own frame means Qt's C++ code
    (layout, painting, saving settings) or a wait for the GIL.
    """

    def __init__(self, late_ms: float = 60.0):
        import threading

        self.late = late_ms / 1e3
        self.last = time.perf_counter()
        self.seen: list[str] = []
        self.gaps: list[tuple[float, float, list]] = []  # (at s, ms, [(n, stack)])
        self._t0 = self.last
        self._main = threading.get_ident()
        self._task = f"/proc/self/task/{threading.get_native_id()}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def beat(self) -> None:
        now = time.perf_counter()
        if now - self.last > self.late and self.seen:
            from collections import Counter

            top = Counter(self.seen).most_common(3)
            self.gaps.append((round(self.last - self._t0, 2), round((now - self.last) * 1e3),
                              [(n * 5, k) for k, n in top]))
        self.last, self.seen = now, []

    def start(self) -> None:
        self._t0 = self.last = time.perf_counter()
        self._thread.start()

    def stop(self) -> list:
        self._stop.set()
        self._thread.join(1.0)
        return sorted(self.gaps, key=lambda g: -g[1])[:6]

    def _watch(self) -> None:
        while not self._stop.wait(0.005):
            if time.perf_counter() - self.last > 0.02:
                where = _where(sys._current_frames().get(self._main))
                self.seen.append(where + _kernel_state(self._task))


#: x86-64 numbers of the system calls a stalled GUI thread was seen in.
_SYSCALLS = {0: "read", 1: "write", 7: "poll", 9: "mmap", 11: "munmap", 74: "fsync",
             75: "fdatasync", 202: "futex", 232: "epoll_wait", 271: "ppoll"}


def _kernel_state(task: str) -> str:
    """' [D fdatasync]' when the thread sleeps in the kernel, '' when it runs or can run."""
    try:
        with open(f"{task}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state == "R":
            return ""
        with open(f"{task}/syscall") as f:
            call = f.read().split()[0]
    except (OSError, IndexError):
        return ""
    if not call.isdigit():  # "running": in the kernel but in no system call (a page fault)
        return f" [{state}]"
    return f" [{state} {_SYSCALLS.get(int(call), f'syscall {call}')}]"


def _where(frame) -> str:
    """'outermost sofa_gui function > ... > innermost function' of a stack."""
    names = []
    while frame is not None:
        code = frame.f_code
        if "sofa_gui" in code.co_filename or not names:
            names.append(f"{Path(code.co_filename).stem}.{code.co_name}")
        frame = frame.f_back
    if len(names) > 3:
        names = [names[-1], "…", names[1], names[0]]
    return " > ".join(reversed(names)) if names else "?"


def run_one(path: Path, mode: str) -> dict:
    """Open ``path`` in a main window and measure the heartbeat (in this process)."""
    from PySide6.QtCore import QElapsedTimer, QSettings, QTimer

    from sofa_gui.app.background_load import prestart
    from sofa_gui.qt import sliced
    from sofa_gui.qt.app import freeze_startup_objects
    from sofa_gui.qt.application import make_app
    from sofa_gui.qt.main_window import MainWindow

    prestart()  # as run_window does: a loader child starts while the window is built
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

    phases: list = []  # (s, progress message) each time the message changes

    def phase(_f, msg):
        if not phases or phases[-1][1] != msg:
            phases.append((round(clock.nsecsElapsed() / 1e9, 2), msg))

    s.progress.connect(phase)
    s.trace_changed.connect(lambda: mark("trace"))
    s.on_analysis("iterations", lambda: mark("iterations"))
    s.on_analysis("findings", lambda: mark("findings"))
    # keep beating a while after the analysis: the panels' updates and the repaint that
    # follow it are part of the open
    s.analysis_finished.connect(lambda: mark("done"))
    s.load_failed.connect(lambda p, r: (marks.setdefault("error", r), app.quit()))
    s.job_crashed.connect(lambda m: (marks.setdefault("error", m), app.quit()))
    cpu: list[float] = []
    ended: list = []  # clock and main-thread CPU when the measure ended
    blame = Blame()
    hb = QTimer()
    hb.setInterval(HEARTBEAT_MS)

    def heartbeat():
        beats.append(clock.nsecsElapsed())
        cpu.append(time.thread_time())
        blame.beat()
        if "done" in marks and "panels" not in marks and not sliced.pending():
            mark("panels")  # every panel built, including those built in slices
            QTimer.singleShot(TAIL_MS, end)

    def end():  # the measure ends here: quitting closes the window, which saves its state
        hb.stop()
        ended.extend([clock.nsecsElapsed(), time.thread_time()])
        app.quit()

    hb.timeout.connect(heartbeat)
    load0 = os.getloadavg()[0]
    clock.start()
    cpu0 = time.thread_time()
    hb.start()
    blame.start()
    win.open_path(path)
    app.exec()
    hb.stop()
    stalls = blame.stop()
    if not ended:  # quit on an error
        ended.extend([clock.nsecsElapsed(), time.thread_time()])
    beats = [0] + beats + ended[:1]
    cpu = [cpu0] + cpu + ended[1:]
    pairs = sorted(((b - a) / 1e6, (d - c) * 1e3, a / 1e9)
                   for a, b, c, d in zip(beats, beats[1:], cpu, cpu[1:]))
    gaps = [g for g, _c, _t in pairs]
    out = {"mode": mode, "max_gap_ms": gaps[-1], "p99_gap_ms": gaps[int(0.99 * (len(gaps) - 1))],
           "gaps_over_100ms": sum(g > 100 for g in gaps),
           "max_gap_main_cpu_ms": pairs[-1][1], "max_main_cpu_ms": max(c for _g, c, _t in pairs),
           "slow_gaps": [(round(t, 2), round(g)) for g, _c, t in pairs if g > 100],
           "stalls": stalls, "phases": phases, "cpu_s": _cpu_seconds(),
           "load": (load0 + os.getloadavg()[0]) / 2,
           "events": s.trace.events if s.trace is not None else 0,
           **{f"t_{k}": v for k, v in marks.items()}}
    win.session.shutdown()
    return out


def installed_env() -> dict:
    """The timed processes' environment, with bytecode as a pip-installed package has it
    (pip compiles at install): this checkout's modules compiled once here, and
    ``PYTHONDONTWRITEBYTECODE`` (set on this machine) dropped, which would otherwise make
    every child compile ~150 modules from source (~0.3 s of CPU per start)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "sofa_gui")],
                   env=env, capture_output=True, check=False)
    return env


def run_cli(path: Path, cache: Path, base_env: dict | None = None) -> dict:
    """The reference: ``sofa-gui analyze --json --no-cache`` (decode + analysis, no GUI)."""
    import resource

    shutil.rmtree(cache, ignore_errors=True)
    env = dict(base_env or os.environ, SOFA_GUI_CACHE_DIR=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", "--json", "--no-cache",
                          str(path)], env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    nan = float("nan")
    row = {"mode": "cli", "max_gap_ms": nan, "max_gap_main_cpu_ms": nan, "max_main_cpu_ms": nan,
           "p99_gap_ms": nan, "gaps_over_100ms": "-", "load": os.getloadavg()[0],
           "t_done": wall, "t_panels": wall, "stalls": [], "phases": [], "slow_gaps": [],
           "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}
    if res.returncode:
        row["error"] = res.stderr.decode(errors="replace")[-300:]
    return row


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the loader)."""
    import resource

    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e6)
    ap.add_argument("--modes", nargs="+", default=["thread", "process", "cached"])
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode (one row each)")
    ap.add_argument("--tiles", type=int, default=0,
                    help="open the bundled sample tiled N times (see ingest.py) instead")
    ap.add_argument("--trace", type=Path,
                    help="open this existing trace instead of generating one")
    ap.add_argument("--phases", action="store_true",
                    help="print when each progress message first showed")
    ap.add_argument("--child", nargs=2, metavar=("PATH", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(Path(args.child[0]), args.child[1])))
        return
    work = Path(tempfile.mkdtemp(prefix="sofa-resp-"))
    t0 = time.perf_counter()
    if args.trace:
        trace, n = args.trace, 0
    elif args.tiles:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from ingest import write_tiled

        trace = work / f"resnet50_x{args.tiles}.pt.trace.json"
        n = write_tiled(trace, args.tiles)
    else:
        trace = work / "synthetic_1e6.pt.trace.json"
        n = generate(trace, int(args.events))
    if n:
        print(f"generated {n:,} events, {trace.stat().st_size / 1e6:.0f} MB JSON "
              f"in {time.perf_counter() - t0:.1f} s")
    base_env = installed_env()
    print("timed processes run with compiled bytecode, as installed "
          "(PYTHONDONTWRITEBYTECODE dropped, sofa_gui compiled first)")
    rows = []
    for mode in [m for m in args.modes for _ in range(args.repeat)]:
        if mode == "cli":
            rows.append(run_cli(trace, work / "cache-cli", base_env))
            continue
        cache = work / ("cache-shared" if mode in ("process", "cached") else f"cache-{mode}")
        if mode != "cached" and cache.exists():
            shutil.rmtree(cache)
        env = dict(base_env, SOFA_GUI_CACHE_DIR=str(cache))
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
          " analysis done s | all panels s | CPU s (app + loader) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['max_gap_ms']:.0f} | {r['max_gap_main_cpu_ms']:.0f} | "
              f"{r['max_main_cpu_ms']:.0f} | {r['p99_gap_ms']:.0f} | "
              f"{r['gaps_over_100ms']} | {r['load']:.1f} | {r.get('t_trace', float('nan')):.2f} | "
              f"{r.get('t_iterations', float('nan')):.2f} | "
              f"{r.get('t_findings', float('nan')):.2f} | "
              f"{r.get('t_done', float('nan')):.2f} | {r.get('t_panels', float('nan')):.2f} | "
              f"{r['cpu_s']:.2f} |" + (f" error: {r['error']}"
                                                               if "error" in r else ""))
    shutil.rmtree(work, ignore_errors=True)  # caches of hundreds of MB
    print()
    for r in rows:
        if r["mode"] == "cli":
            continue
        print(f"{r['mode']}: gaps over 100 ms at (s, ms): {r['slow_gaps']}; trace shown at "
              f"{r.get('t_trace', 0):.2f} s")
        if args.phases:
            for at, msg in r["phases"]:
                print(f"    {at:6.2f} s  {msg}")
        for at, ms, where in r["stalls"]:
            print(f"    {ms:5d} ms gap at {at:.2f} s: " + "; ".join(
                f"{n} ms in {w}" for n, w in where))


if __name__ == "__main__":
    main()
