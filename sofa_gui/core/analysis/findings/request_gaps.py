"""The Python a request runs outside the framework calls that answer it, which batching the
requests keeps paying per request (:mod:`.batch_estimate`).

A service that answers requests one at a time runs, between one request's last framework
call and the next one's first, the code that takes the request (from a queue, a socket,
a list) and hands its answer back (a ``Future``'s result set, a reply written).  A
micro-batched service still runs that code once per request; only the model's calls are
paid once per batch.  The Python between two calls of one request (a module's call, a
layer's arguments) is what batching pays once, so the part of the seam's gap beyond it is
what each request keeps.
"""

from __future__ import annotations

import numpy as np

from ...units import fmt_ns
from .context import Ctx
from .work import outermost

#: The quantile of the gaps between requests taken as the Python each request keeps: a
#: longer gap waits (on the thread that feeds the queue, for the CPU), and a batch waits
#: once for many requests.
GAP_Q = 0.1
#: The gap between requests holds Python of their own where it is at least this many times
#: the gap between two calls of a request (else it is one more such gap: a decode's turn).
SEAM_RATIO = 2.0


def between_ns(ctx: Ctx, ops: np.ndarray, period: int, count: int) -> float:
    """ns of Python each of ``count`` repeats of a unit of ``period`` outermost calls (all
    their ``ops``, all depths) runs outside its framework calls that a batched call keeps
    paying per request: the :data:`GAP_Q` quantile of the gaps between one repeat's last
    outermost call and the next repeat's first, beyond the median gap between two calls
    of a repeat; 0 where it is under :data:`SEAM_RATIO` times that median, for a unit of
    one call (no gap inside to tell the seam from) or for fewer than 3 repeats."""
    if count < 3 or period < 2:
        return 0.0
    s = ctx.trace.slices
    top = outermost(s.start, s.end, ops)
    if len(top) != period * count:
        return 0.0
    gaps = (s.start[top[1:]] - s.end[top[:-1]]).astype(np.float64)
    seam = (np.arange(1, len(top)) % period) == 0
    at, inside = float(np.quantile(gaps[seam], GAP_Q)), float(np.median(gaps[~seam]))
    return at - inside if at >= SEAM_RATIO * inside else 0.0


def kept_words(ns: float) -> str:
    """The Python each request keeps, in words, for an estimate's basis ("" where none)."""
    return (f" and the Python each request keeps outside the framework calls ("
            f"{fmt_ns(ns)}: taking and answering it, the {GAP_Q:.0%} quantile of the gaps "
            f"between one request's last call and the next's first, less the median gap "
            f"between two calls of a request; it holds the loop's own Python too, which "
            f"batching removes: a lower bound)" if ns > 0 else "")
