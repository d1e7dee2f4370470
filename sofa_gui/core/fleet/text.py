"""``sofa-gui fleet`` without ``--json``: the cross-rank result as text lines."""

from __future__ import annotations

import numpy as np

from .cross import FleetResult


def _ms(ns: float) -> str:
    return "-" if ns is None or np.isnan(ns) else f"{ns / 1e6:.2f} ms"


def fleet_text(res: FleetResult) -> list[str]:
    e = res.engine
    ok = [s for s in res.summaries if s.ok]
    lines = [f"engine: dask, scheduler {e.get('scheduler')}, {e.get('workers')} workers"
             + (" (embedded)" if e.get("embedded") else ""),
             f"ranks: {len(res.summaries)} ({len(ok)} analyzed, "
             f"{len(res.summaries) - len(ok)} failed); iterations aligned by {res.alignment}: "
             f"{len(res.labels)}"]
    lines.append(f"run: {res.facts.header()}")
    for s in res.summaries:
        if not s.ok:
            lines.append(f"  rank {s.rank}: error: {s.path}: {s.error}")
    med = res.median_rank()
    if med is not None:
        row = res.iteration[res.ranks.index(med)]
        lines.append(f"median rank: {med} (median iteration {_ms(float(np.nanmedian(row)))})")
    lines.append("")
    lines.append("stragglers:" if res.stragglers else "stragglers: none found")
    for st in res.stragglers[:10]:
        lines.append(f"  rank {st.rank}: +{_ms(st.excess_ns)} ({st.fraction:.0%}) in "
                     f"{len(st.iterations)} iterations; cause: {st.cause_text()}")
    if len(res.stragglers) > 10:
        lines.append(f"  ... and {len(res.stragglers) - 10} more (see --json)")
    skew = res.wait_skew()
    if len(skew) and not np.all(np.isnan(skew)):
        worst = int(np.nanargmax(skew))
        lines.append(f"collective wait skew: up to {_ms(skew[worst])} (rank "
                     f"{res.ranks[worst]} waits longest)")
    lines.append("")
    lines.append("findings:" if res.findings else "findings: none across ranks")
    for f in res.findings:
        lines.append(f"  [{f.severity}] {f.title}: {f.summary}")
        lines.extend(f"    fix: {x.text}" for x in f.fixes)
    return lines
