"""tf.data under the input finding: the pipeline's shape and its stages as causes, the
bottleneck stage first (see :mod:`..tfdata`)."""

from __future__ import annotations

from ...units import fmt_ns
from ..results import Cause, Evidence
from ..tfdata import InputPipeline, analyze_input_pipeline
from .context import MAX_CAUSES, Ctx


def pipeline_of(ctx: Ctx, host) -> InputPipeline | None:
    """The tf.data pipeline over the analyzed iterations, seen from ``host``'s main thread."""
    if host is None:
        return None
    return analyze_input_pipeline(ctx.trace, host.starts, host.ends, host.lane)


def pipeline_note(ctx: Ctx, host) -> tuple[str, list[Cause]]:
    """(" tf.data pipeline: ... Bottleneck stage: ...", stage causes) or ("", [])."""
    p = pipeline_of(ctx, host)
    if p is None:
        return "", []
    wait = float(p.wait_ns.sum()) or 1.0
    s = ctx.trace.slices
    order = sorted(p.stages.values(), key=lambda st: (st.id != p.bottleneck, -st.own_ns))
    causes = []
    for st in order[:MAX_CAUSES]:
        if st.own_ns <= 0:
            continue
        j = st.first
        where = "bottleneck stage" if st.id == p.bottleneck else "tf.data stage"
        ev = Evidence(f"longest Iterator::{st.kind} GetNext ({fmt_ns(int(s.dur[j]))})",
                      int(s.start[j]), int(s.end[j]), None, [int(s.lane[j])])
        causes.append(Cause(f"{where} {st.label}: {st.dataset}", st.own_ns, st.count,
                            min(st.own_ns / wait, 1.0), ev))
    return " " + p.sentence(), causes
