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

Usage: ``python benchmarks/ingest.py [--max 1e7] [--repeat 3] [--no-real]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
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
    return {"wall": wall, "cpu": cpu, "read": trace.meta.report.read,
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--max", type=float, default=1e7, help="largest synthetic size (events)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per row; the fastest is kept")
    ap.add_argument("--no-real", action="store_true", help="skip the real traces")
    ap.add_argument("--json-max", type=float, default=1e6,
                    help="largest synthetic size to also time json.loads on (memory!)")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
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
