"""What running an inference forward without autograd's recording saves: the estimate of
the inference-mode fix (``torch.inference_mode()`` / ``torch.no_grad()``), shown where the
run facts prove an inference run whose model ops autograd records (:mod:`..grad_facts`).

The trace shows which ops ran in grad mode (their ``Sequence number``), not what the
recording costs, so the estimate is autograd's bookkeeping per op at a measured rate
(:data:`GRAD_OP_NS`) over the step without the profiler (:mod:`.host_estimate`): a lower
bound.  A module with a fused inference path (``nn.TransformerEncoderLayer``,
``nn.MultiheadAttention``) leaves its general path too, and memory kept for a backward
is freed sooner; neither shows in a trace of the recorded run, and the estimate says so.

Measured on one thread of an idle 2-core machine: a forward of 50 small layers (linear,
ReLU, scale, view; 300 ops a forward with a sequence number) runs 1.3-1.6 µs an op
faster under ``torch.inference_mode()`` than with grad mode on, 1.1-1.6 µs under
``torch.no_grad()``.
"""

from __future__ import annotations

import numpy as np

from ...trace import Kind
from ..grad_facts import recorded
from .context import Ctx
from .host_estimate import fix_named, speedup_without

#: What autograd's recording costs per op run in grad mode (ns, without the profiler).
GRAD_OP_NS = 1_500
#: Ops read for their sequence number (evenly spread over the steady steps).
SAMPLE = 4_000
#: The fix's name in :data:`.fixes.FIXES`.
FIX_NAME = "inference mode"


def grad_ops_per_step(ctx: Ctx, host) -> float:
    """Ops of the main thread's steady steps that ran in grad mode, per step."""
    ops = ctx.steady_slices(host, Kind.CPU_OP)
    if not len(ops):
        return 0.0
    read = ops[np.linspace(0, len(ops) - 1, min(len(ops), SAMPLE)).astype(np.int64)]
    return float(recorded(ctx.trace, read).mean()) * len(ops) / max(ctx.ph.n_steady, 1)


def estimate_inference_mode(ctx: Ctx, finding) -> None:
    """Fill the inference-mode fix's estimate of ``finding`` (when it shows that fix) and
    say it in the summary."""
    fix = fix_named(finding, FIX_NAME)
    host = ctx.bd.host
    if fix is None or host is None or not len(ctx.rows):
        return
    n = grad_ops_per_step(ctx, host)
    fix.estimate = speedup_without(ctx, host, n * GRAD_OP_NS * len(ctx.rows))
    fix.estimate_why = (f"{n:,.0f} ops a step run in grad mode, autograd's bookkeeping "
                        f"{GRAD_OP_NS / 1000:g} µs each (measured): a lower bound, since a "
                        f"module with a fused inference path leaves its general one too")
    finding.summary += (f" The model's ops run with autograd recording them in an inference "
                        f"run (grad_mode recorded): under torch.inference_mode() at least "
                        f"{fix.estimate:.2f}x ({fix.estimate_why}).")
