"""The recompilation rule: compilation that recurs in steady state (measured in
:mod:`.recompiles`) is start-up work repeated every step, bound ``startup``.

Compiling once is start-up (``startup_cost``, which leaves out compile calls that recur in
the steady steps); compiling in every step is what the step spends its time on, and the
fix is to keep the shapes fixed.  The estimate is the step without its compiles: the
steady step's other work, as profiled.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..results import Evidence, Finding
from .causes import causes_by_name
from .context import Ctx, make_finding, top_rows
from .recompiles import Recompiles, recompiles
from .registry import Rule, rule


@rule("recompile", "Recompilation in every step (start-up work repeated)", 0.05, 0.20,
      "fraction of steady-state iteration time spent tracing, lowering and compiling; "
      "recurring = the same function compiles in at least half of the steady iterations "
      "(and at least two)")
def recompile(ctx: Ctx, spec: Rule) -> Finding | None:
    rc = recompiles(ctx)
    if rc is None:
        return None
    n = len(ctx.rows)
    causes = causes_by_name(ctx, rc.spans, rc.span_ns, rc.spent or 1.0)
    summary = (f"The same function ({ctx.trace.names[rc.function]}) is compiled again in "
               f"{rc.n_rows} of {n} steady-state iterations: {fmt_ns(rc.spent / n)} of "
               f"tracing, lowering and compiling per iteration, {pct(rc.share)} of "
               f"steady-state iteration time. A jitted or compiled function compiles again "
               f"for every new input shape (or dtype, or static argument; a tf.function for "
               f"every new Python number passed to it), so this is "
               f"start-up work repeated every step. The estimate is the step without it: "
               f"its other work, {fmt_ns((rc.wall - rc.spent) / n)} per iteration as profiled "
               f"(a program run right after its compile runs cold, so the fixed step may be "
               f"shorter still).")
    return make_finding(ctx, spec, rc.share, summary, _evidence(ctx, rc), causes=causes)


def _evidence(ctx: Ctx, rc: Recompiles) -> list[Evidence]:
    """The iterations that compile longest, each with its first compile work."""
    out, us_, ue, lane = [], rc.starts, rc.ends, ctx.bd.host.lane
    for k in top_rows(rc.per_row):
        i = int(ctx.rows[k])
        j = int(np.searchsorted(ue, ctx.bd.starts[i], side="right"))
        if j >= len(us_) or us_[j] >= ctx.bd.ends[i]:
            continue
        out.append(Evidence(f"iteration {i}: {fmt_ns(rc.per_row[k])} of tracing, lowering and "
                            f"compiling", int(max(us_[j], ctx.bd.starts[i])),
                            int(min(ue[j], ctx.bd.ends[i])), ctx.it(i), [lane]))
    return out
