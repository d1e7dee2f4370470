"""Plain facts about a loaded trace, for the CLI, reports and the GUI header."""

from __future__ import annotations

from .trace import LaneKind, Trace
from .units import fmt_ns, lane_title, us


def event_count(trace: Trace) -> int:
    """The one event count every surface shows: events of the source that were loaded
    (the load report's figure; slices and counter samples when the source has none)."""
    return int(trace.meta.load_stats.loaded or trace.events)


def trace_dict(trace: Trace) -> dict:
    """The ``"trace"`` object of ``analyze --json`` (times in µs on the trace clock)."""
    counts = trace.lane_event_counts()
    lanes = trace.lanes
    order = lanes.display_order()
    return {
        "path": trace.meta.source,
        "format": trace.meta.format,
        "events": event_count(trace),
        "slices": len(trace.slices),
        "counter_samples": len(trace.counters),
        "flows": len(trace.flows),
        "kinds": trace.kind_counts(),
        "skipped": dict(trace.meta.load_stats.skipped),
        "load_report": trace.meta.load_stats.to_dict(),
        "start_us": us(trace.start_ns),
        "end_us": us(trace.end_ns),
        "duration_us": us(trace.duration_ns),
        "lanes": [
            {
                "name": lanes.name[i],
                "group": lanes.group[i],
                "kind": LaneKind(int(lanes.kind[i])).label,
                "events": int(counts[i]),
            }
            for i in order
        ],
        "ranks": list(trace.meta.ranks),
        "world_size": trace.meta.world_size,
        "devices": {str(k): v for k, v in trace.meta.devices.items()},
    }


def _when(trace: Trace) -> str:
    """`` from 2021-06-08 08:57:03.460 UTC`` when the trace clock maps to wall time."""
    off = trace.meta.epoch_offset_ns
    if off is None:
        return ""
    import datetime

    t = datetime.datetime.fromtimestamp((trace.start_ns + off) / 1e9, datetime.timezone.utc)
    return f", from {t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d} UTC"


def trace_text(trace: Trace, max_lanes: int = 40) -> list[str]:
    d = trace_dict(trace)
    rep = trace.meta.load_stats
    lines = [
        f"Trace:    {d['path']}",
        f"Format:   {d['format']}",
        f"Duration: {fmt_ns(trace.duration_ns)}{_when(trace)}",
        f"Events:   {event_count(trace):,} loaded of {rep.read:,} read -> "
        f"{d['slices']:,} slices, {d['counter_samples']:,} counter samples"
        + (f"; ranks {d['ranks']}" if d["ranks"] else ""),
    ]
    if d["kinds"]:
        lines.append("Kinds:    " + ", ".join(f"{k} {n:,}" for k, n in d["kinds"].items()))
    if rep.skipped:
        lines.append("Skipped:  " + ", ".join(f"{r}: {n:,}" for r, n in rep.skipped.items()))
    for note in rep.notes:
        lines.append(f"Note:     {note}")
    lines.append(f"Lanes ({len(d['lanes'])}):")
    for lane in d["lanes"][:max_lanes]:
        title = lane_title(lane["name"], lane["group"])
        lines.append(f"  {lane['kind']:8s} {lane['events']:>10,}  {title}")
    if len(d["lanes"]) > max_lanes:
        lines.append(f"  ... and {len(d['lanes']) - max_lanes} more")
    return lines
