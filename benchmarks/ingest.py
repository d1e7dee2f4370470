"""Ingest benchmark for Chrome/Kineto JSON: first open, cached reopen, memory, vs json.loads.

Prints a Markdown table, one row per real trace (bundled sample, the public
traces under ../shared/traces/public when present, the HTA rank folder) and per
synthetic Kineto-like trace of 1e5, 1e6 and 1e7 events (generated into a temp
dir; ``--max`` caps the size). Every measurement runs in a fresh subprocess:

* first open: ``load_trace`` with an empty cache (parse + build + cache write);
* cached reopen: ``load_trace`` again in a new process (memory-maps the cache);
* json.loads: plain ``json.loads`` (GC on, as anyone would call it) of the same
  decompressed bytes, the reference the first open is compared with;
* peak RSS: the process's high-water mark during the first open minus its RSS
  after imports; resident: RSS after the load (model plus mapped pages).

The second table is the real-content row: the bundled ResNet-50 sample tiled
``--tiles`` times (13: 984,094 events, ~390 MB JSON; :func:`write_tiled`), timed
as a user runs it: ``json.load`` of the file, ``sofa-gui analyze --json`` with
``--no-cache`` (first open + analysis) decoding in one process and in as many as
there are cores, on an empty cache (first open + both cache writes) and again
(cached), each as a ratio to ``json.load`` in the same run. The worker-count rows
for 8 and 16 cores come from a stated model (serial part + parallel part / n,
fitted to the 1- and 2-process runs). These CLI runs compile bytecode once into a
private cache first, as an installed package has it (``PYTHONDONTWRITEBYTECODE``
would otherwise make every run compile ~150 modules).

Usage: ``python benchmarks/ingest.py [--max 1e7] [--repeat 3] [--no-real] [--tiles 13]
[--only-tiled]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces" / "public"


# -- synthetic traces ----------------------------------------------------------------------
_OPS = ["aten::addmm", "aten::relu", "aten::convolution", "aten::empty", "aten::copy_",
        "aten::mul", "aten::add_", "aten::native_layer_norm"]
_KERNELS = [
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::elementwise_kernel<128, 2>(int, at::native::gpu_kernel_impl)",
]


def write_synthetic(path: Path, n_events: int, seed: int = 1) -> int:
    """A Kineto-like trace: steps of cpu_op -> cudaLaunchKernel -> kernel with ac2g flows."""
    rnd = random.Random(seed)
    head = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU",
                                                       "totalGlobalMem": 85899345920}],
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}}
    written = 0
    with open(path, "w") as out:
        out.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
        t, corr, step = 1_700_000_000_000.0, 0, 0
        batch: list[str] = []
        while written < n_events:
            if written % 50_000 == 0:
                step += 1
                batch.append(f'{{"ph": "X", "cat": "user_annotation", '
                             f'"name": "ProfilerStep#{step}", '
                             f'"pid": 4242, "tid": 4242, "ts": {t:.3f}, "dur": 150000.0, '
                             f'"args": {{"External id": {corr}}}}}')
                written += 1
            corr += 1
            d = rnd.uniform(2, 40)
            batch.append(f'{{"ph": "X", "cat": "cpu_op", "name": "{_OPS[corr % 8]}", "pid": 4242, '
                         f'"tid": 4242, "ts": {t:.3f}, "dur": {d:.3f}, "args": {{"External id": '
                         f'{corr}, "Sequence number": {corr}}}}}')
            batch.append(f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                         f'"pid": 4242, "tid": 4242, "ts": {t + 1:.3f}, "dur": 4.125, '
                         f'"args": {{"cbid": 211, "correlation": {corr}}}}}')
            batch.append(f'{{"ph": "s", "id": {corr}, "pid": 4242, "tid": 4242, '
                         f'"ts": {t + 1:.3f}, "cat": "ac2g", "name": "ac2g"}}')
            batch.append(f'{{"ph": "X", "cat": "kernel", "name": "{_KERNELS[corr % 4]}", '
                         f'"pid": 0, "tid": 7, "ts": {t + 20:.3f}, "dur": {d:.3f}, '
                         f'"args": {{"device": 0, "stream": 7, "correlation": {corr}, '
                         f'"grid": [{rnd.randint(1, 4096)}, 1, 1], "block": [256, 1, 1]}}}}')
            batch.append(f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {t + 20:.3f}, '
                         f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}')
            written += 5
            t += d + 3
            if len(batch) >= 20_000:
                out.write(",\n".join(batch) + ",\n")
                batch = []
        batch.append('{"name": "process_name", "ph": "M", "ts": 0, "pid": 4242, "tid": 0, '
                      '"args": {"name": "python"}}')
        out.write(",\n".join(batch) + '\n], "displayTimeUnit": "ms"}\n')
    return written + 1


# -- real content tiled: the bundled sample repeated -------------------------------------------
SAMPLE = ROOT / "resources" / "samples" / "resnet50_num_workers_0.pt.trace.json.gz"
_TILE_IDS = ("External id", "correlation", "external id", "Sequence number")


def tile_shift(events: list) -> tuple[float, int]:
    """(time span, id span) of one copy: copies are laid end to end with fresh ids."""
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    ids = [e["id"] for e in events if isinstance(e.get("id"), int)]
    ids += [a[k] for e in events for a in [e.get("args") or {}] for k in _TILE_IDS
            if isinstance(a.get(k), int)]
    return max(ts) - min(ts) + 1000, max(ids, default=0) + 1


STEP_NAME = re.compile(r"ProfilerStep#(\d+)")


def tile_event(e: dict, dt: float, di: int, dstep: int = 0) -> dict:
    e = dict(e)
    if dstep and isinstance(e.get("name"), str):  # each copy's steps have their own numbers
        e["name"] = STEP_NAME.sub(lambda m: f"ProfilerStep#{int(m.group(1)) + dstep}", e["name"])
    if "ts" in e:
        e["ts"] += dt
    if isinstance(e.get("id"), int):
        e["id"] += di
    args = e.get("args")
    if args:
        args = e["args"] = dict(args)
        for key in _TILE_IDS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] += di
        if isinstance(args.get("external ts"), (int, float)):
            args["external ts"] += dt
    return e


def write_tiled(path: Path, copies: int = 13) -> int:
    """The bundled sample ``copies`` times end to end (metadata once); returns the event count.

    Every copy keeps the real names, args and call stacks; times move by the
    sample's span and correlation/flow/external ids by their range, so launches
    still pair with their own kernels; the ``ProfilerStep#N`` annotations are numbered on
    (copy k: N + 6k), so the analysis sees 6 x ``copies`` steps, as in a real long trace
    (the analysis counts a repeated step name once, so copies that kept the sample's own
    numbers would show 6 steps).
    """
    import msgspec

    doc = msgspec.json.decode(gzip.decompress(SAMPLE.read_bytes()))
    events = doc.pop("traceEvents")
    span, id_span = tile_shift(events)
    steps = {m.group(1) for e in events for m in [STEP_NAME.fullmatch(str(e.get("name")))] if m}
    enc = msgspec.json.Encoder()
    n = 0
    with open(path, "wb") as out:
        out.write(enc.encode(doc)[:-1] + b', "traceEvents": [\n')
        for k in range(copies):
            rows = [enc.encode(e if k == 0 else tile_event(e, k * span, k * id_span,
                                                            k * len(steps)))
                    for e in events if k == 0 or e.get("ph") != "M"]
            out.write((b",\n" if k else b"") + b",\n".join(rows))
            n += len(rows)
        out.write(b"\n]}\n")
    return n


# -- measurements (each in a fresh process) ----------------------------------------------------
def _status() -> dict[str, int]:
    with open("/proc/self/status") as f:
        rows = dict(line.split(":", 1) for line in f)
    return {k: int(rows[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM", "RssAnon")}


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass


def worker(mode: str, path: str) -> dict:
    """Runs inside the subprocess; prints one JSON line."""
    if mode == "json":
        p = Path(path)
        files = sorted(f for f in p.iterdir() if f.name.endswith((".json", ".json.gz"))) \
            if p.is_dir() else [p]
        blobs = []
        for f in files:
            raw = f.read_bytes()
            blobs.append(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        w, c = time.perf_counter(), time.process_time()
        for b in blobs:
            json.loads(b)
        return {"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
                "bytes": sum(len(b) for b in blobs)}
    from sofa_gui.core.importers import importers, load_trace

    importers()  # every importer module imported: the baseline includes them
    base = _status()
    _reset_peak()
    w, c = time.perf_counter(), time.process_time()
    trace = load_trace(path, use_cache=True)
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    end = _status()
    return {"wall": wall, "cpu": cpu, "read": trace.meta.load_stats.read,
            "slices": len(trace.slices), "peak": end["VmHWM"] - base["VmRSS"],
            "resident": end["VmRSS"] - base["VmRSS"], "anon": end["RssAnon"] - base["RssAnon"]}


def _run(mode: str, path: Path, cache: Path) -> dict:
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, __file__, "--worker", mode, str(path)],
                       capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{mode} {path}: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(path: Path, repeat: int, with_json: bool) -> dict:
    best: dict = {}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="sofa-bench-cache-") as cache:
            first = _run("open", path, Path(cache))
            again = _run("open", path, Path(cache))
        if not best or first["wall"] < best["first"]["wall"]:
            best["first"] = first
        if "again" not in best or again["wall"] < best["again"]["wall"]:
            best["again"] = again
        if with_json:
            js = _run("json", path, Path(tempfile.gettempdir()))
            if "json" not in best or js["wall"] < best["json"]["wall"]:
                best["json"] = js
    return best


def _row(label: str, m: dict) -> str:
    f, a, j = m["first"], m["again"], m.get("json")
    n = f["read"]
    ratio = f"{j['wall'] / f['wall']:.1f}x / {j['cpu'] / f['cpu']:.1f}x" if j else "-"
    mb = f"{j['bytes'] / 1e6:,.0f}" if j else "-"
    return (f"| {label} | {n:,} | {mb} | {f['wall']:.2f} ({f['cpu']:.2f}) | "
            f"{n / f['wall'] / 1e6:.2f} M | {ratio} | {a['wall'] * 1e3:.0f} ms "
            f"({100 * a['wall'] / f['wall']:.1f}%) | {f['peak'] / n:.0f} | "
            f"{f['anon'] / n:.0f} | {a['resident'] / n:.0f} |")


HEADER = (
    "| trace | events | JSON MB | first open s wall (cpu) | events/s | json.loads time / first "
    "open (wall / cpu) | cached reopen (% of first) | peak RSS B/event | resident anon "
    "B/event | reopen RSS B/event |\n|---|---|---|---|---|---|---|---|---|---|"
)


def real_traces() -> list[tuple[str, Path]]:
    out = [("bundled sample (ResNet-50, 2021 schema)",
            ROOT / "resources" / "samples" / "resnet50_num_workers_0.pt.trace.json.gz")]
    if SHARED.is_dir():
        for p in sorted(SHARED.rglob("*.json.gz")):
            out.append((str(p.relative_to(SHARED)), p))
    out.append(("HTA rank folder (tests/data/ranks, 2 files)", ROOT / "tests" / "data" / "ranks"))
    return out


def cli_env(pycache: Path, **extra: str) -> dict:
    """The CLI's environment: this checkout, bytecode cached (as installed), ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "SOFA_GUI_DECODE_PARTS")}
    return {**env, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(pycache), **extra}


#: ``sofa-gui`` that also reports its own CPU seconds (its children not included).
_CLI = ("import resource, sys\nfrom sofa_gui.cli import leave, main\n"
        "try:\n    rc = main(sys.argv[1:])\n"
        "finally:\n    r = resource.getrusage(resource.RUSAGE_SELF)\n"
        "    sys.stderr.write(f'\\nmain-cpu {r.ru_utime + r.ru_stime}\\n')\nleave(rc)")


def run_cli(path: Path, cache: Path, *flags: str, env: dict | None = None) -> dict:
    """Wall seconds, CPU seconds of all its processes (decode workers included) and of
    the main process alone, of one ``sofa-gui analyze --json`` (output discarded). On idle
    cores the main process is the critical path: the workers run beside it."""
    env = {**(env or os.environ), "SOFA_GUI_CACHE_DIR": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CLI, "analyze", str(path), "--json", *flags],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                       timeout=3600)
    wall = time.perf_counter() - w
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"analyze {path} {flags}: {r.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    main = float(r.stderr.rsplit("main-cpu ", 1)[1].split()[0])
    return {"wall": wall, "cpu": cpu, "main": main}


def _json_load(path: Path) -> dict:
    code = ("import json,time,sys;w=time.perf_counter();c=time.process_time();"
            "json.load(open(sys.argv[1],'rb'));"
            "print(time.perf_counter()-w,time.process_time()-c)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True, timeout=3600).stdout.split()
    return {"wall": float(out[0]), "cpu": float(out[1])}


def _best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["wall"])


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compiled_envs(pyc: Path) -> tuple[dict, dict]:
    """(default, one-process) CLI environments sharing the bytecode cache ``pyc``, the
    bytecode compiled once by a first run on the sample."""
    env = cli_env(pyc)
    one = cli_env(pyc, SOFA_GUI_DECODE_PARTS="1")
    with tempfile.TemporaryDirectory(prefix="sofa-bench-cache-") as cache:
        run_cli(SAMPLE, Path(cache), "--no-cache", env=env)
    return env, one


def measure_tiled(path: Path, repeat: int) -> dict:
    """Every step ``repeat`` times, interleaved (so load spikes hit all alike); best kept."""
    steps: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="sofa-bench-pyc-") as pyc:
        env, one = compiled_envs(Path(pyc))
        for _ in range(repeat):
            steps.setdefault("json", []).append(_json_load(path))
            with tempfile.TemporaryDirectory(prefix="sofa-bench-cache-") as cache:
                steps.setdefault("serial", []).append(
                    run_cli(path, Path(cache), "--no-cache", env=one))
                steps.setdefault("nocache", []).append(
                    run_cli(path, Path(cache), "--no-cache", env=env))
                steps.setdefault("cold", []).append(run_cli(path, Path(cache), env=env))
                steps.setdefault("cached", []).append(run_cli(path, Path(cache), env=env))
    return {k: _best(v) for k, v in steps.items()}


def scaling(one: float, many: float, n: int) -> tuple[float, float]:
    """(serial s, parallel s) of ``t(k) = serial + parallel / k`` through t(1) = ``one``
    and t(n) = ``many``; the model ignores memory bandwidth and a merge that grows
    with k, so it is an upper bound on the speed-up."""
    if n < 2:
        return one, 0.0
    parallel = max((one - many) * n / (n - 1), 0.0)
    return one - parallel, parallel


def tiled_table(m: dict, events: int, mb: float) -> str:
    j, jc = m["json"]["wall"], m["json"]["cpu"]
    n = _cores()

    def row(label: str, r: dict, goal: str) -> str:
        main = r.get("main", r["cpu"])
        return (f"| {label} | {r['wall']:.2f} s | {r['cpu']:.2f} / {main:.2f} s | "
                f"{j / r['wall']:.1f}x / {jc / main:.1f}x | {goal} |")

    serial, par = scaling(m["serial"]["main"], m["nocache"]["main"], n)
    model = [f"| model: `--no-cache` on {k} cores | - | - / {serial + par / k:.2f} s | "
             f"- / {jc / (serial + par / k):.1f}x | - |" for k in (8, 16)]
    lines = [f"Real content: bundled ResNet-50 sample tiled to {events:,} events ({mb:,.0f} MB "
             f"JSON); best of the repeats; load average {os.getloadavg()[0]:.1f} "
             f"on {n} CPUs. CPU: all processes (decode workers included) / the main process "
             "alone, which is the wall time when the workers get cores of their own. "
             "The CLI runs read compiled bytecode, as an installed package does (compiled "
             "once into a private pycache first; PYTHONDONTWRITEBYTECODE dropped).", "",
             "| step | wall | CPU all / main | x faster than json.load: wall / main CPU | goal |",
             "|---|---|---|---|---|",
             row("`json.load` of the file", m["json"], "-"),
             row("`analyze --json --no-cache`, decode in 1 process", m["serial"], "-"),
             row(f"`analyze --json --no-cache`, decode in {min(n, 8)} processes (first open "
                 "+ analysis)", m["nocache"], ">= 8x"),
             *model,
             row("`analyze --json`, empty cache (first open + cache writes)", m["cold"], "-"),
             row("`analyze --json` again (cached trace + analysis)", m["cached"], ">= 30x"),
             "", f"Worker scaling: 1 -> {n} decode processes: wall "
             f"{m['serial']['wall'] / m['nocache']['wall']:.2f}x, main-process CPU "
             f"{m['serial']['main'] / m['nocache']['main']:.2f}x faster; model (main-process "
             f"CPU) t(k) = {serial:.2f} s + {par:.2f} s / k, fitted to those two runs; it "
             "ignores memory bandwidth and a merge that grows with k, so it is an upper bound."]
    return "\n".join(lines)


def run_tiled(copies: int, repeat: int, path: Path | None = None) -> None:
    if path is not None:
        events = sum(1 for _ in open(path, "rb")) - 2 if path.suffix == ".json" else 0
        print(tiled_table(measure_tiled(path, repeat), events, path.stat().st_size / 1e6),
              flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="sofa-bench-tiled-") as d:
        path = Path(d) / f"resnet50_x{copies}.json"
        events = write_tiled(path, copies)
        print(tiled_table(measure_tiled(path, repeat), events, path.stat().st_size / 1e6),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--max", type=float, default=1e7, help="largest synthetic size (events)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per row; the fastest is kept")
    ap.add_argument("--no-real", action="store_true", help="skip the real traces")
    ap.add_argument("--json-max", type=float, default=1e6,
                    help="largest synthetic size to also time json.loads on (memory!)")
    ap.add_argument("--tiles", type=int, default=13,
                    help="copies of the bundled sample in the real-content row (0: none)")
    ap.add_argument("--only-tiled", action="store_true", help="only the real-content row")
    ap.add_argument("--tiled-file", type=Path,
                    help="an already written tiled file (write_tiled) instead of a new one")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if args.tiles:
        run_tiled(args.tiles, args.repeat, args.tiled_file)
        print()
    if args.only_tiled:
        return
    print(HEADER)
    if not args.no_real:
        for label, path in real_traces():
            if path.exists():
                print(_row(label, measure(path, args.repeat, True)), flush=True)
    with tempfile.TemporaryDirectory(prefix="sofa-bench-synth-") as d:
        for n in (1e5, 1e6, 1e7):
            if n > args.max:
                break
            path = Path(d) / f"synthetic_{int(n)}.json"
            events = write_synthetic(path, int(n))
            label = f"synthetic {n:.0e} ({path.stat().st_size / 1e6:,.0f} MB)"
            m = measure(path, args.repeat, n <= args.json_max)
            print(_row(label, m), flush=True)
            assert m["first"]["read"] == events
            path.unlink()


if __name__ == "__main__":
    main()
