"""Autograd's anomaly detection left on in a PyTorch run (run fact ``anomaly_detection``
on, :mod:`..grad_facts`): a debugging mode that costs the step twice.

* Every forward op that records a graph node stores the Python stack it was called from
  (for the backward's error message).  The capture runs inside the op, before its own
  work, and the profiler records no event for it: it lands in the op's own time (its
  duration less its children), so an ``aten::t`` that takes 3 µs takes 150 µs.  Its
  excess is read as the own time of the forward's ops that carry autograd's ``Sequence
  number`` (outside the backward and the optimizer's step); a matmul's own time less
  its math, its multiply-adds at the rate the backward's matmuls of the same trace run
  (they store no stack), and none of another math op's time (a convolution's or an
  attention's work is not read from its shapes) nor of a matmul's where that rate or its
  shapes are not recorded (a lower bound there).
* Every backward node's outputs are checked for NaN, one ``isnan`` / ``_is_any_true`` /
  ``item`` each, right inside the node's evaluation: tiny ops, timed as such (the
  profiler's own cost is most of their captured time).

The fix is ``torch.autograd.set_detect_anomaly(False)`` (or the ``detect_anomaly()``
block left out): the estimate is :mod:`.host_estimate`'s step without the profiler before
the fix over the step after it, the stack capture taken as its captured time (it is
Python's own work, not the recorder's) and the checks as a loop of tiny ops.  The two
lie between the step's other ops, a piece before each, so what stays is away from itself
only one piece at a time (about 0.1 ms): it runs little warmer after the fix, unlike the
rest of a step after a loop that held the thread for milliseconds at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..grad_facts import direct_children, evaluations, recorded
from ..intervals import enclosing
from ..results import Finding
from .batch_estimate import MATMUL, matmul_work
from .causes import causes_by_name, self_times
from .context import Ctx, cause_evidence, make_finding
from .host_estimate import MATH_OP, TINY_LOOP_UNPROFILED, HostFix, rest_math
from .registry import Rule, rule
from .work import input_dims, optimizer_steps

#: The ops of anomaly mode's NaN check of one backward output.
CHECK_OPS = ("aten::isnan", "aten::_is_any_true", "aten::item")
#: The fix's name in :data:`.fixes.FIXES`.
FIX_NAME = "anomaly detection off"


@rule("anomaly_detection_on", "Autograd anomaly detection left on", 0.05, 0.20,
      "run fact anomaly_detection on (NaN checks inside the backward's node evaluations); "
      "share: the forward ops' stack capture and the checks, of the main thread's time")
def anomaly_detection_on(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    if ctx.facts.value("anomaly_detection") != "on" or host is None or not len(ctx.rows):
        return None
    r = ctx.rows
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    fwd, excess = stack_capture(ctx, host)
    checks = nan_checks(ctx, host)
    check_ns = float(ctx.trace.slices.dur[checks].sum())
    stack_ns = float(excess.sum())
    removed = min((stack_ns + check_ns) / wall, 1.0)
    if removed <= 0:
        return None
    s = ctx.trace.slices
    gone = np.concatenate([fwd, checks])
    math = rest_math(ctx, host, host.starts[r], host.ends[r], s.start[checks], s.end[checks])
    math -= float(excess[np.isin(s.name[fwd], ctx.trace.name_ids(MATH_OP.match))].sum())
    unprofiled = (stack_ns + check_ns * TINY_LOOP_UNPROFILED) / (stack_ns + check_ns)
    pieces = len(fwd) + len(checks)
    fix = Interleaved(removed, min(max(math, 0.0) / wall, 1.0), unprofiled=unprofiled,
                      what="anomaly detection", step_ns=ctx.call_ns(wall, len(r)),
                      piece_ns=(stack_ns + check_ns) * unprofiled / max(pieces, 1))
    n = max(ctx.ph.n_steady, 1)
    causes = causes_by_name(ctx, gone, np.concatenate([excess, s.dur[checks]]),
                            stack_ns + check_ns)
    summary = (f"Autograd's anomaly detection is on ({ctx.facts.get('anomaly_detection').proof})"
               f": {len(fwd) / n:,.0f} forward ops a step store their Python stack, "
               f"{fmt_ns(stack_ns / n)} a step of their own time beyond their work, and "
               f"{len(checks) / n:,.0f} NaN-check ops in the backward take "
               f"{fmt_ns(check_ns / n)}: together {pct(removed)} of the main thread's time. "
               f"It is a debugging mode: off, the same step runs without either."
               f"{fix.basis()}")
    f = make_finding(ctx, spec, removed, summary, cause_evidence(causes), causes=causes,
                     speedup=fix.speedup())
    for x in f.fixes:
        if x.name == FIX_NAME:
            x.estimate, x.estimate_why = f.estimated_speedup, "the step without both costs"
    return f


@dataclass
class Interleaved(HostFix):
    """A host-side fix whose removed part lies between the step's ops, a piece of
    ``piece_ns`` (unprofiled) before each, not in one block: what stays is away from
    itself only that long at a time, and only that much warmer after the fix."""

    piece_ns: float = 0.0

    def away_ns(self) -> tuple[float, float]:
        return self.piece_ns, 0.0

    def basis(self) -> str:
        return super().basis().replace(
            " a step anomaly detection kept it away", " anomaly detection kept it away "
            "between two of its ops")


def stack_capture(ctx: Ctx, host) -> tuple[np.ndarray, np.ndarray]:
    """(the forward's ops that record a graph node in the steady steps, each one's own
    time beyond its work, ns): see the module doc."""
    s = ctx.trace.slices
    ops = ctx.steady_slices(host, Kind.CPU_OP)
    outside = np.concatenate([evaluations(ctx.trace), optimizer_steps(ctx, host.lane)])
    ops = ops[~_inside_any(ctx, outside, ops)]
    if not len(ops):
        return ops, np.zeros(0)
    ops = ops[recorded(ctx.trace, ops)]
    own = self_times(ctx, ops).astype(np.float64)
    math = np.isin(s.name[ops], ctx.trace.name_ids(MATH_OP.match))
    mm = np.isin(s.name[ops], ctx.trace.name_ids(MATMUL.match))
    rate = _backward_rate(ctx, host)
    macs = np.array([_macs(ctx, int(j)) for j in ops[mm].tolist()], np.float64)
    work = np.where((macs > 0) & (rate > 0), macs / max(rate, 1e-12), np.inf)
    own[mm] = np.maximum(own[mm] - work, 0.0)
    own[math & ~mm] = 0.0  # a convolution's or attention's work: shapes not read here
    return ops, own


def nan_checks(ctx: Ctx, host) -> np.ndarray:
    """Anomaly mode's NaN-check ops right inside the steady steps' node evaluations."""
    s = ctx.trace.slices
    evals = evaluations(ctx.trace)
    evals = evals[ctx.in_steady(s.start[evals], host.starts, host.ends)]
    names = ctx.trace.name_ids(lambda n: n in CHECK_OPS)
    return direct_children(ctx.trace, evals, names)[0] if len(evals) else evals


def _backward_rate(ctx: Ctx, host) -> float:
    """Multiply-adds per ns of the backward's matmuls (no stack is stored in a backward
    that records no graph); 0 when none has recorded shapes."""
    s = ctx.trace.slices
    evals = evaluations(ctx.trace)
    evals = evals[ctx.in_steady(s.start[evals], host.starts, host.ends)]
    mine = ctx.trace.lane_slices(host.lane)
    mm = mine[np.isin(s.name[mine], ctx.trace.name_ids(MATMUL.match))]
    mm = mm[_inside_any(ctx, evals, mm)]
    if not len(mm):
        return 0.0
    macs = np.array([_macs(ctx, int(j)) for j in mm.tolist()], np.float64)
    own = self_times(ctx, mm).astype(np.float64)
    ok = macs > 0
    return float(macs[ok].sum() / max(own[ok].sum(), 1.0)) if ok.any() else 0.0


def _macs(ctx: Ctx, j: int) -> float:
    """Multiply-adds of a matmul call (:data:`.batch_estimate.MATMUL`) from its recorded
    shapes (:func:`.batch_estimate.matmul_work`; 0 when they say nothing)."""
    work = matmul_work(input_dims(ctx, j))
    return work[0] / 2.0 if work is not None else 0.0


def _inside_any(ctx: Ctx, parents: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per slice of ``idx``: inside one of ``parents`` on its lane."""
    s = ctx.trace.slices
    return enclosing(s.start, s.end, s.lane, parents, idx)[1] >= s.end[idx]


