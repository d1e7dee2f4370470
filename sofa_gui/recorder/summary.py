"""The one-paragraph summary printed (and shown in the dialog) after a recording."""

from __future__ import annotations

from ..core.units import fmt_bytes
from .runner import RecordResult


def exit_text(r: RecordResult) -> str:
    if r.signal:
        return f"killed by {r.signal} (exit code {r.exit_code})"
    return f"exit code {r.exit_code}"


def summary_text(r: RecordResult) -> str:
    parts = [f"Recorded {r.duration_s:.2f} s; the command ended with {exit_text(r)}"]
    if r.stopped_by:
        parts[-1] += f" after {r.stopped_by}"
    parts[-1] += "."
    if r.mean_cpu is not None:
        cpu = f"Mean CPU utilisation {r.mean_cpu:.1f}% of all cores"
        if r.busiest_core is not None:
            cpu += f" (busiest core {r.busiest_core[0]}: {r.busiest_core[1]:.1f}%)"
        if r.mean_tree_cpu is not None:
            cpu += f"; the command's processes used {r.mean_tree_cpu:.0f}% CPU on average"
        cpu += f", peak RSS {fmt_bytes(r.peak_rss)}."
        parts.append(cpu)
    if r.gpu_mean:
        per = ", ".join(f"GPU{i} {v:.1f}%" for i, v in sorted(r.gpu_mean.items()))
        parts.append(f"Mean GPU utilisation: {per}.")
    elif r.gpu_mean is None:
        parts.append(f"No GPU counters ({r.gpu_reason}).")
    extra = []
    for key, label in (("torch", "torch.profiler"), ("py_spy", "py-spy")):
        src = r.sources.get(key) or {}
        if src.get("recorded"):
            extra.append(f"{label} recorded")
        elif src.get("reason") and "not requested" not in src["reason"]:
            extra.append(f"{label} not recorded ({src['reason']})")
    if extra:
        text = "; ".join(extra)
        parts.append(text[0].upper() + text[1:] + ".")
    return " ".join(parts)
