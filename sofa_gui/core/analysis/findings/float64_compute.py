"""What computing in float32 instead of float64 saves: the estimate of the float32 fix of
the compute finding, shown where the run facts prove a model computing in float64
(``precision`` fp64: its matmuls and convolutions take ``double`` inputs, e.g. a model
turned ``.double()`` to match NumPy's default float64 arrays).

The trace times the float64 ops and records their input types, not what float32 would
take, so the estimate is the main thread's ops with a float64 input at
:data:`FP32_OVER_FP64` of their own time (ops too short to be more than their fixed
dispatch cost kept whole), over the step without the profiler
(:mod:`.host_estimate`).  On a CPU the same SIMD instructions hold half as many float64
values as float32 ones and a matrix of them moves twice the bytes, so float64 matmuls
and elementwise ops run at about half the float32 rate (a GPU's float64 rate is 1/2 to
1/64 of its float32 one: no estimate is made there).
"""

from __future__ import annotations

import numpy as np

from ...trace import Kind
from ..precision_facts import fp64_inputs
from .causes import self_times
from .context import Ctx
from .host_estimate import fix_named, speedup_without
from .work import TINY_NS, slice_args

#: float32 time over float64 time of the same op on a CPU.
FP32_OVER_FP64 = 0.5
#: The fix's name in :data:`.fixes.FIXES`.
FIX_NAME = "float32 instead of float64"


def float64_ns(ctx: Ctx, host) -> float:
    """Own time (ns) of the main thread's ops in the steady steps that take a float64
    input, ops under :data:`.work.TINY_NS` left out (their fixed dispatch cost is the
    same in float32)."""
    s = ctx.trace.slices
    ops = ctx.steady_slices(host, Kind.CPU_OP)
    ops = ops[(s.args[ops] >= 0) & (s.dur[ops] >= TINY_NS)]
    wide = np.array([fp64_inputs(slice_args(ctx, j).get("Input type"))
                     for j in ops.tolist()], bool)
    return float(self_times(ctx, ops[wide]).sum()) if wide.any() else 0.0


def estimate_float32(ctx: Ctx, finding) -> None:
    """Fill the float32 fix's estimate of ``finding`` (where it shows that fix, on a CPU
    run) and say it in the summary."""
    fix = fix_named(finding, FIX_NAME)
    host = ctx.bd.host
    if fix is None or host is None or not len(ctx.rows):
        return
    if ctx.bd.device is not None:
        fix.estimate_why = ("a device's float64 rate is 1/2 to 1/64 of its float32 one, "
                            "which the trace does not say")
        return
    r = ctx.rows
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    wide = float64_ns(ctx, host)
    if wide <= 0:
        return
    saved = wide * (1.0 - FP32_OVER_FP64)
    fix.estimate = speedup_without(ctx, host, saved, saved)
    fix.estimate_why = (f"the ops with float64 inputs, {wide / wall:.0%} of the main thread's "
                        f"time, at {FP32_OVER_FP64:g}x their time in float32 (a CPU's SIMD "
                        f"instructions hold twice as many float32 values, and a float32 "
                        f"matrix moves half the bytes)")
    finding.summary += (f" The model computes in float64 (precision fp64): in float32 about "
                        f"{fix.estimate:.2f}x ({fix.estimate_why}).")
