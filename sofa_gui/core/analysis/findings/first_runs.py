"""The first run of a program a step has just compiled again: the run the fixed step would
make warm.

A step that compiles its function again runs the new program right after, for the first
time, and a first run is slower than the same program's later ones (a few to tens of
times on the CPU: what its kernels set up on first use, its code and fresh buffers faulted
in; XLA's fused matmuls of a small model took 0.4-1.2 ms each in a first run, where the
whole warm step takes 0.2-0.5 ms unprofiled).  The trace names such runs:

* XLA's thunks record the ``program_id`` and ``run_id`` of the executable they run: the
  run of a program of the recompiled function's module (``PjitFunction(f)`` runs
  ``jit_f``) that the trace never ran before, in a step that compiles, is a first run;
* a ``tf.function`` traced again runs a new concrete function (:mod:`.recompiles`): the
  kernels of its first call, from ``FunctionRun`` to the end of its run.

Where the trace also holds later runs of the same program, their median is its warm run;
where it holds none (each step compiles a program that runs once), the warm run cannot be
read from the trace: the step without its compiles, as profiled, is then an upper bound
of the fixed step, and the estimate a lower bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ..host_side import window_of
from ..iterations.dispatch import function_module, module_key
from .context import Ctx
from .recompiles import TF_CONCRETE, TF_READY, TF_RUN, Recompiles

_PROGRAM = re.compile(rb'"program_id":(-?\d+)')
_RUN = re.compile(rb'"run_id":(-?\d+)')
_MODULE = re.compile(rb'"hlo_module":"([^"\\]{1,200})"')


@dataclass
class FirstRuns:
    """The steady steps' first runs of the programs they compile."""

    n: int  # first runs in the steady steps
    cold_ns: float  # their time
    warm_ns: float | None  # the same programs' later runs' (median each); None: some has none


def first_runs(ctx: Ctx, rc: Recompiles) -> FirstRuns | None:
    """The first runs of the programs the steady steps compile (None: the trace names
    none)."""
    runs = _xla_first_runs(ctx, rc) or _tf_first_runs(ctx, rc)
    if not runs:
        return None
    cold = sum(c for c, _ in runs)
    warm = None if any(w is None for _, w in runs) else sum(w for _, w in runs)
    return FirstRuns(len(runs), float(cold), warm)


def _xla_first_runs(ctx: Ctx, rc: Recompiles) -> list[tuple[float, float | None]]:
    """(cold ns, warm ns or None) per first run of an executable of the recompiled
    function's module in a steady step that compiles."""
    module = function_module(ctx.trace.names[rc.function])
    runs = [r for r in _xla_runs(ctx.trace) if r[0] == module]
    if not runs:
        return []
    out, seen = [], set()
    for _, program, start, end in sorted(runs, key=lambda r: r[2]):
        if program in seen:
            continue
        seen.add(program)
        if _compiling_row(ctx, rc, start):
            later = [e - a for _, p, a, e in runs if p == program and a > start]
            out.append((float(end - start), float(np.median(later)) if later else None))
    return out


def _compiling_row(ctx: Ctx, rc: Recompiles, t_ns: int) -> bool:
    """Whether ``t_ns`` lies in a steady step that compiles."""
    r = ctx.rows
    w = int(window_of(np.asarray([t_ns]), ctx.bd.starts[r], ctx.bd.ends[r])[0])
    return w >= 0 and rc.per_row[w] > 0


def _xla_runs(trace) -> list[tuple[str, int, int, int]]:
    """(module, program id, start, end) per run of an XLA executable, from its thunks'
    ``hlo_module``, ``program_id`` and ``run_id``; once per trace."""
    return trace.memo("first_runs.xla", lambda: _read_xla_runs(trace))


def _read_xla_runs(trace) -> list[tuple[str, int, int, int]]:
    s = trace.slices
    rows = np.flatnonzero((s.args >= 0) & (s.kind == int(Kind.CPU_OP)))
    if not len(rows) or not trace.args.may_hold(s.args[rows], (b"program_id",)):
        return []
    spans: dict[int, list] = {}
    for i in rows.tolist():
        raw = trace.args.raw(int(s.args[i]))
        p, r, m = _PROGRAM.search(raw), _RUN.search(raw), _MODULE.search(raw)
        if not (p and r and m):
            continue
        got = spans.setdefault(int(r.group(1)), [module_key(m.group(1).decode("utf-8", "replace")),
                                                 int(p.group(1)), int(s.start[i]),
                                                 int(s.end[i])])
        got[2], got[3] = min(got[2], int(s.start[i])), max(got[3], int(s.end[i]))
    return [tuple(v) for v in spans.values()]


def _tf_first_runs(ctx: Ctx, rc: Recompiles) -> list[tuple[float, float | None]]:
    """(cold ns, warm ns or None) per first call of a new concrete function among the
    steady compile work: its run's kernels (from ``FunctionRun``), against the later
    calls of the same concrete function."""
    t, s = ctx.trace, ctx.trace.slices
    mine = t.lane_slices(ctx.bd.host.lane)
    named = {int(n) for n in rc.spans.tolist()}
    firsts = [i for i in named if TF_CONCRETE.match(t.names[int(s.name[i])])]
    if not firsts:
        return []
    runs = mine[np.isin(s.name[mine], t.name_ids(TF_RUN.match))]
    ready = np.sort(s.start[mine[np.isin(s.name[mine], t.name_ids(TF_READY.match))]])
    calls = mine[np.isin(s.name[mine], s.name[firsts])]
    out = []
    for i in sorted(firsts, key=lambda j: s.start[j]):
        a, z = _run_of(s, runs, i)
        if z <= a:
            continue
        k = int(np.searchsorted(ready, a, side="left"))
        a = int(ready[k]) if k < len(ready) and ready[k] <= z else a
        later = [e - b for b, e in (_run_of(s, runs, j) for j in calls.tolist()
                                    if s.name[j] == s.name[i] and s.start[j] > s.start[i])]
        out.append((float(z - a), float(np.median(later)) if later else None))
    return out


def _run_of(s, runs: np.ndarray, call: int) -> tuple[int, int]:
    """(start, end) of the first kernel run inside ``call``; (0, 0) when none."""
    inside = runs[(s.start[runs] >= s.start[call]) & (s.end[runs] <= s.end[call])]
    if not len(inside):
        return 0, 0
    j = inside[np.argmin(s.start[inside])]
    return int(s.start[j]), int(s.end[j])
