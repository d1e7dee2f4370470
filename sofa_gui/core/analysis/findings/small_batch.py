"""Small-batch inference: each request runs the whole model on one input.

A batch-1 forward pass calls every layer once for one sample: the fixed cost of each call
(dispatch, allocation, the Python between calls) is paid per sample, and the math kernels
run on shapes too small to be efficient.  Batching requests amortises both.  The share is
the main thread's time outside the math ops' own work (convolutions, matmuls): what does
not grow with the batch.  The estimate is :mod:`.batch_estimate`'s: the requests a step
answers one at a time (or the steps captured, where each answers one) batched into one
call, which pays each call's fixed cost once and the math of every input.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import measure_in
from ..results import Finding
from .batch_estimate import batch_fix
from .batching import small_batch
from .causes import causes_by_name, self_times
from .context import Ctx, cause_evidence, make_finding
from .read_rules import read_loops
from .registry import Rule, rule


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      "registered with its thresholds and factors in :mod:`.run_rules`")
def small_batch_inference(ctx: Ctx, spec: Rule) -> Finding | None:
    found = small_batch(ctx)
    if found is None:
        return None
    batch, mine, math, step, small = (found.batch, found.mine, found.math, found.step,
                                      found.small)
    host, r, s = ctx.bd.host, ctx.rows, ctx.trace.slices
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    work = float(self_times(ctx, math).sum()) + _in_read_loops_ns(ctx, host, r)
    share = max(1.0 - work / wall, 0.0)
    ops = mine[s.depth[mine] == s.depth[mine].min()] if len(mine) else mine
    causes = causes_by_name(ctx, ops, s.dur[ops], float(s.dur[ops].sum()) or 1.0)
    evidence = cause_evidence(causes)
    calls = f"{len(mine) / len(r):,.0f} framework calls, median step {fmt_ns(step)}"
    head = (f"Inference on batches of {batch}: each step runs the whole model for "
            f"{batch} input{'s' if batch != 1 else ''} ({calls})" if small else
            f"Inference made of tiny calls: {calls}, its math ops "
            f"{fmt_ns(float(np.median(s.dur[math])))} each (median; "
            f"{len(math) / len(r):,.0f} per step), as a model run for one input or one token "
            f"at a time makes them")
    summary = (f"{head}; the math ops' own work is {pct(1.0 - share)} of the step, the rest "
               f"({pct(share)}) is the fixed cost of each call and the Python between them, "
               f"paid once per call whatever its batch. Batching requests (or the sequences "
               f"decoded together) amortises it.")
    fix = batch_fix(ctx, host)
    if fix is not None:
        summary += fix.basis()
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        title="Framework overhead: small-batch inference",
                        speedup=fix.speedup() if fix is not None else 0.0,
                        assumption=spec.factor("math_scales_with_batch"),
                        notes=("assumes the requests can be batched and the math rates stated",))


def _in_read_loops_ns(ctx: Ctx, host, rows: np.ndarray) -> float:
    """ns of the steady rows inside read loops (host_reads_in_loop's time, not this
    finding's)."""
    loops = read_loops(ctx)
    if not len(loops.starts):
        return 0.0
    return float(measure_in(host.starts[rows], host.ends[rows], loops.starts,
                            loops.ends).sum())
