"""``sofa-gui report``: a self-contained HTML (inline SVG charts) or Markdown report.

The output is written to a temporary file beside the target and renamed over
it, so a failure never leaves a half-written report.  Every string that comes
from the trace (path, names, lanes) is escaped.
"""

from __future__ import annotations

import os
import re
import uuid
from html import escape
from pathlib import Path

import numpy as np

from ..names import visible
from ..trace import Trace
from ..units import fmt_ns
from . import svg_charts as charts
from .breakdown import OVERLAP_PRIORITY, TraceBreakdown
from .figures import event_count, median_ns
from .findings import THRESHOLDS
from .palette import color_of, label_of
from .pipeline import Analysis
from .results import Finding
from .shares import breakdown_reading, dominant_read_as
from .text import breakdown_text, counter_lines, device_details, evidence_where, gain_text

FORMATS = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown"}


def report_format(path) -> str:
    """"html" or "markdown" from the suffix; ValueError for anything else."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ValueError(f"unknown report type {Path(path).suffix or '(no suffix)'!r}: "
                         "use .html or .md")
    return fmt


def write_report(trace: Trace, analysis: Analysis, path) -> Path:
    """Write the report for ``analysis`` to ``path`` atomically."""
    path = Path(path)
    fmt = report_format(path)
    text = html_report(trace, analysis) if fmt == "html" else markdown_report(trace, analysis)
    # no raw control / bidi characters from the trace reach the file (ESC, CR, U+202E)
    text = "\n".join(visible(line) for line in text.split("\n"))
    path.parent.mkdir(parents=True, exist_ok=True)
    # A fresh name opened with "x" (not mkstemp) so the file gets the umask's mode.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


# -- shared facts ----------------------------------------------------------------------
def _facts(trace: Trace, analysis: Analysis) -> list[tuple[str, str]]:
    it = analysis.iterations
    bd: TraceBreakdown | None = analysis.breakdown
    run = getattr(analysis, "run", None)
    rows = [("Trace", trace.meta.source or "(unnamed)"), ("Format", trace.meta.format),
            ("Duration", fmt_ns(trace.duration_ns)), ("Events", f"{event_count(trace):,}")]
    if trace.meta.ranks:
        rows.append(("Ranks", ", ".join(map(str, trace.meta.ranks))))
    if len(it):
        sure = " - iterations uncertain" if it.uncertain else ""
        rows.append(("Iterations", f"{len(it)} ({it.method}, confidence "
                                   f"{it.confidence:.2f}{sure})"))
        rows.append(("Median iteration", f"#{it.median_index}: {fmt_ns(median_ns(it))}"))
    else:
        rows.append(("Iterations", f"none found: {it.reason or 'no repeating structure'}"))
    if bd is not None and bd.device is not None:
        d = bd.device
        wall = int((d.ends - d.starts).sum()) or 1
        rows.append(("Device utilisation", f"{100 * int(d.busy.sum()) / wall:.1f}% busy on "
                                           f"{d.label}"))
    if bd is not None and bd.whole_trace:
        rows.append(("Scope", bd.note))
    if run is not None:
        rows.append(("Run", run.header()))
    return rows


def _threshold_note() -> str:
    parts = [f"{fid} {100 * lo:g}% / {100 * hi:g}%" for fid, (lo, hi) in THRESHOLDS.items()]
    return ("Thresholds (moderate / high share of iteration time): " + "; ".join(parts)
            + ". Input grading follows the TensorFlow profiler (moderately input-bound at 5%, "
              "highly at 20%).")


# -- HTML ------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:960px;
color:#1d1d1f;line-height:1.45}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;text-align:left;
border-bottom:1px solid #eee;font-size:13px}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.card{border:1px solid #ddd;border-left:6px solid #999;border-radius:6px;padding:10px 14px;
margin:12px 0}.card.high{border-left-color:#c44e52}.card.medium{border-left-color:#e8a33d}
.card.low{border-left-color:#4c72b0}.sev{font-size:11px;font-weight:bold;text-transform:uppercase;
padding:1px 6px;border-radius:3px;background:#eee}.meta{color:#555;font-size:13px}
.legend{font-size:12px;margin:4px 0 12px}.legend>span{margin-right:12px;white-space:nowrap}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle;
border:1px solid #0002}code{font-size:12px;background:#f4f4f4;padding:0 3px}
li{margin:2px 0;font-size:13px}.fw{color:#555;font-weight:bold}
"""


def html_report(trace: Trace, analysis: Analysis) -> str:
    bd: TraceBreakdown | None = analysis.breakdown
    title = f"sofa-gui report: {Path(trace.meta.source).name or 'trace'}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{escape(title)}</h1>"]
    v = analysis.verdict
    if v is not None:
        out.append(f'<p class="verdict"><b>{escape(v.headline)}</b><br>{escape(v.basis)}</p>')
    out.append("<table>")
    out += [f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
            for k, v in _facts(trace, analysis)]
    out.append("</table>")
    out += _html_findings(analysis.findings, trace)
    if bd is not None:
        out += _html_charts(bd, dominant_read_as(analysis.verdict, bd))
        out += _html_tables(bd)
        reading = breakdown_reading(analysis.verdict, analysis.findings, bd)
        out += [f'<p class="meta">{escape(reading)}</p>'] if reading else []
    out.append(f'<p class="meta">{escape(_threshold_note())} Overlap priority: '
               f"{escape(OVERLAP_PRIORITY)}.</p>")
    out.append("</body></html>")
    return "\n".join(out)


def _html_findings(findings: list[Finding], trace: Trace) -> list[str]:
    out = ["<h2>Findings</h2>"]
    if not findings:
        return out + ["<p>No finding above its threshold: no clear bottleneck.</p>"]
    for f in findings:
        out.append(f'<div class="card {escape(f.severity)}">')
        out.append(f'<div><span class="sev">{escape(f.severity)}</span> '
                   f"<b>{escape(f.title)}</b> <code>{escape(f.id)}</code> &mdash; "
                   f"<b>{escape(gain_text(f))}</b>, confidence {f.confidence:.2f}</div>")
        out.append(f"<p>{escape(f.summary)}</p>")
        if f.causes:
            out.append("<div class='meta'>Causes</div><ul>")
            out += [f"<li>{escape(c.label)}: {escape(fmt_ns(c.total_ns))} in {c.count} "
                    f"({100 * c.share:.0f}%)</li>" for c in f.causes]
            out.append("</ul>")
        out.append("<div class='meta'>Evidence</div><ul>")
        for e in f.evidence:
            out.append(f"<li>{escape(e.label)} <span class='meta'>"
                       f"[{escape(evidence_where(e, trace))}]</span></li>")
        out.append("</ul><div class='meta'>Fixes</div><ul>")
        for x in f.fixes:
            why = "".join(f" <span class='meta'>({escape(w)})</span>"
                          for w in (x.because, x.estimate_label) if w)
            out.append(f"<li><span class='fw'>{escape(x.framework)}:</span> "
                       f"{escape(x.text)}{why}</li>")
        out.append("</ul></div>")
    return out


def _html_charts(bd: TraceBreakdown, read_as: dict[str, str]) -> list[str]:
    """Iteration bars coloured by what each iteration ran most (a tooltip adds the bound
    the verdict counts that time in, where it moved it) and each side's stacked bars."""
    out = []
    if not bd.whole_trace and len(bd):
        cats = bd.categories()
        dom = [bd.dominant_category(i) for i in range(len(bd))]
        tips = [f"iteration {i}: {fmt_ns(d)}, mostly {_dominant_tip(dom[i], read_as)}"
                for i, d in enumerate(bd.durations.tolist())]
        out += ["<h2>Iteration times</h2>",
                "<p class='meta'>Bars are coloured by each iteration's dominant category; the "
                "dashed line is the median iteration.</p>",
                charts.iteration_bars(bd.durations.tolist(), [color_of(c) for c in dom], tips,
                                      fmt_ns, float(bd.durations[bd.median_iteration])),
                charts.legend(sorted(set(dom) - {""}, key=cats.index) if cats else [])]
    for side, obj in (("device", bd.device), ("host", bd.host)):
        if obj is None:
            continue
        name = f"{side} {obj.label}"
        out += [f"<h2>Breakdown per iteration: {escape(name)}</h2>",
                charts.stacked_bars(obj.times, obj.categories, fmt_ns, f"{side} breakdown"),
                charts.legend([c for c, v in zip(obj.categories, obj.times.sum(axis=0))
                               if v > 0])]
    return out


def _html_tables(bd: TraceBreakdown) -> list[str]:
    out = []
    for obj in [*bd.devices[:8], *bd.hosts[:4]]:
        tot = obj.times.sum(axis=0)
        wall = int(tot.sum()) or 1
        n = max(len(obj.times), 1)
        out += [f"<h2>Totals: {escape(obj.label)}</h2>",
                "<table><tr><th>category</th><th>per iteration</th><th>share</th></tr>"]
        for c, v in zip(obj.categories, tot.tolist()):
            if v:
                out.append(f'<tr><td><span class="sw" style="background:{color_of(c)}">'
                           f"</span>{escape(label_of(c))}</td><td class='num'>{fmt_ns(v / n)}</td>"
                           f"<td class='num'>{100 * v / wall:.1f}%</td></tr>")
        out.append("</table>")
    out += _html_ranks(bd)
    details = [f"{d.label}: {ln}" for d in bd.devices[:8] for ln in device_details(d)]
    details += counter_lines(bd)
    if details:
        out += ["<h2>Copies, communication, counters</h2><ul>"]
        out += [f"<li>{escape(ln.strip())}</li>" for ln in details]
        out.append("</ul>")
    return out


def _html_ranks(bd: TraceBreakdown) -> list[str]:
    """Per rank: its own iteration times, busy time, communication and overlap; and the
    straggler of each iteration."""
    r = bd.ranks
    if r is None:
        return []
    n = r.durations.shape[1]
    heads = "".join(f"<th>it. {i}</th>" for i in range(n))
    out = ["<h2>Ranks</h2>",
           f"<table><tr><th>rank</th>{heads}<th>median busy</th><th>communication / it.</th>"
           "<th>overlapped</th></tr>"]
    overlap = r.overlap_fraction()
    for k, rank in enumerate(r.ranks):
        cells = "".join(f"<td class='num'>{fmt_ns(v)}</td>" for v in r.durations[k].tolist())
        comm = int(r.comm_total[k].sum())
        out.append(f"<tr><td>{rank}</td>{cells}"
                   f"<td class='num'>{fmt_ns(float(np.median(r.busy[k])))}</td>"
                   f"<td class='num'>{fmt_ns(comm / max(n, 1))}</td>"
                   f"<td class='num'>{100 * overlap[k]:.0f}%</td></tr>")
    strag = "".join(f"<td class='num'>{int(x)} (+{fmt_ns(lag)})</td>"
                    for x, lag in zip(r.straggler.tolist(), r.lag.tolist()))
    out.append(f"<tr><th>straggler</th>{strag}<td></td><td></td><td></td></tr></table>")
    out.append("<p class='meta'>Each rank's own iteration windows (its step annotations). "
               "The straggler is the rank with the most busy time (device work outside exposed "
               "communication), shown with its lead over the median rank: the others wait "
               "for it in the collectives.</p>")
    return out


# -- Markdown --------------------------------------------------------------------------
def markdown_report(trace: Trace, analysis: Analysis) -> str:
    bd: TraceBreakdown | None = analysis.breakdown
    out = [f"# sofa-gui report: {_md(Path(trace.meta.source).name or 'trace')}", ""]
    if analysis.verdict is not None:
        out += [f"**{_md(analysis.verdict.headline)}**. {_md(analysis.verdict.basis)}", ""]
    out += ["| | |", "|---|---|"]
    out += [f"| {_md(k)} | {_md(v)} |" for k, v in _facts(trace, analysis)]
    out += ["", "## Findings", ""]
    if not analysis.findings:
        out.append("No finding above its threshold: no clear bottleneck.")
    for n, f in enumerate(analysis.findings, 1):
        out += [f"### {n}. {_md(f.title)} (`{f.id}`, {f.severity})", "",
                f"**{_md(gain_text(f))}**, confidence {f.confidence:.2f}. {_md(f.summary)}",
                ""]
        if f.causes:
            out += ["Causes:", ""] + [f"- {_md(c.label)}: {_md(fmt_ns(c.total_ns))} in "
                                      f"{c.count} ({100 * c.share:.0f}%)" for c in f.causes]
            out.append("")
        out += ["Evidence:", ""]
        for e in f.evidence:
            out.append(f"- {_md(e.label)} ({_md(evidence_where(e, trace))})")
        out += ["", "Fixes:", ""]
        out += [f"- **{x.framework}**: {_md(x.text)}"
                + "".join(f" ({_md(w)})" for w in (x.because, x.estimate_label) if w)
                for x in f.fixes]
        out.append("")
    if bd is not None:
        body = [visible(line, one_line=True) for line in breakdown_text(bd)]
        fence = _fence(body)
        out += ["## Breakdown", "", fence] + body + [fence, ""]
        reading = breakdown_reading(analysis.verdict, analysis.findings, bd)
        out += [_md(reading), ""] if reading else []
        if not bd.whole_trace and len(bd):
            out += _md_iterations(bd, dominant_read_as(analysis.verdict, bd))
    out += ["", _md(_threshold_note()), ""]
    return "\n".join(out)


def _dominant_tip(cat: str, read_as: dict[str, str]) -> str:
    """An iteration bar's "mostly ..." words: the category it ran most, and the bound the
    verdict counts that time in where it moved it (as the app's Dominant tooltip says)."""
    if not cat:
        return "unknown"
    moved = read_as.get(cat)
    return label_of(cat) + (f" (counted as {moved} by the verdict)" if moved else "")


def _md_iterations(bd: TraceBreakdown, read_as: dict[str, str]) -> list[str]:
    """One row per iteration: its duration (the step's own time), the device's window of
    it when the device lags (the device rows cover that window), the dominant category as
    the verdict reads it (``read_as``: the bound it counts a category's time in), as the
    app's Iterations table names it."""
    cats = [c for c in bd.categories() if bd.times()[:, bd.categories().index(c)].sum()]
    dev = bd.device_clock and bd.device is not None
    a, b = bd.windows_of("device") if dev else (None, None)
    head = ("| iteration | duration | " + ("device window | " if dev else "") + "dominant | "
            + " | ".join(map(label_of, cats)) + " |")
    out = ["## Iterations", "", head, "|" + "---|" * (3 + dev + len(cats))]
    t = bd.times()
    idx = {c: bd.categories().index(c) for c in cats}
    for i, d in enumerate(bd.durations.tolist()):
        cells = " | ".join(fmt_ns(t[i, idx[c]]) for c in cats)
        dom = bd.dominant_category(i)
        window = f"{fmt_ns(int(b[i] - a[i]))} | " if dev else ""
        name = read_as.get(dom, label_of(dom)) if dom else ""
        out.append(f"| {i} | {fmt_ns(d)} | {window}{_md(name)} | {cells} |")
    return out + [""]


def _fence(lines: list[str]) -> str:
    """A code fence longer than any backtick run inside (names cannot close it)."""
    runs = [len(m) for ln in lines for m in re.findall(r"`+", ln)]
    return "`" * max(3, max(runs, default=0) + 1)


def _md(s: str) -> str:
    """Escape text for a Markdown table cell / paragraph (pipes, HTML, emphasis).

    The backslash first, so a name's own ``\\|`` cannot undo the pipe's escape, and
    every line break (``\\r`` too) becomes a space, so a name cannot start a heading.
    """
    s = str(s).replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    for ch in "|*_`[]":
        s = s.replace(ch, "\\" + ch)
    return re.sub(r"[\r\n\v\f\x85\u2028\u2029]", " ", s)
