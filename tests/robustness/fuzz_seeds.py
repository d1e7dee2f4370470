"""Small seed inputs cut from real traces, grouped by the importer that opens them.

Mutating a 35 MB trace costs seconds per case; a few hundred real events keep every
format quirk (legacy Kineto schema, ns timestamps, flows, ranks, SOFA CSV columns)
while a case runs in milliseconds. Seeds are cut from ``resources/samples``,
``tests/data`` and ``../shared/traces/public`` (whatever is present) and assigned to
importers by the registry's own ``pick_importer``.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared" / "traces" / "public"
SAMPLE = ROOT / "resources" / "samples" / "resnet50_num_workers_0.pt.trace.json.gz"

#: (source, relative to SHARED or absolute; output name; events kept or None for all).
#: The first three are the quick set the test suite uses; the benchmark uses all.
KINETO_CUTS = [
    (SAMPLE, "resnet50_legacy.pt.trace.json.gz", 400),
    ("holistic-trace-analysis/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
     "amd_minitoy.json.gz", None),
    ("holistic-trace-analysis/critical_path/alexnet/"
     "benchmark_result_2869224_1695835535_trace.json.gz", "alexnet_sync.json", 400),
    ("holistic-trace-analysis/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
     "ns_resolution.pt.trace.json", 300),
    ("tracelens/b200/eager_trace.json.gz", "b200_eager.json.gz", 400),
    ("holistic-trace-analysis/nccl_parser_config/nccl_data.json.gz", "nccl_rank0.json", 400),
]
RANK_CUTS = [
    "holistic-trace-analysis/trace_filter/sampled_rank-0.json.gz",
    "holistic-trace-analysis/trace_filter/sampled_rank-1.json.gz",
]
#: Files in tests/data larger than this are not used as seeds (cases must stay fast).
MAX_SEED_BYTES = 400_000


def _read_json(path: Path):
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def _write_json(doc, path: Path) -> None:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


def cut_events(doc: dict, n: int | None) -> dict:
    """All metadata events plus ``n`` consecutive timed events from the first step on."""
    events = doc["traceEvents"]
    if n is None or len(events) <= n:
        return doc
    meta = [e for e in events if e.get("ph") == "M"]
    timed = sorted((e for e in events if e.get("ph") != "M" and "ts" in e),
                   key=lambda e: float(e["ts"]))
    first = next((i for i, e in enumerate(timed)
                  if str(e.get("name", "")).startswith("ProfilerStep")), 0)
    keep = {id(e) for e in timed[first:first + n]}
    out = {k: v for k, v in doc.items() if k != "traceEvents"}
    out["traceEvents"] = meta + [e for e in events if id(e) in keep]
    return out


def _src(rel) -> Path | None:
    p = Path(rel) if Path(rel).is_absolute() else SHARED / rel
    return p if p.exists() else None


def _candidates(out: Path, full: bool) -> list[Path]:
    """Seed files and folders written under ``out`` (or taken from tests/data as is)."""
    found: list[Path] = []
    for rel, name, n in KINETO_CUTS if full else KINETO_CUTS[:3]:
        src = _src(rel)
        if src is not None:
            _write_json(cut_events(_read_json(src), n), out / name)
            found.append(out / name)
    ranks = [p for p in map(_src, RANK_CUTS) if p is not None]
    if len(ranks) == len(RANK_CUTS):
        folder = out / "rank_folder"
        folder.mkdir(exist_ok=True)
        for src in ranks:
            _write_json(cut_events(_read_json(src), 300), folder / src.name)
        found.append(folder)
    for rel in ("sofa-demo-sofalog", "sofa-deepprof-gputrace"):
        src = DATA / rel if (DATA / rel).is_dir() else _src(rel)
        if src is not None:
            dst = out / rel
            shutil.copytree(src, dst, dirs_exist_ok=True)
            for f in dst.rglob("*"):
                f.chmod(0o755 if f.is_dir() else 0o644)
                if f.is_file() and f.suffix == ".csv":
                    _keep_lines(f, 400)
            found.append(dst)
    found += _nsys_exports(out)
    rec = _recording(out / "recording", torch=full)
    if rec is not None:
        found.append(rec)
    found += sorted(DATA.glob("xplane/*.xplane.pb"))  # binary XSpace, inside a folder
    if DATA.is_dir():
        for p in sorted(DATA.iterdir()):
            if p.name in ("SOURCES.md", "sofa-demo-sofalog", "sofa-deepprof-gputrace"):
                continue
            size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) \
                if p.is_dir() else p.stat().st_size
            if 0 < size <= MAX_SEED_BYTES:
                found.append(p)
    return found


def _nsys_exports(out: Path) -> list[Path]:
    """Nsight Systems exports from the documented schema (tests/core/nsys_fixture.py).

    No public ``.sqlite`` export exists to copy; the fixture writes one as nsys does.
    """
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    try:
        from nsys_fixture import make_nsys_db
    except ImportError:
        return []
    finally:
        sys.path.pop(0)
    made = []
    for name, kw in (("nsys_report.sqlite", {}),
                     ("nsys_old_schema.sqlite", {"old": True, "enums": False}),
                     ("nsys_two_processes.sqlite", {"second_pid": 4242})):
        (out / name).unlink(missing_ok=True)
        made.append(make_nsys_db(out / name, **kw))
    return made


#: The child ``sofa-gui record --torch`` runs: a few real torch ops on the CPU.
_RECORDED_PROGRAM = ("import torch\nx = torch.randn(64, 64)\n"
                     "for _ in range(10):\n    y = (x @ x).relu().sum()\n")


def _recording(dst: Path, torch: bool) -> Path | None:
    """A real recording folder made by ``sofa-gui record [--torch]`` (once per seed folder).

    ``--torch`` (torch.profiler's Kineto file inside) costs seconds of importing torch.
    """
    if (dst / "manifest.json").is_file():
        return dst
    cmd = [sys.executable, "-m", "sofa_gui", "record", "-o", str(dst), "--interval", "0.05"]
    if torch and importlib.util.find_spec("torch") is not None:
        cmd.append("--torch")
    program = _RECORDED_PROGRAM if "--torch" in cmd else "sum(i * i for i in range(10**6))"
    res = subprocess.run([*cmd, "--", sys.executable, "-c", program],
                         capture_output=True, timeout=300, cwd=str(dst.parent))
    return dst if res.returncode == 0 and (dst / "manifest.json").is_file() else None


def _keep_lines(path: Path, n: int) -> None:
    lines = path.read_bytes().split(b"\n")
    if len(lines) > n:
        path.write_bytes(b"\n".join(lines[:n]) + b"\n")


def build_seeds(out: Path, full: bool = True) -> dict[str, list[Path]]:
    """Seeds per importer module name (e.g. ``"chrome.trace"``) that load without error.

    ``full=False`` is the quick set for the test suite (fewer big sources to cut, no torch).
    """
    from sofa_gui.core.errors import TraceFormatError
    from sofa_gui.core.importers import load_trace, pick_importer

    out.mkdir(parents=True, exist_ok=True)
    seeds: dict[str, list[Path]] = {}
    for path in _candidates(out, full):
        try:
            imp = pick_importer(path)
            load_trace(path, use_cache=False)
        except TraceFormatError:
            continue  # not a trace (e.g. a helper file in tests/data) or not supported yet
        seeds.setdefault(module_name(imp), []).append(path)
    return seeds


def module_name(importer) -> str:
    """The short name of the module exposing ``importer`` (e.g. ``"chrome.trace"``)."""
    import importlib

    from sofa_gui.core.importers import IMPORTER_MODULES

    for mod in IMPORTER_MODULES:
        try:
            if importlib.import_module(mod).IMPORTER is importer:
                return mod.removeprefix("sofa_gui.core.importers.")
        except ModuleNotFoundError:
            continue
    return str(getattr(importer, "name", "?"))
