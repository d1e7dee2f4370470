"""Load speed of the SOFA logdir and Nsight Systems SQLite importers on synthetic inputs.

For each size, writes a SOFA logdir (``gputrace.csv`` kernels + copies and a
``cputrace.csv`` of perf samples, ``n`` rows each) and an nsys export (``n``
kernels, ``n`` correlated runtime calls, ``n/10`` memcpys, ``n/100`` NVTX ranges),
then loads each in a fresh process. Columns:

* ``rows``: source rows; ``import s``: importer only (no cache), wall clock; ``cpu s``:
  its CPU time (what wall time would be on an idle machine, as most of it is one
  thread); ``rows/s`` (wall);
* ``1st open s``: ``load_trace`` with an empty cache (import + cache write);
* ``reopen s``: ``load_trace`` again (memory-mapped cache);
* ``peak MB``: peak RSS of the importing process; ``B/row``: peak RSS added by the
  import (above the interpreter with all modules loaded), per source row.

Usage: ``python benchmarks/ingest_sofa_nsys.py [1e5 1e6] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOFA_COLUMNS = ["timestamp", "event", "duration", "deviceId", "copyKind", "payload", "bandwidth",
                "pkt_src", "pkt_dst", "pid", "tid", "name", "category"]


def _csv(path: Path, cols: dict) -> None:
    table = pa.table({c: cols[c] for c in SOFA_COLUMNS})
    pacsv.write_csv(table, path, pacsv.WriteOptions(quoting_style="none"))


def write_sofa(folder: Path, n: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sofa_time.txt").write_text("1700000000.000000000\n")
    t = np.round(np.cumsum(rng.exponential(20e-6, n)), 6)
    ck = np.where(rng.random(n) < 0.05, rng.choice([1, 2, 8, 10], n), 0)
    payload = np.where(ck > 0, rng.integers(1 << 10, 1 << 24, n), 0)
    kernels = np.array([f"[gpu1]kernel_{i}_sgemm_128x64" for i in range(300)])
    copy_names = {1: "[gpu1]CUDA_COPY_H2D_4096B", 2: "[gpu1]CUDA_COPY_D2H_4096B",
                  8: "[gpu1]CUDA_COPY_D2D_4096B", 10: "[CUDA_COPY_P2P]from_gpu1_to_gpu2_4096B"}
    names = kernels[rng.integers(0, len(kernels), n)].astype(object)
    for code, text in copy_names.items():
        names[ck == code] = text
    ones = np.ones(n, np.int64)
    _csv(folder / "gputrace.csv", dict(
        timestamp=t, event=payload * 100 + 17,
        duration=np.round(np.diff(t, append=t[-1] + 1e-5) * 0.8, 6),  # a stream runs one at a time
        deviceId=rng.integers(1, 3, n), copyKind=ck, payload=payload,
        bandwidth=np.round(rng.random(n) * 10, 3), pkt_src=-ones, pkt_dst=-ones, pid=ones,
        tid=rng.choice([7, 14, 21, 28], n), name=pa.array(names, pa.string()), category=0 * ones))
    syms = np.array([f"[cycles:]func_{i}+0x{i % 251:x}(/usr/lib/libfoo.so)" for i in range(5000)])
    _csv(folder / "cputrace.csv", dict(
        timestamp=np.round(np.cumsum(rng.exponential(5e-6, n)), 6), event=14.5 + 0 * t,
        duration=np.round(rng.exponential(3e-5, n), 6), deviceId=-ones, copyKind=-ones,
        payload=0 * ones, bandwidth=0 * ones, pkt_src=-ones, pkt_dst=-ones, pid=4321 * ones,
        tid=4321 + rng.integers(0, 8, n), name=pa.array(syms[rng.integers(0, 5000, n)]),
        category=0 * ones))
    return 2 * n


def write_nsys(path: Path, n: int, seed: int = 0) -> int:
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from nsys_fixture import ENUMS, SCHEMA, gpid, gtid

    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA + ENUMS)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)",
                    [(i, f"kernel_{i}<float>(float*, int)") for i in range(300)]
                    + [(1000, "cudaLaunchKernel_v7000"), (1001, "cudaMemcpyAsync_v3020"),
                       (1002, "step")])
    launch = np.cumsum(rng.integers(2_000, 20_000, n))
    tids = 1234 + rng.integers(0, 4, n)
    gt = [gtid(1234, int(x)) for x in tids]
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, 1000, 0, "
                    "NULL)", zip(launch.tolist(), (launch + 1500).tolist(), gt, range(n)))
    ks = launch + 3_000
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
        "correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, "
        "gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
        "localMemoryPerThread, localMemoryTotal, gridId) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, 32, "
        "128, 1, 1, 256, 1, 1, 0, 1024, 0, 0, 1)",
        zip(ks.tolist(), (ks + rng.integers(200, 1_900, n)).tolist(),  # launches >= 2 µs apart
            rng.integers(0, 2, n).tolist(), rng.choice([7, 14], n).tolist(), range(n),
            [gpid(1234)] * n, (names := rng.integers(0, 300, n).tolist()), names))
    m = n // 10
    ms = np.sort(rng.integers(0, int(launch[-1]), m))
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, "
        "correlationId, globalPid, bytes, copyKind, srcKind, dstKind) VALUES (?, ?, 0, 1, 8, "
        "NULL, ?, ?, ?, 0, 2)",
        zip(ms.tolist(), (ms + 2_000).tolist(), [gpid(1234)] * m,
            rng.integers(1 << 10, 1 << 22, m).tolist(), rng.choice([1, 2, 8], m).tolist()))
    k = max(n // 100, 1)
    ns = np.sort(rng.integers(0, int(launch[-1]), k))
    con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES "
                    "(?, ?, 59, 'step', ?)", zip(ns.tolist(), (ns + 10_000).tolist(),
                                                 [gtid(1234, 1234)] * k))
    con.commit()
    con.close()
    return 2 * n + m + k


def _peak_rss() -> int:
    """Peak RSS of this process in bytes: VmHWM (per address space, so a parent's peak
    does not leak in through fork, unlike ``ru_maxrss``), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(path: str, cache: str) -> None:
    """Runs in a fresh process: time the importer, a first open, a reopen."""
    os.environ["SOFA_GUI_CACHE_DIR"] = cache
    import pyarrow.parquet  # noqa: F401  (module import time is not load time)

    from sofa_gui.core import store  # noqa: F401
    from sofa_gui.core.importers import importers, load_trace

    importers()
    base = _peak_rss()
    c0, t0 = time.process_time(), time.perf_counter()
    trace = load_trace(path, use_cache=False)
    c1, t1 = time.process_time(), time.perf_counter()
    peak = _peak_rss()
    load_trace(path)
    t2 = time.perf_counter()
    again = load_trace(path)
    t3 = time.perf_counter()
    print(json.dumps({"import": t1 - t0, "cpu": c1 - c0, "first": t2 - t1, "reopen": t3 - t2,
                      "peak": peak, "added": peak - base,
                      "events": trace.events, "same": again.events == trace.events}))


def run(kind: str, path: Path, rows: int, tmp: Path) -> None:
    out = subprocess.run([sys.executable, __file__, "--child", str(path), str(tmp / "cache")],
                         capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"| {kind:5s} | {rows:>10,} | {r['events']:>10,} | {r['import']:8.2f} | "
          f"{r['cpu']:6.2f} | "
          f"{rows / r['import']:>10,.0f} | {r['first']:10.2f} | {r['reopen']:8.3f} | "
          f"{r['peak'] / 1e6:7.0f} | {r['added'] / rows:5.0f} |")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("sizes", nargs="*", default=["1e5", "1e6"])
    p.add_argument("--keep", help="write inputs here instead of a temp dir")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(*a.child)
        return
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(a.keep or td)
        print("| input | rows | events | import s | cpu s | rows/s | 1st open s | reopen s "
              "| peak MB | B/row |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in a.sizes:
            n = int(float(size))
            sofa = tmp / f"sofa_{n}"
            rows = write_sofa(sofa, n)
            run("sofa", sofa, rows, tmp / f"c_sofa_{n}")
            nsys = tmp / f"nsys_{n}.sqlite"
            nsys.unlink(missing_ok=True)
            rows = write_nsys(nsys, n)
            run("nsys", nsys, rows, tmp / f"c_nsys_{n}")


if __name__ == "__main__":
    main()
