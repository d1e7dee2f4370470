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
from ..intervals import measure_in
from ..results import Finding
from .causes import causes_by_name, self_times
from .context import Ctx, make_finding
from .read_rules import in_read_loops, read_loops
from .registry import Rule, rule
from .work import TINY_NS

#: The ops whose own time grows with the batch (the model's math).
MATH_OP = re.compile(r"^aten::(_slow_conv2d_forward|mkldnn_convolution|convolution_overrideable|"
                     r"_convolution|addmm|mm|bmm|baddbmm|_scaled_dot_product\w*)$")
#: The batch the model's math ops see (first input's first dimension) at most this.
SMALL_BATCH = 4
#: Steps this short carry the fixed per-call costs in full.
SHORT_STEP_NS = 20_000_000


#: Framework calls per step (all depths) from which a step of tiny math calls is made of
#: per-call cost, whatever batch its shapes show (a token-by-token decode loop).
MANY_CALLS = 1000


@rule("op_overhead_bound", "Framework overhead: many tiny ops", 0.05, 0.20,
      "registered with its thresholds and factors in :mod:`.run_rules`")
def small_batch_inference(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    if host is None or ctx.bd.device is not None or ctx.facts.value("mode") != "inference":
        return None
    r = ctx.rows
    if not len(r):
        return None
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    mine = mine[(s.kind[mine] == int(Kind.CPU_OP))
                & ctx.in_steady(s.start[mine], host.starts, host.ends)]
    mine = mine[~in_read_loops(ctx, s.start[mine])]  # a loop of reads is host_reads_in_loop's
    math = mine[np.isin(s.name[mine], ctx.trace.name_ids(MATH_OP.match))]
    batch = _batch(ctx, math)
    step = float(np.median(host.ends[r] - host.starts[r]))
    small = batch is not None and batch <= SMALL_BATCH and step <= SHORT_STEP_NS
    tiny = _tiny_calls(ctx, mine, math, len(r))
    if not small and not tiny:
        return None
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    work = float(self_times(ctx, math).sum()) + _in_read_loops_ns(ctx, host, r)
    share = max(1.0 - work / wall, 0.0)
    ops = mine[s.depth[mine] == s.depth[mine].min()] if len(mine) else mine
    causes = causes_by_name(ctx, ops, s.dur[ops], float(s.dur[ops].sum()) or 1.0)
    evidence = [c.instance for c in causes if c.instance is not None]
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
               f"decoded together) amortises it; the estimate counts that part only (larger "
               f"shapes also make the math itself cheaper per input).")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        title="Framework overhead: small-batch inference",
                        assumption=spec.factor("math_scales_with_batch"),
                        notes=("assumes the math ops' time grows with the batch",))


def _tiny_calls(ctx: Ctx, mine: np.ndarray, math: np.ndarray, n_steps: int) -> bool:
    """The step is made of tiny calls: at least :data:`MANY_CALLS` framework calls per
    step and math calls whose median is tiny (:data:`.work.TINY_NS`)."""
    if not len(math) or len(mine) < MANY_CALLS * n_steps:
        return False
    return float(np.median(ctx.trace.slices.dur[math])) <= TINY_NS


def _in_read_loops_ns(ctx: Ctx, host, rows: np.ndarray) -> float:
    """ns of the steady rows inside read loops (host_reads_in_loop's time, not this
    finding's)."""
    loops = read_loops(ctx)
    if not len(loops.starts):
        return 0.0
    return float(measure_in(host.starts[rows], host.ends[rows], loops.starts,
                            loops.ends).sum())


def _batch(ctx: Ctx, math: np.ndarray) -> int | None:
    """The most common first dimension of the math ops' first input of two or more
    dimensions (recorded shapes; ``addmm``'s first input is its bias); None without
    shapes."""
    s = ctx.trace.slices
    seen: dict[int, int] = {}
    for j in math[:: max(len(math) // 64, 1)].tolist():
        dims = (ctx.trace.args.get(int(s.args[j])) or {}).get("Input Dims") \
            if s.args[j] >= 0 else None
        first = next((d for d in dims if isinstance(d, list) and len(d) >= 2
                      and isinstance(d[0], int)), None) if isinstance(dims, list) else None
        if first is not None:
            seen[first[0]] = seen.get(first[0], 0) + 1
    return max(seen, key=seen.get) if seen else None
