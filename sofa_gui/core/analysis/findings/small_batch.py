"""Small-batch inference: each request runs the whole model on one input.

A batch-1 forward pass calls every layer once for one sample: the fixed cost of each call
(dispatch, allocation, the Python between calls) is paid per sample, and the math kernels
run on shapes too small to be efficient.  Batching requests amortises both.  The share is
the main thread's time outside the math ops' own work (convolutions, matmuls): what does
not grow with the batch; the estimate is Amdahl on it, a lower bound (the math itself
also gets more efficient per sample with larger shapes).
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..results import Finding
from .causes import causes_by_name, self_times
from .context import Ctx, make_finding
from .registry import Rule, rule

#: The ops whose own time grows with the batch (the model's math).
MATH_OP = re.compile(r"^aten::(_slow_conv2d_forward|mkldnn_convolution|convolution_overrideable|"
                     r"_convolution|addmm|mm|bmm|baddbmm|_scaled_dot_product\w*)$")
#: The batch the model's math ops see (first input's first dimension) at most this.
SMALL_BATCH = 4
#: Steps this short carry the fixed per-call costs in full.
SHORT_STEP_NS = 20_000_000


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      "registered with its thresholds and factors in :mod:`.run_rules`")
def small_batch_inference(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    if host is None or ctx.bd.device is not None or ctx.facts.value("mode") != "inference":
        return None
    r = ctx.rows
    if not len(r) or float(np.median(host.ends[r] - host.starts[r])) > SHORT_STEP_NS:
        return None
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[(s.kind[mine] == int(Kind.CPU_OP))
                & ctx.in_steady(s.start[mine], host.starts, host.ends)]
    math = mine[np.isin(s.name[mine], ctx.trace.name_ids(MATH_OP.match))]
    batch = _batch(ctx, math)
    if batch is None or batch > SMALL_BATCH:
        return None
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    work = float(self_times(ctx, math).sum())
    share = max(1.0 - work / wall, 0.0)
    ops = mine[s.depth[mine] == s.depth[mine].min()] if len(mine) else mine
    causes = causes_by_name(ctx, ops, s.dur[ops], float(s.dur[ops].sum()) or 1.0)
    evidence = [c.instance for c in causes if c.instance is not None]
    summary = (f"Inference on batches of {batch}: each step runs the whole model for "
               f"{batch} input{'s' if batch != 1 else ''} ({len(mine) / len(r):,.0f} framework "
               f"calls, median step {fmt_ns(float(np.median(host.ends[r] - host.starts[r])))}); "
               f"the math ops' own work is {pct(1.0 - share)} of the step, the rest ({pct(share)}) "
               f"is the fixed cost of each call and the Python between them, paid once per "
               f"batch. Batching requests amortises it; the estimate counts that part only "
               f"(larger shapes also make the math itself cheaper per input).")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        title="Framework overhead: small-batch inference",
                        assumption=spec.factor("math_scales_with_batch"),
                        notes=("assumes the math ops' time grows with the batch",))


def _batch(ctx: Ctx, math: np.ndarray) -> int | None:
    """The most common first dimension of the math ops' first input (recorded shapes);
    None without shapes."""
    s = ctx.trace.slices
    seen: dict[int, int] = {}
    for j in math[:: max(len(math) // 64, 1)].tolist():
        dims = (ctx.trace.args.get(int(s.args[j])) or {}).get("Input Dims") \
            if s.args[j] >= 0 else None
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0] \
                and isinstance(dims[0][0], int):
            seen[dims[0][0]] = seen.get(dims[0][0], 0) + 1
    return max(seen, key=seen.get) if seen else None
