"""The estimate of a ``tf.data`` fix for input the loop makes eagerly (files decoded,
resized and scaled one op at a time before the compiled model call:
:func:`..host_side.eager_decoding`).

Moved into a ``tf.data`` map the same ops run as a graph on the pipeline's threads: their
kernels stay, the eager dispatch of each op and the loop's Python between them go.  The
kernels then run beside the model's call, so the step cannot get shorter than the rest of
it (the model), nor than the kernels' and the rest's work spread over the usable cores
(a parallel map; one thread for a serial one that only prefetches)."""

from __future__ import annotations

import numpy as np

from ..host_side import eager_decoding
from ..intervals import covered, measure_in, union
from .context import Ctx
from .input_estimate import usable_cores

#: The main thread's span of an eager op's kernel (without its dispatch).
KERNEL = "EagerKernelExecute"


def eager_decoding_speedup(ctx: Ctx, fix) -> tuple[float, str, float] | None:
    """(speed-up, why, confidence factor) of a ``tf.data`` fix (``fix.gain`` "cores": a
    parallel map, "core": a background thread) where the steady steps make their input
    eagerly; None where they do not."""
    host, r = ctx.bd.host, ctx.rows
    if host is None or ctx.bd.devices or not len(r):
        return None
    trace = ctx.trace
    s = trace.slices
    idx = trace.lane_slices(host.lane)
    _, (lo, hi) = eager_decoding(trace, host.lane, idx)
    if not len(lo):
        return None
    ws, we = host.starts[r], host.ends[r]
    wall = float((we - ws).sum()) or 1.0
    a, b = union(lo, hi)
    made = float(measure_in(a, b, ws, we).sum()) / wall
    if made <= 0:
        return None
    k = idx[np.isin(s.name[idx], trace.name_ids(lambda n: n == KERNEL))]
    k = k[covered(s.start[k], a, b)]
    ka, kb = union(s.start[k], s.end[k])
    kernels = float(measure_in(ka, kb, ws, we).sum()) / wall
    rest = 1.0 - made
    cores, where = usable_cores(ctx)
    use = min(cores, 2.0) if fix.gain == "core" else cores  # the main thread and one more
    bounds = {"the rest of the step (the model's call)": rest,
              "the kernels' and the rest's work over the cores": (kernels + rest) / use}
    if fix.gain == "core":
        bounds["the kernels on one background thread"] = kernels
    what, floor = max(bounds.items(), key=lambda kv: kv[1])
    told = "; ".join(f"{k_} {v:.0%}" for k_, v in bounds.items())
    return 1.0 / max(floor, 1e-6), (
        f"the eager input ({made:.0%} of the step) runs as a graph in the map: its kernels "
        f"({kernels:.0%}) stay, the eager dispatch and the Python between the ops go; the "
        f"step cannot get shorter than {what} ({floor:.0%}; {told}; {where})"), 0.9
