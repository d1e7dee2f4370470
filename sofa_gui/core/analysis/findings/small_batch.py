"""Small-batch inference: each request runs the whole model on one input.

A batch-1 forward pass calls every layer once for one sample: the fixed cost of each call
(dispatch, allocation, the Python between calls) is paid per sample, and the math kernels
run on shapes too small to be efficient.  Batching requests amortises both.  The share is
the main thread's time outside the math ops' own work (convolutions, matmuls): what does
not grow with the batch; the estimate is Amdahl on it, a lower bound (the math itself
also gets more efficient per sample with larger shapes).
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..results import Finding
from .causes import causes_by_name, self_times
from .context import Ctx, make_finding
from .host_estimate import small_batch
from .registry import Rule, rule


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      "registered with its thresholds and factors in :mod:`.run_rules`")
def small_batch_inference(ctx: Ctx, spec: Rule) -> Finding | None:
    found = small_batch(ctx)
    if found is None:
        return None
    batch, mine, math = found
    host, r, s = ctx.bd.host, ctx.rows, ctx.trace.slices
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
