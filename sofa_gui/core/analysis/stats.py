"""Top-N statistics tables: kernels, CPU ops, copies and collectives by name.

The table every profiler has (Nsight's "CUDA GPU Kernel Summary", Perfetto's
area-selection aggregates, HTA's kernel breakdown): slices of one kind grouped
by *normalised* name -- the same normalisation the iteration symbols use
(template and argument lists folded, addresses/sizes/step numbers removed) --
with count, total, self time, mean, median, p95 and max per group.

One definition of "in scope": a slice belongs to a window when it *starts*
inside ``[start, end)``, so consecutive iterations never count a slice twice.
Percentiles use linear interpolation between order statistics (numpy's
default); the median is the 50th percentile of the same rule.
``share`` is the group's part of all time of that kind in scope: total time for
kernels, copies and collectives (device time), self time for CPU ops (thread
time, so nested ops are not counted twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..names import demangle
from ..trace import CopyKind, Kind, Trace
from .iterations.symbols import normalize_name
from .results import us
from .roles import host_collectives
from .self_time import self_times

KINDS = ("kernel", "op", "copy", "collective")
SHARE_OF = {"kernel": "kernel time", "op": "CPU op self time",
             "copy": "copy time", "collective": "collective time"}
COPY_LABELS = {int(CopyKind.H2D): "host to device", int(CopyKind.D2H): "device to host",
               int(CopyKind.D2D): "device to device", int(CopyKind.P2P): "peer to peer",
               int(CopyKind.OTHER): "other", int(CopyKind.NONE): "other"}


@dataclass
class Scope:
    """Which slices a table covers: a time window (None: whole trace) and lanes."""

    label: str = "whole trace"
    start_ns: int | None = None
    end_ns: int | None = None
    lanes: np.ndarray | None = None  # lane ids; None = all lanes


@dataclass
class StatRow:
    name: str  # normalised (grouping) name
    full_name: str  # raw name of the longest instance
    count: int
    total_ns: int
    self_ns: int
    mean_ns: float
    median_ns: float
    p95_ns: float
    max_ns: int
    share: float
    longest: int  # slice index of the longest instance (to jump to)
    group: int = -1  # internal group id (StatsTable.members)
    variants: int = 1  # distinct raw names folded into this row
    copy_kind: str = ""  # copies only
    bytes: int = -1  # copies only; -1 unknown

    @property
    def gbps(self) -> float | None:
        """Achieved bandwidth of these copies: their bytes over their own time."""
        if self.bytes < 0 or self.total_ns <= 0:
            return None
        return self.bytes / self.total_ns  # bytes per ns == GB/s

    def to_dict(self) -> dict:
        d = {"name": self.name, "count": self.count, "total_us": us(self.total_ns),
             "self_us": us(self.self_ns), "mean_us": us(self.mean_ns),
             "median_us": us(self.median_ns), "p95_us": us(self.p95_ns),
             "max_us": us(self.max_ns), "share": round(self.share, 6),
             "full_name": self.full_name}
        if self.copy_kind:
            d["copy_kind"] = self.copy_kind
            d["bytes"] = self.bytes if self.bytes >= 0 else None
            g = self.gbps
            d["gbps"] = round(g, 3) if g is not None else None
        return d


@dataclass
class StatsTable:
    kind: str
    scope: Scope
    rows: list[StatRow] = field(default_factory=list)
    instances: int = 0  # slices counted (all rows, before the top-N cut)
    total_ns: int = 0  # the denominator of ``share``
    _idx: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    _group: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

    def members(self, row: int) -> np.ndarray:
        """Slice indexes of every instance of ``rows[row]`` in scope, in start order."""
        return self._idx[self._group == self.rows[row].group]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "scope": self.scope.label,
                "share_of": SHARE_OF[self.kind], "instances": self.instances,
                "rows": [r.to_dict() for r in self.rows]}


def select(trace: Trace, kind: str, scope: Scope) -> np.ndarray:
    """Slice indexes of ``kind`` in ``scope`` (started inside the window, on its lanes)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (choose from {', '.join(KINDS)})")
    s = trace.slices
    lo, hi = 0, len(s)
    if scope.start_ns is not None:
        lo = int(np.searchsorted(s.start, scope.start_ns, side="left"))
    if scope.end_ns is not None:
        hi = int(np.searchsorted(s.start, scope.end_ns, side="left"))
    idx = np.arange(lo, max(lo, hi), dtype=np.int64)
    k = s.kind[idx]
    if kind == "kernel":
        idx = idx[k == int(Kind.KERNEL)]
    elif kind == "op":
        idx = idx[k == int(Kind.CPU_OP)]
    elif kind == "copy":
        idx = idx[k == int(Kind.MEMCPY)]
    else:
        comm = idx[k == int(Kind.COMMUNICATION)]
        on_device = comm[s.device[comm] >= 0]
        if not len(on_device):  # CPU collectives (gloo, MPI, UCC) run on host threads
            comm = np.union1d(comm, idx[np.isin(idx, host_collectives(trace))])
        idx = on_device if len(on_device) else comm
    if scope.lanes is not None:
        idx = idx[np.isin(s.lane[idx], np.asarray(scope.lanes))]
    return idx


def compute_table(trace: Trace, kind: str, scope: Scope | None = None,
                  top: int | None = None) -> StatsTable:
    """The ``kind`` table for ``scope``, rows sorted by total time (longest first)."""
    scope = scope or Scope()
    idx = select(trace, kind, scope)
    s = trace.slices
    dur = s.dur[idx].astype(np.int64)
    own = self_times(trace, idx) if kind == "op" else dur
    group, labels = _groups(trace, idx, kind)
    table = StatsTable(kind, scope, instances=len(idx), total_ns=int(own.sum()), _idx=idx,
                       _group=group)
    if not len(idx):
        return table
    n = len(labels)
    order = np.lexsort((dur, group))  # by group, then duration
    g_sorted, d_sorted = group[order], dur[order]
    first = np.searchsorted(g_sorted, np.arange(n))
    count = np.bincount(group, minlength=n)
    total = np.bincount(group, weights=dur, minlength=n)
    selft = np.bincount(group, weights=own, minlength=n)
    longest_pos = first + count - 1
    median = _quantile(d_sorted, first, count, 0.5)
    p95 = _quantile(d_sorted, first, count, 0.95)
    nbytes = _group_bytes(s.bytes[idx], group, n) if kind == "copy" else None
    variants = _variants(s.name[idx], group, n)
    rows = []
    for g in np.argsort(-total, kind="stable")[: top or n]:
        longest = int(idx[order[longest_pos[g]]])
        rows.append(StatRow(
            name=labels[g], full_name=trace.name_of(longest), count=int(count[g]),
            total_ns=int(total[g]), self_ns=int(selft[g]), mean_ns=float(total[g] / count[g]),
            median_ns=float(median[g]), p95_ns=float(p95[g]), max_ns=int(d_sorted[longest_pos[g]]),
            share=float((selft[g] if kind == "op" else total[g]) / table.total_ns)
            if table.total_ns else 0.0,
            longest=longest, group=int(g), variants=int(variants[g]),
            copy_kind=COPY_LABELS[int(s.copy_kind[longest])] if kind == "copy" else "",
            bytes=int(nbytes[g]) if nbytes is not None else -1))
    table.rows = rows
    return table


def _groups(trace: Trace, idx: np.ndarray, kind: str) -> tuple[np.ndarray, list[str]]:
    """Group id per slice (by normalised name; copies also by direction) and group labels."""
    s = trace.slices
    name_ids = s.name[idx].astype(np.int64)
    if kind == "copy":  # the same name can move data both ways: keep directions apart
        name_ids = name_ids * 8 + s.copy_kind[idx]
    uniq, inv = np.unique(name_ids, return_inverse=True)
    table: dict[tuple, int] = {}
    labels: list[str] = []
    to_group = np.empty(len(uniq), np.int64)
    for j, u in enumerate(uniq.tolist()):
        if kind == "copy":  # names say direction and pageable/pinned: keep them whole
            text, key = trace.names[u // 8].strip(), (trace.names[u // 8].strip(), u % 8)
        else:
            text = normalize_name(demangle(trace.names[u]))
            key = (text,)
        g = table.get(key)
        if g is None:
            g = table[key] = len(labels)
            labels.append(text)
        to_group[j] = g
    return to_group[inv], labels


def _quantile(d_sorted, first, count, q: float) -> np.ndarray:
    """Per-group quantile (linear interpolation) of values sorted within each group."""
    pos = (count - 1) * q
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, count - 1)
    a = d_sorted[first + lo].astype(np.float64)
    b = d_sorted[first + hi].astype(np.float64)
    return a + (b - a) * (pos - lo)


def _group_bytes(nbytes, group, n) -> np.ndarray:
    """Bytes per group; -1 where any copy's size is unknown (a partial sum would lie)."""
    known = np.bincount(group, weights=np.maximum(nbytes, 0), minlength=n)
    unknown = np.bincount(group, weights=nbytes < 0, minlength=n)
    return np.where(unknown > 0, -1, known).astype(np.int64)


def _variants(name_ids, group, n) -> np.ndarray:
    pairs = np.unique(np.stack([group, name_ids.astype(np.int64)]), axis=1)
    return np.bincount(pairs[0], minlength=n)


def iteration_scope(iterations, i: int) -> Scope:
    """One iteration's window (``i`` is the 0-based index; the label names its step too)."""
    n = len(iterations)
    if not -n <= i < n:
        raise IndexError(f"iteration {i} out of range (the trace has {n})")
    i %= n
    from ..units import fmt_ns

    label = f"iteration {i}"
    if i < len(iterations.labels) and iterations.labels[i]:
        label += f" ({iterations.labels[i]})"
    a, b = int(iterations.starts[i]), int(iterations.ends[i])
    return Scope(f"{label}, {fmt_ns(b - a)}", a, b)


def steady_scope(iterations) -> Scope:
    """The steady-state iterations (``Iterations.steady``: all but the leading warm-up)."""
    n = len(iterations)
    steady = getattr(iterations, "steady", None)
    first = int(steady[0]) if steady is not None and len(steady) else min(1, n - 1)
    if n < 2 or first >= n:
        raise IndexError(f"a steady state needs at least 2 iterations (the trace has {n})")
    return Scope(f"steady state (iterations {first}-{n - 1})", int(iterations.starts[first]),
                 int(iterations.ends[-1]))


def range_scope(start_ns: int, end_ns: int, lanes=None) -> Scope:
    """A selected time range (and lanes), as the app's range selection makes."""
    label = "range" if lanes is None else f"range over {len(lanes)} lanes"
    return Scope(label, int(start_ns), int(end_ns),
                 None if lanes is None else np.asarray(lanes, np.int64))


CSV_COLUMNS = ("name", "count", "total_us", "self_us", "mean_us", "median_us", "p95_us",
               "max_us", "share", "full_name", "copy_kind", "bytes", "gbps")


def table_csv(table: StatsTable, out) -> None:
    """The table as CSV (µs on the trace's clock, share as a fraction), one row per group."""
    import csv

    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in table.rows:
        d = r.to_dict()
        w.writerow([csv_cell(d.get(c)) for c in CSV_COLUMNS])


#: A spreadsheet takes a cell starting with one of these as a formula (``=HYPERLINK(...)``).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A CSV cell: numbers as they are; text from the trace with control characters
    escaped (one line) and, when it starts like a formula, prefixed with ``'`` so a
    spreadsheet shows it as text."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return value
    from ..names import visible

    text = visible(value, one_line=True)
    return "'" + text if text.startswith(FORMULA_START) else text


def table_text(table: StatsTable, width: int = 60) -> list[str]:
    """Terminal lines with the app's column names and units."""
    from ..units import fmt_bytes, fmt_ns

    title = {"kernel": "Kernels", "op": "CPU ops", "copy": "Copies",
             "collective": "Collectives"}[table.kind]
    lines = [f"{title}, {table.scope.label}: {table.instances:,} instances in "
             f"{len(table.rows)} shown rows; share = part of {SHARE_OF[table.kind]}"]
    if not table.rows:
        return [*lines, "  (none in this scope)"]
    head = ["Name", "Count", "Total", "Self", "Mean", "Median", "p95", "Max", "Share"]
    if table.kind == "copy":
        head += ["Direction", "Bytes", "Rate"]
    rows = [head]
    for r in table.rows:
        name = r.name if len(r.name) <= width else r.name[: width - 1] + "…"
        cells = [name, f"{r.count:,}", *(fmt_ns(v) for v in (
            r.total_ns, r.self_ns, r.mean_ns, r.median_ns, r.p95_ns, r.max_ns)),
            f"{100 * r.share:.1f}%"]
        if table.kind == "copy":
            cells += [r.copy_kind, fmt_bytes(r.bytes) if r.bytes >= 0 else "unknown",
                      f"{r.gbps:.2f} GB/s" if r.gbps is not None else "unknown"]
        rows.append(cells)
    widths = [max(len(row[c]) for row in rows) for c in range(len(head))]
    for row in rows:
        lines.append("  " + "  ".join(
            cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in
            enumerate(zip(row, widths))).rstrip())
    return lines

