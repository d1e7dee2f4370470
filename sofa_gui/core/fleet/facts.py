"""The job's run facts: what the ranks' traces prove about the program, agreed across
ranks.

Each rank's task sends the facts its own analysis proved (framework, device, mode,
collectives, ...; :mod:`..analysis.run_facts`).  The job has a fact when every rank that
proves it proves the same value; ranks that disagree leave it unknown (and say so), so
a fix is never hidden on a fact one rank contradicts.  Fleet findings choose their fixes
from these facts the way ``analyze`` does for one trace
(:func:`..analysis.findings.fixes.choose_fixes`).
"""

from __future__ import annotations

from ..analysis.facts_base import FACT_KEYS, Fact, RunFacts


def rank_facts(run: RunFacts | None) -> dict[str, dict]:
    """The known facts of one rank's analysis, small and plain (they travel back from the
    worker): key -> value, detail, proof."""
    if run is None:
        return {}
    return {k: run.get(k).to_dict() for k in FACT_KEYS if run.get(k).known}


def job_facts(summaries) -> RunFacts:
    """The facts every readable rank that proves them agrees on (rank summaries'
    ``facts``); the proof names the first such rank, the detail is kept where the ranks
    give the same one."""
    out = {}
    for key in FACT_KEYS:
        seen = [(s.rank, s.facts[key]) for s in summaries
                if s.ok and isinstance(s.facts.get(key), dict)
                and s.facts[key].get("value") is not None]
        if not seen:
            continue
        values = {repr(f["value"]) for _, f in seen}
        if len(values) > 1:
            said = "; ".join(f"rank {r}: {f['value']}" for r, f in seen[:4])
            out[key] = Fact(key, None, f"the ranks disagree ({said})")
            continue
        rank, first = seen[0]
        more = len(seen) - 1
        also = f" (and {more} more rank{'s' if more > 1 else ''})" if more else ""
        # a detail one rank gives of itself ("this trace: rank 0") is not the job's
        details = {str(f.get("detail") or "") for _, f in seen}
        out[key] = Fact(key, first["value"], details.pop() if len(details) == 1 else "",
                        f"rank {rank}: {first.get('proof') or 'its trace'}{also}")
    return RunFacts(out)
