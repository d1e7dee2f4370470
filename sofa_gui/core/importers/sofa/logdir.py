"""SOFA trace folders (the ``sofalog/`` logdir written by ``sofa record`` + ``preprocess``).

A logdir holds 13-column CSVs whose times are seconds relative to
``sofa_time.txt`` (or Unix seconds with ``--absolute_timestamp``). Every known
file is loaded on one timeline: GPU activity and CUDA API calls, perf samples,
strace, Python stacks and packets as slices; mpstat, vmstat, nvidia-smi,
netstat and diskstat as counter series. A single SOFA CSV (including the 2017
six-column ``gputrace.csv``) opens on its own.

Times: ``ns = seconds x 1e9`` on the file's clock, so ``analyze --json`` shows
seconds x 1e6 µs; ``meta.epoch_offset_ns`` comes from ``sofa_time.txt``.
"""

from __future__ import annotations

import importlib
import os
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np
import pyarrow as pa

from ... import metadata
from ...builder import TraceBuilder
from ...errors import TraceFormatError
from ...progress import Progress, subrange
from ...trace import Trace
from ..confidence import Confidence
from .csv_rows import CsvRows, read_rows, sniff_schema

#: Known files in load order -> handler for the 13-column schema ("module.function" in
#: sofa/slices.py, sofa/counters.py, imported on use: sniffing a folder needs neither).
HANDLERS = {
    "gputrace.csv": "slices.load_gputrace",
    "cuda_api_trace.csv": "slices.load_cuda_api",
    "cputrace.csv": "slices.load_cputrace",
    "pystacks.csv": "slices.load_pystacks",
    "strace.csv": "slices.load_strace",
    "nettrace.csv": "slices.load_nettrace",
    "mpstat.csv": "counters.load_mpstat",
    "nvsmi_trace.csv": "counters.load_nvsmi",
    "vmstat.csv": "counters.load_vmstat",
    "netstat.csv": "counters.load_netstat",
    "diskstat.csv": "counters.load_diskstat",
}
#: Raw files ``sofa record`` writes before ``sofa preprocess`` makes the CSVs.
_RAW = ("mpstat.txt", "vmstat.txt", "perf.data", "strace.txt", "nvsmi.txt", "netstat.txt")
_ABSOLUTE_S = 1e8  # times above this many seconds are Unix epoch seconds (>= 1973)


class SofaLogdirImporter:
    name = "sofa"
    suffixes = (".csv",)  # one SOFA table also opens on its own

    def can_open(self, path: Path) -> Confidence:
        path = Path(path)
        if path.is_dir():
            names = set(os.listdir(path))
            if any(sniff_schema(path / n) for n in names & set(HANDLERS)
                   if (path / n).is_file() and os.access(path / n, os.R_OK)):
                return Confidence.CONTENT
            own = "sofa_time.txt" in names or names & set(HANDLERS)
            return Confidence.OWN_NAMES if own else Confidence.NO
        if path.is_file() and sniff_schema(path):
            return Confidence.CONTENT
        return Confidence.NO

    def load(self, path: Path, progress: Progress) -> Trace:
        path = Path(path)
        folder = path if path.is_dir() else path.parent
        b = TraceBuilder(str(path), self.name)
        base_ns = _time_base(folder, b)
        _misc(folder, b)
        plan = _plan(path, b)
        shifts = _clocks(plan, base_ns, b)
        total = sum(max(p.stat().st_size, 1) for p, _ in plan) or 1
        done = 0
        for p, schema in plan:
            size = max(p.stat().st_size, 1)
            sub = subrange(progress, done / total, (done + size) / total)
            _load_file(b, p, schema, shifts.get(p.name, 0), sub, single=path.is_file())
            done += size
        progress.update(1.0, "building trace")
        trace = b.finish(progress=progress)
        if trace.events == 0:
            raise TraceFormatError(path, _empty_reason(folder, plan, b))
        return trace


def _plan(path: Path, b: TraceBuilder) -> list[tuple[Path, str]]:
    """(file, schema) to load; notes for absent, unreadable and foreign files."""
    if path.is_file():
        schema = sniff_schema(path)
        if schema is None:
            raise TraceFormatError(path, "not a SOFA CSV (header differs)")
        return [(path, schema)]
    plan, absent = [], []
    for name in HANDLERS:
        p = path / name
        if not p.exists():
            absent.append(name)
            continue
        if not p.is_file():  # a folder, FIFO or device: opening a FIFO would block forever
            b.load_stats.notes.append(f"{name}: not a regular file, not loaded")
            continue
        try:
            schema = sniff_schema(p)
        except OSError as exc:
            b.load_stats.notes.append(f"{name}: unreadable ({exc.strerror or exc}), not loaded")
            continue
        if schema is None:
            b.load_stats.notes.append(f"{name}: header is not SOFA's 13-column schema, not loaded")
        elif schema == "legacy" and name != "gputrace.csv":
            b.load_stats.notes.append(
                f"{name}: six-column GPU schema in a non-GPU file, not loaded")
        else:
            plan.append((p, schema))
    if absent and plan:
        b.load_stats.notes.append("not in folder: " + ", ".join(absent))
    if (path / "blktrace.csv").exists():
        b.load_stats.notes.append("blktrace.csv: not loaded (SOFA does not put its timestamps "
                              "on the trace time base)")
    return plan


def _load_file(b: TraceBuilder, p: Path, schema: str, shift: int, progress: Progress,
               single: bool) -> None:
    progress.check_cancelled()
    handler = _known_handler(p.name, schema)
    try:
        rows = read_rows(p, schema, subrange(progress, 0.0, 0.6),
                         getattr(handler, "columns", None))
    except (OSError, pa.ArrowInvalid) as exc:
        why = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        if single:
            raise TraceFormatError(p, f"cannot read CSV: {why}") from None
        b.load_stats.notes.append(f"{p.name}: unreadable ({why}), not loaded")
        return
    progress.update(0.6, f"converting {p.name}")
    handler = handler or _guess_handler(rows)
    handler(b, rows, shift)
    b.load_stats.read += rows.read
    for reason, n in rows.skipped.items():
        b.load_stats.skip(reason, n)
    if rows.header_repeats and schema != "legacy":
        b.load_stats.notes.append(f"{p.name}: header line repeats {rows.header_repeats} time(s) "
                              "inside the file (concatenated traces)")
    progress.update(1.0, f"loaded {p.name}")


def _handler(spec: str):
    """The loader function named ``"slices.load_x"`` / ``"counters.load_y"``."""
    module, func = spec.split(".")
    return getattr(importlib.import_module(f"{__package__}.{module}"), func)


def _known_handler(name: str, schema: str):
    """The handler for a file name (None: decide from the content)."""
    if schema == "legacy":
        return _handler("slices.load_legacy_gputrace")
    if name in HANDLERS:
        return _handler(HANDLERS[name])
    for known, handler in HANDLERS.items():  # e.g. "gputrace-1.csv", "old_cputrace.csv"
        if Path(known).stem in name:
            return _handler(handler)
    return None


def _guess_handler(rows: CsvRows):
    return _handler("slices.load_gputrace" if _has_copy_kinds(rows) else "slices.load_cputrace")


def _has_copy_kinds(rows: CsvRows) -> bool:
    ck = rows.columns["copyKind"].slice(0, 1000).to_pylist()
    return any(c.strip() not in ("", "-1") for c in ck)


# -- clocks --------------------------------------------------------------------------------
def _time_base(folder: Path, b: TraceBuilder) -> int | None:
    """``sofa_time.txt`` (Unix seconds, 9 decimals) as exact ns, or None."""
    p = folder / "sofa_time.txt"
    if not p.is_file():
        return None
    try:
        text = p.read_text(errors="replace").split()
        ns = int(Decimal(text[0]) * 10**9)
    except (OSError, IndexError, InvalidOperation) as exc:
        b.load_stats.notes.append(f"sofa_time.txt: unreadable ({exc}); wall-clock time unknown")
        return None
    b.meta.extra["sofa_time"] = text[0]
    return ns


def _misc(folder: Path, b: TraceBuilder) -> None:
    """``misc.txt`` facts (elapsed_time, cores, vcores, pid) into ``meta.extra``."""
    p = folder / "misc.txt"
    try:
        lines = p.read_text(errors="replace").splitlines() if p.is_file() else []
    except OSError:
        return
    facts = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 2:
            try:
                facts[parts[0]] = float(parts[1]) if "." in parts[1] else int(parts[1])
            except ValueError:
                facts[parts[0]] = parts[1]
    if facts:
        b.meta.extra["sofa_misc"] = metadata.check(facts, MISC_KINDS, "misc.txt",
                                                   b.load_stats.notes)


#: ``misc.txt`` facts the analysis reads as numbers, and the kind each must be.
MISC_KINDS = {"cores": metadata.count, "vcores": metadata.count,
              "elapsed_time": metadata.amount, "pid": metadata.integer}


def _first_times(p: Path, n: int = 50) -> list[float]:
    """The first column of up to ``n`` data rows (cheap: reads 64 KB)."""
    with open(p, "rb") as f:
        lines = f.read(1 << 16).decode("utf-8", "replace").splitlines()[1:n + 1]
    out = []
    for line in lines:
        try:
            out.append(float(line.split(",", 1)[0]))
        except ValueError:
            continue
    return out


def _clocks(plan: list[tuple[Path, str]], base_ns: int | None, b: TraceBuilder) -> dict:
    """Per-file ns shift onto one clock, and ``meta.epoch_offset_ns``.

    SOFA writes all files relative to ``sofa_time.txt`` or all in Unix seconds; a
    file that disagrees with the others is moved onto their clock when the time
    base is known.
    """
    mode = {}
    for p, schema in plan:
        try:
            t = _first_times(p)
        except OSError:
            continue
        if t and schema == "sofa":
            mode[p.name] = "abs" if float(np.median(t)) > _ABSOLUTE_S else "rel"
    absolute = sorted(n for n, m in mode.items() if m == "abs")
    relative = sorted(n for n, m in mode.items() if m == "rel")
    shifts: dict[str, int] = {}
    if absolute and not relative:
        b.meta.epoch_offset_ns = 0
        b.load_stats.notes.append("timestamps are Unix epoch seconds (--absolute_timestamp)")
    elif base_ns is not None:
        b.meta.epoch_offset_ns = base_ns
        for name in absolute:
            shifts[name] = -base_ns
        if absolute:
            b.load_stats.notes.append(f"{', '.join(absolute)}: Unix epoch times moved onto the "
                                  "sofa_time.txt time base of the other files")
    elif absolute:
        b.load_stats.notes.append(f"clocks differ: {', '.join(absolute)} in Unix seconds, "
                              f"{', '.join(relative)} relative, and no sofa_time.txt to align")
    return shifts


def _empty_reason(folder: Path, plan, b: TraceBuilder) -> str:
    if not plan:
        if any((folder / r).exists() for r in _RAW):
            return ("SOFA logdir with raw logs only: run `sofa preprocess` to write the CSVs "
                    "(no " + ", ".join(list(HANDLERS)[:3]) + ", ...)")
        return "no SOFA trace CSVs (" + "; ".join(b.load_stats.notes[:3] or ["none found"]) + ")"
    skipped = b.load_stats.skipped_total
    return f"no usable rows in {', '.join(p.name for p, _ in plan)} ({skipped:,} skipped)"


IMPORTER = SofaLogdirImporter()
