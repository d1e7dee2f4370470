"""Opening the same real content written in every layout users have: is the default open
never slower than one process, and how much faster than ``json.load`` is it?

The bundled ResNet-50 sample is tiled ``--tiles`` times (13: ~984k events) with sparse
ids (correlation, External id and flow ids moved by 10,000,000 per copy, steps renamed
``ProfilerStep#<1000k+n>``, as a concatenation of real runs has them) and written as:

* ``lines``: one event per line, msgspec's compact encoding (``benchmarks/ingest.py``'s
  own layout, there with dense ids: the ``dense`` row);
* ``dump``: ``json.dump``'s default layout (one line, ``", "`` and ``": "``);
* ``oneline``: compact, one line, no blanks;
* ``indent``: pretty-printed with ``indent=1``;
* ``.gz`` of each (gzip level 1, as a fast exporter writes it).

Each row, in one run and interleaved so that a load spike hits all alike: ``json.load``
(``json.load(gzip.open(...))`` for ``.gz``), ``sofa-gui analyze --json --no-cache`` as it
decides (default), the same forced into one process (``SOFA_GUI_DECODE_PARTS=1``), and the
cached reopen; ratios to ``json.load`` of the same file. Best of ``--repeat``.

``--xplane N`` times the ``N`` largest XProf captures of the diagnosis corpus instead,
each plain (``.xplane.pb``) and as the corpus stores it (``gzip -9 -n``,
``.xplane.pb.gz``): the open alone (a fresh process's second uncached ``load_trace``),
``analyze --json --no-cache`` and the cached reopen, so the gzip's cost shows.

Usage: ``python benchmarks/open_layouts.py [--tiles 13] [--repeat 2] [--only NAME ...]
[--keep DIR] [--xplane N]``
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import (  # noqa: E402  (benchmarks share helpers by path)
    SAMPLE,
    STEP_NAME,
    compiled_envs,
    run_cli,
    tile_event,
    tile_shift,
    write_tiled,
)

SPARSE_ID_STEP = 10_000_000
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "corpus"


def _sparse_events(copies: int) -> tuple[dict, list]:
    doc = msgspec.json.decode(gzip.decompress(SAMPLE.read_bytes()))
    events = doc.pop("traceEvents")
    span, _ = tile_shift(events)
    out = []
    for k in range(copies):
        for e in events:
            if k and e.get("ph") == "M":
                continue
            e = tile_event(e, k * span, k * SPARSE_ID_STEP) if k else dict(e)
            if isinstance(e.get("name"), str):
                e["name"] = STEP_NAME.sub(
                    lambda m, k=k: f"ProfilerStep#{1000 * (k + 1) + int(m[1])}", e["name"])
            out.append(e)
    return doc, out


def _write(path: Path, layout: str, doc: dict, events: list) -> None:
    if layout == "lines":
        enc = msgspec.json.Encoder()
        with open(path, "wb") as f:
            f.write(enc.encode(doc)[:-1] + b', "traceEvents": [\n')
            f.write(b",\n".join(enc.encode(e) for e in events))
            f.write(b"\n]}\n")
        return
    whole = {**doc, "traceEvents": events}
    if layout == "oneline":
        path.write_bytes(msgspec.json.encode(whole))
    else:
        with open(path, "w") as f:
            json.dump(whole, f, indent=1 if layout == "indent" else None)


def _gzip(path: Path) -> Path:
    out = path.with_name(path.name + ".gz")
    with open(path, "rb") as src, gzip.open(out, "wb", compresslevel=1) as dst:
        while chunk := src.read(1 << 24):
            dst.write(chunk)
    return out


def write_layouts(folder: Path, copies: int, only: set[str]) -> list[tuple[str, Path]]:
    doc, events = _sparse_events(copies)
    files = []
    if not only or "dense" in only:
        dense = folder / "dense-lines.json"
        write_tiled(dense, copies)
        files.append(("dense ids, lines (ingest.py's file)", dense))
    for layout in ("lines", "dump", "oneline", "indent"):
        if only and layout not in only:
            continue
        p = folder / f"sparse-{layout}.json"
        _write(p, layout, doc, events)
        files.append((f"sparse ids, {layout}", p))
    del events
    for label, p in list(files):
        files.append((label + ", gzip -1", _gzip(p)))
    return files


def write_xplanes(folder: Path, n: int) -> list[tuple[str, Path]]:
    """The ``n`` largest XProf captures of the corpus (by decompressed size, gzip's
    trailer), each written plain and copied as stored (gzip -9)."""
    def size(gz: Path) -> int:
        with open(gz, "rb") as f:
            f.seek(-4, os.SEEK_END)
            return int.from_bytes(f.read(4), "little")

    files = []
    for gz in sorted(CORPUS.rglob("*.xplane.pb.gz"), key=size, reverse=True)[:n]:
        name = "-".join(gz.relative_to(CORPUS).parts[:2])  # case-capture-K
        plain = folder / f"{name}.xplane.pb"
        plain.write_bytes(gzip.decompress(gz.read_bytes()))
        files.append((f"{name}, plain", plain))
        files.append((f"{name}, gzip -9", Path(shutil.copy(gz, folder / (plain.name + ".gz")))))
    return files


def _json_load(path: Path) -> float:
    code = ("import gzip,json,sys,time;p=sys.argv[1];w=time.perf_counter();"
            "json.load(gzip.open(p) if p.endswith('.gz') else open(p,'rb'));"
            "print(time.perf_counter()-w)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True, timeout=3600)
    return float(out.stdout)


def measure(files: list[tuple[str, Path]], repeat: int) -> dict[str, dict[str, float]]:
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="sofa-bench-pyc-") as pyc:
        env, one = compiled_envs(Path(pyc))
        for _ in range(repeat):
            for label, path in files:
                row = best.setdefault(label, {})
                with tempfile.TemporaryDirectory(prefix="sofa-bench-cache-") as cache:
                    runs = {"json": _json_load(path),
                            "default": run_cli(path, Path(cache), "--no-cache", env=env)["wall"],
                            "one": run_cli(path, Path(cache), "--no-cache", env=one)["wall"]}
                    run_cli(path, Path(cache), env=env)  # writes the cache
                    runs["cached"] = run_cli(path, Path(cache), env=env)["wall"]
                for k, v in runs.items():
                    row[k] = min(row.get(k, v), v)
    return best


def table(files: list[tuple[str, Path]], m: dict[str, dict[str, float]]) -> str:
    lines = [f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; best of the "
             "repeats; x = faster than `json.load` of the same file", "",
             "| file | MB | json.load | default open | one process | default / one | cached |",
             "|---|---|---|---|---|---|---|"]
    for label, path in files:
        r = m[label]
        lines.append(f"| {label} | {path.stat().st_size / 1e6:,.0f} | {r['json']:.2f} s | "
                     f"{r['default']:.2f} s ({r['json'] / r['default']:.1f}x) | "
                     f"{r['one']:.2f} s ({r['json'] / r['one']:.1f}x) | "
                     f"{r['default'] / r['one']:.2f} | {r['cached']:.2f} s |")
    return "\n".join(lines)


#: A fresh process's second ``load_trace`` of the file, uncached: the open alone (the
#: first call pays the imports).
_LOAD = ("import sys,time;from sofa_gui.core.importers import load_trace;p=sys.argv[1];"
         "load_trace(p,use_cache=False);w=time.perf_counter();load_trace(p,use_cache=False);"
         "print(time.perf_counter()-w)")


def measure_xplanes(files: list[tuple[str, Path]], repeat: int) -> dict[str, dict]:
    """Per file, best of ``repeat``, interleaved: the open alone, ``analyze --json
    --no-cache`` (open and every analysis) and the cached reopen."""
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="sofa-bench-pyc-") as pyc:
        env, _ = compiled_envs(Path(pyc))
        for _ in range(repeat):
            for label, path in files:
                out = subprocess.run([sys.executable, "-c", _LOAD, str(path)], env=env,
                                     capture_output=True, text=True, check=True, timeout=600)
                with tempfile.TemporaryDirectory(prefix="sofa-bench-cache-") as cache:
                    runs = {"load": float(out.stdout),
                            "analyze": run_cli(path, Path(cache), "--no-cache", env=env)["wall"]}
                    run_cli(path, Path(cache), env=env)  # writes the cache
                    runs["cached"] = run_cli(path, Path(cache), env=env)["wall"]
                row = best.setdefault(label, {})
                for k, v in runs.items():
                    row[k] = min(row.get(k, v), v)
    return best


def xplane_table(files: list[tuple[str, Path]], m: dict[str, dict[str, float]]) -> str:
    lines = [f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; best of the "
             "repeats; gzip / plain: the open of the gzip over that of the plain file", "",
             "| file | MB | open (load only) | gzip / plain | analyze --no-cache | cached |",
             "|---|---|---|---|---|---|"]
    plain = None
    for label, path in files:
        r = m[label]
        gz = path.name.endswith(".gz")
        ratio = f"{r['load'] / plain['load']:.2f}" if gz and plain else ""
        lines.append(f"| {label} | {path.stat().st_size / 1e6:.2f} | {r['load'] * 1e3:.0f} ms | "
                     f"{ratio} | {r['analyze']:.2f} s | {r['cached']:.2f} s |")
        plain = None if gz else r
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=13)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=[],
                    help="layouts to write: dense lines dump oneline indent")
    ap.add_argument("--keep", type=Path, help="write the files here and keep them")
    ap.add_argument("--xplane", type=int, default=0, metavar="N",
                    help="time the N largest XProf corpus captures, plain and gzip -9, "
                         "instead of the JSON layouts")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sofa-bench-layouts-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.xplane:
            files = write_xplanes(folder, args.xplane)
            print(xplane_table(files, measure_xplanes(files, args.repeat)), flush=True)
            return
        files = write_layouts(folder, args.tiles, set(args.only))
        print(table(files, measure(files, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
