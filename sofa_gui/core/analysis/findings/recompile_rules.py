"""The recompilation rule: compilation that recurs in steady state (measured in
:mod:`.recompiles`) is start-up work repeated every step, bound ``startup``.

Compiling once is start-up (``startup_cost``, which leaves out compile calls that recur in
the steady steps); compiling in every step is what the step spends its time on, and the
fix is to keep the shapes fixed.  The estimate is the step without its compiles: the
steady step's other work, as profiled.  That work holds the first run of each program just
compiled (:mod:`.first_runs`), slower than the warm run of the fixed step: where the trace
shows the same program's later runs, the first run counts at their time; where it shows
none, the estimate is a lower bound and says so.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..results import Evidence, Finding
from .causes import causes_by_name
from .context import Ctx, amdahl, make_finding, top_rows
from .first_runs import FirstRuns, first_runs
from .recompiles import Recompiles, recompiles
from .registry import Rule, rule

#: A first run's excess over the program's warm runs leaves at least this share of the
#: step's other work (the main thread may not wait for all of the run).
MIN_REST = 0.1


@rule("recompile", "Recompilation in every step (start-up work repeated)", 0.05, 0.20,
      "fraction of steady-state iteration time spent tracing, lowering, compiling and "
      "loading the new program; "
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
               f"tracing, lowering, compiling and loading the new program per iteration, "
               f"{pct(rc.share)} of steady-state iteration time. A jitted or compiled "
               f"function compiles again for every new input shape (or dtype, or static "
               f"argument; a tf.function for every new Python number passed to it), so "
               f"this is start-up work repeated every step. ")
    speedup, said, notes = _estimate(rc, first_runs(ctx, rc), n)
    found = make_finding(ctx, spec, rc.share, summary + said, _evidence(ctx, rc),
                         causes=causes, speedup=speedup, notes=notes)
    found.estimate_floor = bool(notes)  # no warm run to read the cold first runs against
    if "<lambda>" in ctx.trace.names[rc.function]:  # a lambda jitted anew: made in the loop
        found.fixes.sort(key=lambda f: f.name != "jit once before the loop")
    return found


def _estimate(rc: Recompiles, fr: FirstRuns | None, n: int
              ) -> tuple[float, str, tuple[str, ...]]:
    """(estimate, what it rests on, notes): the step without its compiles; where the step
    runs the program it has just compiled, its first run counts at the warm run the trace
    shows for it, and where the trace shows none the estimate is a lower bound."""
    rest = max(rc.wall - rc.spent, 1.0)
    said = f"the step without it: its other work, {fmt_ns(rest / n)} per iteration as profiled"
    if fr is None:
        return amdahl(rc.share), f"The estimate is {said} (a program run right after its " \
            f"compile runs cold, so the fixed step may be shorter still).", ()
    said += f", of which {fmt_ns(fr.cold_ns / n)} is the first run of the program just compiled"
    if fr.warm_ns is not None:
        slower = min(max(fr.cold_ns - fr.warm_ns, 0.0), (1.0 - MIN_REST) * rest)
        return rc.wall / (rest - slower), (
            f"The estimate is {said}; the same program's later runs in the trace take "
            f"{fmt_ns(fr.warm_ns / n)} per iteration: the difference (a first run sets up its "
            f"kernels and touches fresh buffers) is counted with the compiles."), ()
    low = amdahl(rc.share)
    return low, (
        f"The estimate, at least {low:.0f}x, is {said}: a cold run (a first run sets up its "
        f"kernels and touches fresh buffers, often several times slower than a warm one) "
        f"with no warm run in the trace to compare with, so the fixed step is shorter "
        f"still and the gain larger."), (
        "the estimate is a lower bound: the steps run only programs they have just "
        "compiled, cold, and the trace holds no warm run of them",)


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
