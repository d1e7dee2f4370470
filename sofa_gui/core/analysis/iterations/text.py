"""Human-readable lines about detected iterations (for the CLI's text output)."""

from __future__ import annotations

import numpy as np

from ...trace import Trace
from ...units import fmt_ns_exact
from ..figures import device_window_texts
from ..results import Iterations

MAX_ROWS = 40  # longer lists show the first and last rows


def iterations_text(trace: Trace, iters: Iterations) -> list[str]:
    """Lines listing the iterations with durations, then mean/median/CV."""
    if iters.method == "none":
        return [f"Iterations: none found ({iters.reason})", f"  stream: {iters.stream}"]
    head = (f"Iterations: {len(iters)} by {iters.method}, confidence {iters.confidence:.2f}")
    if iters.uncertain:
        head += " (iterations uncertain: findings that rest on them are too)"
    lines = [head, f"  stream: {iters.stream}"]
    if iters.pattern:
        lines.append("  " + pattern_text(iters.pattern))
    if iters.agreement:
        lines.append("  " + agreement_text(iters.agreement))
    if iters.reason:
        lines.append(f"  note: {iters.reason}")
    lines += marks_text(iters)
    lines += _rows(trace, iters)
    d = iters.durations[iters.steady].astype(float)
    cv = d.std() / d.mean() if d.mean() > 0 else 0.0
    scope = "steady state: " if iters.steady_state_from else ""
    k = iters.median_index
    lines.append(f"  median iteration #{k}: {fmt_ns_exact(iters.durations[k])}; {scope}"
                 f"mean {fmt_ns_exact(d.mean())}, CV {cv:.1%}, min {fmt_ns_exact(d.min())}, "
                 f"max {fmt_ns_exact(d.max())}")
    return lines


def marks_text(iters: Iterations) -> list[str]:
    """Warm-up, micro-batches, periodic extras and device lag, one line each."""
    out = []
    if iters.steady_state_from:
        out.append(f"  warm-up: #0..#{iters.steady_state_from - 1}; steady state from "
                   f"#{iters.steady_state_from} (statistics use the steady state)")
    mb = iters.micro_batches
    if mb is not None and len(mb) and (mb > 1).any():
        out.append(f"  micro-batches (backward passes) per iteration: median "
                   f"{int(np.median(mb))}, range {int(mb.min())}-{int(mb.max())}")
    for x in iters.periodic_extras:
        out.append(f"  periodic extra every {x.every} (from #{x.phase}): {x.name}; "
                   f"+{fmt_ns_exact(x.cost_ns_mean)} each, {x.share_of_time:.1%} of the time")
    if iters.device_lags:
        out.append("  the device runs behind the host: device-side windows "
                   "(device_start_us/device_end_us) hold each step's device work; "
                   "an iteration's duration stays its host step")
    return out


def pattern_text(p: dict) -> str:
    if p.get("evidence") == "landmarks":
        return (f"landmarks: {p.get('occurrences')} iterations, one {p.get('landmark')} each, "
                f"each cut at {p.get('cut', '')}")
    if p.get("symbols") is None:
        head = (f"activity rhythm: {p.get('occurrences')} periods of "
                f"{fmt_ns_exact(p.get('period_us', 0) * 1000)}")
    else:
        head = f"pattern: {p.get('symbols')} symbols x {p.get('occurrences')} occurrences"
    return f"{head}, {p.get('coverage', 0):.0%} of the stream, cut {p.get('cut', '')}"


def agreement_text(a: dict) -> str:
    if not a.get("detected"):
        why = a.get("pattern_reason") or "no pattern found"
        return f"pattern detector: no iterations ({why})"
    off = a.get("median_offset_us")
    return (f"pattern detector agrees on {a['matched']}/{a['annotated']} steps "
            f"({a['detected']} found; median start offset {off:g} µs, "
            f"tolerance {a['tolerance_us']:g} µs)")


def _rows(trace: Trace, iters: Iterations) -> list[str]:
    t0 = trace.start_ns
    n = len(iters)
    idx = list(range(n)) if n <= MAX_ROWS else [*range(MAX_ROWS // 2), -1,
                                                 *range(n - MAX_ROWS // 2, n)]
    out = []
    dev = device_window_texts(iters)
    for i in idx:
        if i < 0:
            out.append(f"  ... {n - MAX_ROWS} more ...")
            continue
        label = iters.labels[i] if i < len(iters.labels) else ""
        if iters.warmup is not None and iters.warmup[i]:
            label = (label + " warm-up").strip()
        if iters.extra_of(i) is not None:
            label = (label + " +extra").strip()
        s, e = int(iters.starts[i]), int(iters.ends[i])
        out.append(f"  #{i:<4d} {label:<18s} start +{fmt_ns_exact(s - t0):>12s}  "
                   f"duration {fmt_ns_exact(e - s):>12s}" + (f"  ({dev[i]})" if dev[i] else ""))
    return out
