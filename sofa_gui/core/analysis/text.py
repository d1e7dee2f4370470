"""The readable report ``sofa-gui analyze`` prints: iterations, breakdown, findings."""

from __future__ import annotations

import numpy as np

from ..trace import Trace
from ..units import fmt_bytes, fmt_ns
from .breakdown import TraceBreakdown
from .device_side import COPY_DIRECTIONS
from .iterations import iterations_text
from .palette import label_of
from .pipeline import Analysis
from .results import Finding, us
from .shares import breakdown_reading, finding_share, speedup_words

BAR = 24
MAX_COUNTERS = 8
MAX_RANK_ITERATIONS = 12


def analysis_text(trace: Trace, analysis: Analysis) -> list[str]:
    """Lines for the terminal."""
    lines = run_text(analysis.run) + [""] if analysis.run is not None else []
    lines += iterations_text(trace, analysis.iterations)
    bd: TraceBreakdown | None = analysis.breakdown
    if bd is not None:
        lines += [""] + breakdown_text(bd)
        reading = breakdown_reading(analysis.verdict, analysis.findings, bd)
        lines += [f"  {reading}"] if reading else []
    pipe = getattr(analysis, "input_pipeline", None)
    if pipe is not None:
        lines += [""] + input_pipeline_text(pipe)
    lines += [""] + findings_text(analysis.findings, trace)
    return lines


def verdict_text(verdict) -> list[str]:
    """"Verdict: Compute-bound: 64.1% of the profiled time" and its basis, then a blank
    line ([] without a verdict): what limits the run, read before any finding."""
    if verdict is None:
        return []
    return [f"Verdict: {verdict.headline}", f"  {verdict.basis}", ""]


def input_pipeline_text(p) -> list[str]:
    """The tf.data stage tree with total and own time (a :class:`~.tfdata.InputPipeline`)."""
    n = max(len(p.wait_ns), 1)
    lines = [f"tf.data input pipeline: {p.state()}; the step waits in IteratorGetNext "
             f"{100 * p.wait_share:.1f}% of iteration time "
             f"(mean {fmt_ns(int(p.wait_ns.sum()) // n)} per iteration)",
             f"  {'stage':44s} {'calls':>7s} {'total':>10s} {'own':>10s}"]
    for st in p.ordered():
        mark = "  <- bottleneck" if st.id == p.bottleneck else ""
        name = ("  " * st.depth + st.label)[:44]
        lines.append(f"  {name:44s} {st.count:7d} {fmt_ns(st.total_ns):>10s} "
                     f"{fmt_ns(st.own_ns):>10s}{mark}")
    return lines


def breakdown_text(bd: TraceBreakdown) -> list[str]:
    scope = ("whole trace (" + bd.note + ")" if bd.whole_trace
             else f"{len(bd)} iterations, median iteration #{bd.median_iteration}: "
                  f"{fmt_ns(bd.durations[bd.median_iteration])}")
    lines = [f"Breakdown: {scope}"]
    if bd.device is None:
        lines.append("  no accelerator activity in the trace: host side only")
    if bd.device_clock:
        lines.append("  the device lags its host: device rows cover each step's device window "
                     "(device clock), from the previous step's last device work to its own")
    per = "whole trace" if bd.whole_trace else "mean per iteration"
    for d in bd.devices[:4]:
        lines.append(f"  Device {d.label}: {per}, share")
        lines += _table(d.categories, d.times)
        lines += _copies(d) + _comm(d)
    if len(bd.devices) > 4:
        lines.append(f"  ... and {len(bd.devices) - 4} more devices (see --json)")
    for h in bd.hosts[:2]:
        lines.append(f"  Host main thread {h.label}: {per}, share")
        lines += _table(h.categories, h.times)
    if bd.ranks is not None:
        lines += _ranks(bd)
    lines += ["  " + ln for ln in counter_lines(bd)]
    return lines


def device_details(d) -> list[str]:
    """Copies per direction and communication overlap of one device, one line each."""
    return [ln.strip() for ln in _copies(d) + _comm(d)]


def counter_lines(bd: TraceBreakdown) -> list[str]:
    """Utilisation counters first, each with its mean and per-iteration range."""
    lines = []
    for c in sorted(bd.counters, key=_counter_rank)[:MAX_COUNTERS]:
        m = c.mean[~np.isnan(c.mean)]
        if len(m):
            spread = ("" if len(m) < 2 else
                      f"; per iteration {_value(np.min(m), c.unit)} .. {_value(np.max(m), c.unit)}")
            lines.append(f"Counter {c.name}: mean {_value(np.mean(m), c.unit)}{spread}")
    if len(bd.counters) > MAX_COUNTERS:
        lines.append(f"... and {len(bd.counters) - MAX_COUNTERS} more counters (see --json)")
    return lines


def _value(v: float, unit: str) -> str:
    """A counter value with its unit, bytes in B/KB/MB/GB like the app."""
    if unit.lower() in ("bytes", "byte", "b"):
        return fmt_bytes(v)
    return f"{v:.3g} {unit}".rstrip()


def _counter_rank(c) -> tuple[int, str]:
    """Utilisation summaries first: GPU, then all-core CPU, then the rest."""
    name = c.name.lower()
    return (0 if "gpu" in name else 1 if "all" in name or "total" in name else 2, c.name)


def _table(categories, times: np.ndarray) -> list[str]:
    total = times.sum(axis=0)
    wall = int(total.sum()) or 1
    n = max(len(times), 1)
    out = []
    for c, v in zip(categories, total.tolist()):
        if v == 0:
            continue
        frac = v / wall
        bar = "#" * int(round(frac * BAR))
        line = f"    {label_of(c):<26s} {fmt_ns(v / n):>10s} {100 * frac:5.1f}%  {bar}"
        out.append(line.rstrip())
    return out


def _copies(d) -> list[str]:
    out = []
    c = d.copies
    for k, name in enumerate(COPY_DIRECTIONS):
        cnt = int(c.count[:, k].sum())
        if not cnt:
            continue
        nbytes = int(c.bytes[:, k].sum())
        page = int(c.pageable_bytes[:, k].sum())
        pin = int(c.pinned_bytes[:, k].sum())
        mem = f", pageable {page / nbytes:.0%} / pinned {pin / nbytes:.0%}" if nbytes else ""
        out.append(f"    copies {name}: {cnt} copies, {nbytes / 1e6:.2f} MB in all, "
                   f"{c.bandwidth_gbps(name):.2f} GB/s achieved{mem}")
    return out


def _comm(d) -> list[str]:
    total = int(d.comm_total.sum())
    if not total:
        return []
    ov = int(d.comm_overlap.sum())
    n = max(len(d.comm_total), 1)
    return [f"    communication per iteration: {fmt_ns(total / n)}, of which "
            f"{fmt_ns((total - ov) / n)} exposed; {ov / total:.0%} overlapped with compute"]


def _ranks(bd: TraceBreakdown) -> list[str]:
    r = bd.ranks
    n = r.durations.shape[1]
    shown = min(n, MAX_RANK_ITERATIONS)
    lines = [f"  Ranks ({len(r.ranks)}): own iteration times, busy (median), communication "
             f"overlapped with compute"]
    overlap = r.overlap_fraction()
    for k, rank in enumerate(r.ranks):
        its = ", ".join(fmt_ns(v) for v in r.durations[k, :shown].tolist())
        more = f", ... ({n} in all)" if n > shown else ""
        total = int(r.comm_total[k].sum())
        comm = (f"; communication {fmt_ns(total / max(n, 1))}/iteration, "
                f"{overlap[k]:.0%} overlapped" if total else "; no communication")
        lines.append(f"    rank {rank}: iterations {its}{more}; busy "
                     f"{fmt_ns(np.median(r.busy[k]))}{comm}")
    lines.append("    straggler (most busy rank) per iteration: "
                 + ", ".join(f"{i}: rank {int(s)} (+{fmt_ns(lag)})"
                             for i, (s, lag) in enumerate(zip(r.straggler[:shown],
                                                              r.lag[:shown]))))
    return lines


def run_text(run) -> list[str]:
    """"Run: framework pytorch (proof) ..." one line per fact, unknown ones named."""
    from .run_facts import FACT_KEYS

    lines = ["Run facts (each proved by the trace; unknown stays unknown):"]
    unknown = []
    for k in FACT_KEYS:
        f = run.get(k)
        if f.known:
            lines.append(f"  {k:<12s} {f.said()}")
        else:
            unknown.append(k)
    if unknown:
        lines.append(f"  unknown:     {', '.join(unknown)}")
    return lines


def gain_text(f: Finding) -> str:
    """"12.0% of steady-state iteration time, estimated speed-up 1.14x" (a hypothesis adds
    what its fix saves: :func:`.shares.finding_share`) or the one-off wording."""
    if f.estimated_speedup is None:
        return f"{finding_share(f)}, no per-step speed-up"
    by = f" (best fix: {f.estimated_by})" if f.estimated_by else ""
    return f"{finding_share(f)}, estimated speed-up {speedup_words(f)}{by}"


def findings_text(findings: list[Finding], trace: Trace | None = None) -> list[str]:
    if not findings:
        return ["Findings: none above their thresholds (no clear bottleneck)."]
    lines = [f"Findings ({len(findings)}, best expected gain x confidence first):"]
    for n, f in enumerate(findings, 1):
        lines.append(f"  {n}. [{f.severity.upper()}] {f.title} ({f.id}): {gain_text(f)}, "
                     f"confidence {f.confidence:.2f}"
                     + (f" ({f.confidence_why})" if f.confidence_why else ""))
        lines.append(f"     {f.summary}")
        if f.causes:
            lines.append("     Causes:")
            for c in f.causes:
                lines.append(f"       - {c.label}: {fmt_ns(c.total_ns)} in {c.count} "
                             f"({100 * c.share:.0f}%)")
        lines.append("     Evidence:")
        for e in f.evidence:
            lines.append(f"       - {e.label}  [{evidence_where(e, trace)}]")
        lines.append("     Fixes:")
        for x in f.fixes:
            why = "".join(f" [{w}]" for w in (x.because, x.estimate_label) if w)
            lines.append(f"       - ({x.framework}) {x.text}{why}")
        if f.hidden_fixes:
            lines.append(f"     ({len(f.hidden_fixes)} fixes not shown: they contradict the "
                         f"run facts; see --json fixes_not_shown)")
    return lines


def evidence_where(e, trace: Trace | None) -> str:
    """"iteration 3, +1.2 ms .. +1.5 ms, lanes main, stream 7" (times from the trace start)."""
    where = f"iteration {e.iteration}, " if e.iteration is not None else ""
    t0 = trace.start_ns if trace is not None else 0
    if trace is None:
        span = f"{us(e.start_ns):.3f} .. {us(e.end_ns):.3f} µs"
    else:
        span = f"+{fmt_ns(e.start_ns - t0)} .. +{fmt_ns(e.end_ns - t0)}"
    return f"{where}{span}, lanes {lane_names(e.lanes, trace)}"


def lane_names(lanes: list[int], trace: Trace | None) -> str:
    """"main, stream 7 +3": the first lane names of an evidence item."""
    if trace is None:
        return ", ".join(map(str, lanes))
    names = [trace.lanes.name[i] for i in lanes[:3]]
    more = f" +{len(lanes) - 3}" if len(lanes) > 3 else ""
    return ", ".join(names) + more
