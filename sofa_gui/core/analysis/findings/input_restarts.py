"""What starting the loader again costs the steady iterations, and what keeping its
workers saves (the input rule's ``persistent workers`` fix).

A restart (:mod:`..loader_restarts`) spans the epoch's last fetch (the old workers shut
down), the new iterator's construction (new workers started) and its first fetch (their
first batches waited for).  A loader that keeps its workers still fetches that batch, so
the saving is each restart's span less one typical fetch of the run; the estimate is
Amdahl's on that share of the steady time.  It assumes that kept workers hand the new
epoch's first batch over as fast as any other (they start making it only when the new
epoch's iterator asks, so part of a first batch's wait can stay).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..loader_restarts import restarts
from .context import Ctx, amdahl

#: Confidence factor of the estimate: kept workers make the new epoch's first batch only
#: once asked, so part of its wait can stay (the assumption the module docstring states).
FIRST_BATCH_KEPT = 0.9


@dataclass(frozen=True)
class RestartCost:
    """``count`` restarts in the steady iterations, ``excess_ns`` what they take beyond
    a typical fetch (``fetch_ns``) in all, ``share`` that of the steady time."""

    count: int
    excess_ns: float
    fetch_ns: float
    share: float

    def sentence(self) -> str:
        """" The loader started again inside the loop takes 55% ..." ("" without
        restarts)."""
        if not self.count:
            return ""
        each = self.excess_ns / self.count
        return (f" The loader started again inside the loop takes {pct(self.share)} of the "
                f"steady time ({self.count} restart{'s' if self.count != 1 else ''}: an "
                f"epoch's last fetch, the next iterator's construction and its first fetch, "
                f"{fmt_ns(each)} each beyond a typical fetch of {fmt_ns(self.fetch_ns)}): "
                f"its worker processes shut down, started again and waited for.")

    def gain(self) -> tuple[float | None, str, float]:
        """(speed-up, why, confidence factor) of keeping the workers between epochs."""
        if not self.count:
            return None, self.unseen(), 1.0
        return amdahl(self.share), (
            f"no extra core: the {self.count} restart{'s' if self.count != 1 else ''} of the "
            f"loader ({pct(self.share)} of the steady time beyond one typical fetch each) "
            f"removed; assumes kept workers hand the new epoch's first batch over as fast as "
            f"any other"), FIRST_BATCH_KEPT

    def unseen(self) -> str:
        return ("" if self.count else "no restart of the loader in the steady iterations "
                "(no two fetches of one iteration with untraced time between them)")


def restart_cost(ctx: Ctx, host) -> RestartCost:
    """The loader's restarts on ``host``'s main thread in the steady iterations."""
    r = ctx.rows
    if host is None or not len(r) or ctx.bd.whole_trace:
        return RestartCost(0, 0.0, 0.0, 0.0)
    back = restarts(ctx.trace, host.lane, host.starts, host.ends)
    steady = ctx.ph.steady[back.window] if len(back) else np.zeros(0, bool)
    excess = float(back.excess_ns()[steady].sum())
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    return RestartCost(int(steady.sum()), excess, back.fetch_ns, min(excess / wall, 1.0))
