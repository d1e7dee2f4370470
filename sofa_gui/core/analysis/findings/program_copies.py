"""Copies inside a compiled program: XLA's ``copy`` instructions, run by the runtime's
threads as thunks of their own (``copy.4``), each a whole buffer read and written.

XLA copies a buffer where a program writes into an array it may not overwrite: an
in-place update (``table.at[rows].add(...)``, ``dynamic_update_slice``) of an argument
the caller still holds (not donated: ``jax.jit(f, donate_argnums=...)``) copies the
whole array before the update, every call; a layout the consumer needs that the
producer did not make copies too.  No framework op names it (the program's ops are the
thunks), so the breakdown counts it with the program's compute; its time is memory
traffic, the bound of :mod:`.copy_rules` (``memory_copy_bound``, whose host copies this
reading joins under one id, the larger share winning).

A copy thunk counts from :data:`LARGE_COPY_NS`: the time one core takes to copy
:data:`.copy_rules.LARGE_BYTES` (1 MiB at about 10 GB/s), what makes a copy memory-bound
(the thunk records no shape to read its bytes from); a Python loop calling a jitted
update per lattice site copies a small array per call, tens of µs each, which is the
calls' cost, not memory traffic.  Their union inside the steady steps is the share, which the
verdict moves from compute to memory copies.  The fix donates the updated arguments.
The estimate takes off the copies alone: a lower
bound, since the copy's fresh output buffer (allocated every call and touched page by
page for the first time) goes with it and the trace does not name that time.
"""

from __future__ import annotations

import re

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..intervals import measure_in, union
from ..results import Finding
from .call_overhead import longest_evidence
from .causes import causes_by_name
from .context import Ctx, make_finding
from .copy_rules import DONATE_FIX
from .host_estimate import pool_slices
from .registry import Rule, rule

#: A copy thunk this long has moved about :data:`.copy_rules.LARGE_BYTES` or more.
LARGE_COPY_NS = 100_000
#: XLA's copy instruction as its thunk is named (``copy``, ``copy.4``).
PROGRAM_COPY = re.compile(r"^copy(\.\d+)?$")


def program_copies(ctx: Ctx) -> np.ndarray:
    """The runtime threads' copy thunks of :data:`LARGE_COPY_NS` or more in the steady
    steps of a host-only run (slice indexes)."""
    host = ctx.bd.host
    if host is None or ctx.bd.device is not None or not len(ctx.rows):
        return np.zeros(0, np.int64)
    s = ctx.trace.slices
    pool = pool_slices(ctx, host)
    cp = pool[np.isin(s.name[pool], ctx.trace.name_ids(PROGRAM_COPY.match))
              & (s.dur[pool] >= LARGE_COPY_NS)]
    return cp[ctx.in_steady(s.start[cp], host.starts, host.ends)]


@rule("memory_copy_bound", "Memory-bound copies on the host", 0.05, 0.20,
      "same grading as host-device copies")
def program_copy_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    cp = program_copies(ctx)
    if not len(cp):
        return None
    host, r = ctx.bd.host, ctx.rows
    s = ctx.trace.slices
    cs, ce = union(s.start[cp], s.end[cp])
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    share = min(float(measure_in(cs, ce, host.starts[r], host.ends[r]).sum()) / wall, 0.99)
    n = max(len(r), 1)
    summary = (f"{len(cp) / n:,.1f} copies per steady-state iteration run inside the compiled "
               f"program (XLA copy instructions such as {ctx.trace.name_of(int(cp[0]))}, "
               f"{fmt_ns(share * wall / n)} an iteration, {pct(share)} of the "
               f"step): each reads and writes a whole buffer, memory traffic counted with "
               f"the program's compute. XLA copies an array where the program updates it in "
               f"place (x.at[i].add(...), a dynamic update) while the caller still holds it "
               f"(the argument not donated), or where a layout changes. Donating the updated "
               f"arguments (jax.jit(f, donate_argnums=...)) lets the update write into them. "
               f"Estimate: the step without the copies' time, a lower bound: each copy's "
               f"fresh output buffer, allocated and first touched every call, goes with it "
               f"and the trace does not name that time.")
    causes = causes_by_name(ctx, cp, s.dur[cp].astype(np.float64),
                            float(s.dur[cp].sum()) or 1.0)
    f = make_finding(ctx, spec, share, summary, longest_evidence(ctx, cp), causes=causes,
                     speedup=1.0 / (1.0 - share), title="Copies inside the compiled program",
                     unseen=lambda fix: "" if fix.name == DONATE_FIX or fix.framework == "any"
                     else "a copy inside the compiled program, not a framework op's")
    f.estimate_floor = True
    return f
