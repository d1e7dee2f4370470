"""Huge-trace benchmark: a generated ~1 GB Kineto JSON (~10M events), opened from the CLI.

    python benchmarks/huge.py                    # 10M events into /tmp, all measurements
    python benchmarks/huge.py --events 1000000   # a smaller run
    python benchmarks/huge.py --keep             # keep the file and cache for another run

Measures, each in a fresh process: ``sofa-gui analyze --json`` on the file (first open,
writes the cache), the cached reopen, the resident model (bytes per event), RSS by
loading phase, and cancellation latency (``load_trace`` with a ``CancelToken``
cancelled midway must raise ``Cancelled`` promptly). Goals: peak RSS < 4 GB, resident
model <= 100 bytes/event. The file goes to /tmp (never the repository).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GOAL_PEAK_GB = 4.0
GOAL_BYTES_PER_EVENT = 100
# Word-only names (no digits, which name normalisation would merge), so a step's sequence is
# aperiodic inside the step and repeats exactly from step to step, as in real training.
OPS = [f"aten::{a}{b}" for a in ("addmm", "conv", "relu", "add", "mul", "batch_norm",
                                  "layer_norm", "softmax", "dropout", "copy")
       for b in ("", "_", "_backward")]
KERNELS = [f"void {a}_{b}_kernel<float>(float const*, float*)"
           for a in ("sgemm", "cudnn_conv", "elementwise", "reduce", "batchnorm", "softmax",
                     "layernorm", "dropout", "adam", "transpose")
           for b in ("fwd", "bwd", "nchw", "nhwc", "tiled", "vectorized")]


# -- generation ------------------------------------------------------------------------------

def _header() -> str:
    return ('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", '
            '"totalGlobalMem": 85000000000, "computeMajor": 9, "computeMinor": 0, '
            '"numSms": 132}], "distributedInfo": {"backend": "nccl", "rank": 0, '
            '"world_size": 1}, "baseTimeNanoseconds": 1700000000000000000, '
            '"displayTimeUnit": "ms", "traceEvents": [\n'
            '{"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, '
            '"args": {"name": "python"}},\n'
            '{"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4242, '
            '"args": {"name": "thread 4242 (python)"}},\n'
            '{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}')


def _op_events(k: int, pick: int, t: float, gpu_t: float) -> tuple[list[str], float, float]:
    """One operator: cpu_op, its launch, the kernel, an ac2g flow pair (5 events)."""
    corr = 100 + k
    name, kern = OPS[pick % len(OPS)], KERNELS[pick % len(KERNELS)]
    g = max(gpu_t, t + 9.0)
    ev = [
        f'{{"ph":"X","cat":"cpu_op","name":"{name}","pid":4242,"tid":4242,'
        f'"ts":{t:.3f},"dur":14.5}}',
        f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":4242,"tid":4242,'
        f'"ts":{t + 4:.3f},"dur":6.0,"args":{{"correlation":{corr}}}}}',
        f'{{"ph":"s","cat":"ac2g","name":"ac2g","id":{corr},"pid":4242,"tid":4242,'
        f'"ts":{t + 4:.3f}}}',
        f'{{"ph":"X","cat":"kernel","name":"{kern}","pid":0,"tid":7,"ts":{g:.3f},'
        f'"dur":12.0,"args":{{"device":0,"stream":7,"correlation":{corr}}}}}',
        f'{{"ph":"f","cat":"ac2g","name":"ac2g","id":{corr},"pid":0,"tid":7,'
        f'"ts":{g:.3f},"bp":"e"}}',
    ]
    return ev, t + 16.0, g + 12.0


def generate(path: Path, events: int, ops_per_step: int = 2000) -> None:
    """Write a Kineto-shaped trace of about ``events`` events to ``path``."""
    tmp = path.with_suffix(".partial")
    n_ops = max(1, events // 5)
    rng = random.Random(0)
    step_seq = [rng.randrange(1 << 30) for _ in range(ops_per_step)]  # same in every step
    t, gpu_t = 1_000_000.0, 0.0
    with open(tmp, "w", buffering=16 << 20) as f:
        f.write(_header())
        for k in range(n_ops):
            if k % ops_per_step == 0:
                step = k // ops_per_step
                span = ops_per_step * 16.0
                f.write(f',\n{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{step}",'
                        f'"pid":4242,"tid":4242,"ts":{t - 1:.3f},"dur":{span:.3f}}}')
            ev, t, gpu_t = _op_events(k, step_seq[k % ops_per_step], t, gpu_t)
            f.write(",\n" + ",\n".join(ev))
        f.write("\n]}\n")
    os.replace(tmp, path)


# -- measuring child processes -----------------------------------------------------------

def run_measured(cmd: list[str], env: dict, stdout_path: Path | None = None) -> dict:
    """Wall time, peak RSS (from wait4) and exit code of one child process."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode("utf-8", "replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if stdout_path:
        out.close()
    return {"wall_s": wall, "peak_rss_gb": usage.ru_maxrss * 1024 / 1e9,
            "cpu_s": usage.ru_utime + usage.ru_stime, "rc": proc.returncode,
            "stderr": err.strip()[-2000:]}


# -- in-process probes, run as ``huge.py --probe KIND FILE`` in a fresh child --------------

def _rss_gb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 1e9


def _nbytes(obj) -> int:
    import numpy as np
    import pyarrow as pa

    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return obj.nbytes
    if isinstance(obj, list):
        return sum(len(x) if isinstance(x, (str, bytes)) else 8 for x in obj) + 8 * len(obj)
    return 0


def model_bytes(trace) -> dict:
    """Bytes held by the trace model's columns, by part."""
    from dataclasses import fields

    parts = {
        "slices": sum(_nbytes(getattr(trace.slices, f.name)) for f in fields(trace.slices)),
        "lanes": sum(_nbytes(getattr(trace.lanes, f.name)) for f in fields(trace.lanes)),
        "names": _nbytes(trace.names),
        "counters": _nbytes(trace.counters.series) + _nbytes(trace.counters.time)
        + _nbytes(trace.counters.value),
        "flows": sum(_nbytes(getattr(trace.flows, f.name)) for f in fields(trace.flows)),
        "args": _nbytes(trace.args.backing),
    }
    parts["total"] = sum(parts.values())
    return parts


def probe_model(path: Path, cached: bool) -> dict:
    """Load (fresh or from the cache) and report model bytes and RSS after load."""
    import gc

    from sofa_gui.core.importers import load_trace

    rss0 = _rss_gb()
    t0 = time.perf_counter()
    trace = load_trace(path, use_cache=cached)
    wall = time.perf_counter() - t0
    gc.collect()
    parts = model_bytes(trace)
    return {"events": trace.events, "slices": len(trace.slices), "flows": len(trace.flows),
            "wall_s": wall, "rss_before_gb": rss0, "rss_after_gb": _rss_gb(),
            "parts": parts, "bytes_per_event": parts["total"] / max(trace.events, 1),
            "skipped": trace.meta.load_stats.skipped_total}


def probe_phases(path: Path) -> dict:
    """RSS at each progress message of a fresh load, to see which phase costs memory."""
    import resource

    import psutil

    from sofa_gui.core.importers import load_trace
    from sofa_gui.core.progress import CancelToken

    proc = psutil.Process()
    rows, last = [], [None]
    t0 = time.perf_counter()

    def on_progress(fraction, message):
        key = message.split(" ")[0] if message else ""
        if key != last[0]:
            last[0] = key
            rows.append((round(time.perf_counter() - t0, 2), round(fraction, 3), message,
                         round(proc.memory_info().rss / 1e9, 3)))

    load_trace(path, progress=CancelToken(on_progress), use_cache=False)
    rows.append((round(time.perf_counter() - t0, 2), 1.0, "done",
                 round(proc.memory_info().rss / 1e9, 3)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    return {"phases": rows, "peak_rss_gb": peak}


def probe_cancel(path: Path, at: float) -> dict:
    """Cancel a fresh load once its progress passes ``at``; time until Cancelled is raised."""
    from sofa_gui.core.importers import load_trace
    from sofa_gui.core.progress import Cancelled, CancelToken

    token = CancelToken()
    box: dict = {}

    def work():
        try:
            load_trace(path, progress=token, use_cache=False)
            box["outcome"] = "finished"
        except Cancelled:
            box["outcome"] = "cancelled"
        except BaseException as exc:  # report, the parent judges
            box["outcome"] = f"{type(exc).__name__}: {exc}"
        box["t_end"] = time.perf_counter()

    th = threading.Thread(target=work, daemon=True)
    t0 = time.perf_counter()
    th.start()
    while token.fraction < at and th.is_alive():
        time.sleep(0.01)
    t_cancel = time.perf_counter()
    token.cancel()
    seen, said = token.fraction, token.message
    th.join(600)
    return {"at": at, "fraction_seen": round(seen, 3), "message": said,
            "cancelled_after_s": round(t_cancel - t0, 2), "outcome": box.get("outcome"),
            "latency_s": round(box.get("t_end", float("nan")) - t_cancel, 3)}


def _probe(kind: str, path: Path, arg: str | None) -> int:
    if kind == "model":
        out = probe_model(path, cached=arg == "cached")
    elif kind == "phases":
        out = probe_phases(path)
    else:
        out = probe_cancel(path, float(arg))
    print(json.dumps(out))
    return 0


# -- driver ------------------------------------------------------------------------------

def _probe_cmd(kind: str, path: Path, arg: str = "") -> list[str]:
    return [sys.executable, __file__, "--probe", kind, str(path), *([arg] if arg else [])]


def _json_of(out_file: Path) -> dict:
    text = out_file.read_text() if out_file.is_file() else ""
    return json.loads(text) if text else {}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "sofa-huge"))
    ap.add_argument("--keep", action="store_true", help="keep the file and the cache")
    ap.add_argument("--skip", action="append", default=[],
                    help="skip a step: cli, model, phases, cancel, app")
    ap.add_argument("--probe", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:
        kind, path, *rest = args.probe
        return _probe(kind, Path(path), rest[0] if rest else None)

    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    trace = work / f"kineto_{args.events}_v2.pt.trace.json"
    if not trace.exists():
        t0 = time.perf_counter()
        generate(trace, args.events)
        print(f"generated {trace} in {time.perf_counter() - t0:.0f} s")
    size_gb = trace.stat().st_size / 1e9
    print(f"file: {trace}  {size_gb:.2f} GB, ~{args.events:,} events\n")
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(cache), "QT_QPA_PLATFORM": "offscreen"}
    rows = []
    try:
        if "cli" not in args.skip:
            rows += _cli_rows(trace, work, env)
        if "model" not in args.skip:
            _model_report(trace, env)
        if "phases" not in args.skip:
            _phases_report(trace, env)
        if "cancel" not in args.skip:
            _cancel_report(trace, env)
        if "app" not in args.skip:
            rows += _app_rows(trace, work, env)
    finally:
        if not args.keep:
            shutil.rmtree(cache, ignore_errors=True)
            trace.unlink(missing_ok=True)
    _table(rows)
    return 0


def _cli_rows(trace: Path, work: Path, env: dict) -> list:
    rows = []
    for label in ("analyze --json, first open (writes cache)", "analyze --json, cached reopen"):
        out = work / "analyze.json"
        res = run_measured([sys.executable, "-m", "sofa_gui", "analyze", "--json", str(trace)],
                           env, out)
        doc = _json_of(out) if res["rc"] == 0 else {}
        events = doc.get("trace", {}).get("events", 0)
        iters = len(doc.get("iterations", {}).get("items", []))
        rows.append((label, res, f"events {events:,}, iterations {iters}"
                     if res["rc"] == 0 else f"rc {res['rc']}: {res['stderr'][-300:]}"))
        out.unlink(missing_ok=True)
    return rows


def _app_rows(trace: Path, work: Path, env: dict) -> list:
    """The desktop app opening the (cached) trace and rendering one frame offscreen."""
    shot = work / "app.png"
    cmd = [sys.executable, "-m", "sofa_gui", "view", str(trace), "--screenshot", str(shot)]
    res = run_measured(cmd, env)
    ok = res["rc"] == 0 and shot.is_file()
    return [("app: view --screenshot (cached)", res,
             "screenshot written" if ok else f"rc {res['rc']}: {res['stderr'][-300:]}")]


def _model_report(trace: Path, env: dict) -> None:
    for how in ("fresh", "cached"):
        res = run_measured(_probe_cmd("model", trace, how), env, trace.with_suffix(".probe"))
        if res["rc"]:
            print(f"model probe ({how}) failed: {res['stderr'][-500:]}")
            continue
        d = json.loads(trace.with_suffix(".probe").read_text())
        p = d["parts"]
        print(f"resident model ({how} load): {d['bytes_per_event']:.1f} bytes/event "
              f"(goal <= {GOAL_BYTES_PER_EVENT}); events {d['events']:,}, slices "
              f"{d['slices']:,}, flows {d['flows']:,}; load {d['wall_s']:.1f} s; RSS after "
              f"load {d['rss_after_gb']:.2f} GB, process peak {res['peak_rss_gb']:.2f} GB")
        print("   " + ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in p.items()))
    trace.with_suffix(".probe").unlink(missing_ok=True)


def _phases_report(trace: Path, env: dict) -> None:
    res = run_measured(_probe_cmd("phases", trace), env, trace.with_suffix(".probe"))
    if res["rc"]:
        print(f"phase probe failed: {res['stderr'][-500:]}")
        return
    d = json.loads(trace.with_suffix(".probe").read_text())
    print(f"\nRSS by loading phase (fresh load, peak {d['peak_rss_gb']:.2f} GB):")
    print(f"  {'t (s)':>7} {'progress':>8} {'RSS GB':>7}  message")
    for t, frac, msg, rss in d["phases"]:
        print(f"  {t:>7.1f} {frac:>8.3f} {rss:>7.2f}  {msg}")
    trace.with_suffix(".probe").unlink(missing_ok=True)


def _cancel_report(trace: Path, env: dict) -> None:
    print("\ncancellation (fresh load in a worker thread, CancelToken.cancel() from another):")
    for at in (0.3, 0.87, 0.93):
        res = run_measured(_probe_cmd("cancel", trace, str(at)), env, trace.with_suffix(".probe"))
        if res["rc"]:
            print(f"  cancel probe at {at} failed: {res['stderr'][-500:]}")
            continue
        d = json.loads(trace.with_suffix(".probe").read_text())
        print(f"  cancel at progress {d['fraction_seen']:.2f} ({d['message']!r}, "
              f"{d['cancelled_after_s']} s in): {d['outcome']} {d['latency_s']} s later")
    trace.with_suffix(".probe").unlink(missing_ok=True)


def _table(rows: list) -> None:
    if not rows:
        return
    print(f"\n{'run':<46}{'wall s':>8}{'cpu s':>8}{'peak RSS GB':>13}  result")
    for label, res, note in rows:
        flag = "" if res["peak_rss_gb"] < GOAL_PEAK_GB else "  (over the 4 GB goal)"
        print(f"{label:<46}{res['wall_s']:>8.1f}{res['cpu_s']:>8.1f}"
              f"{res['peak_rss_gb']:>13.2f}  {note}{flag}")


if __name__ == "__main__":
    sys.exit(main())
