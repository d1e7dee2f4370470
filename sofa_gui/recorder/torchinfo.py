"""After the child ends: what the ``--torch`` shim left in ``torch/`` and why not more."""

from __future__ import annotations

import json
import signal
from pathlib import Path


def collect_torch(torch_dir: Path, returncode: int) -> dict:
    """The manifest's ``sources.torch``: traces written, per-process status, or the reason none."""
    leftovers = sorted(torch_dir.glob(".kineto-*.tmp")) if torch_dir.is_dir() else []
    for p in leftovers:  # an export cut short by a kill: not loadable, do not keep
        p.unlink(missing_ok=True)
    statuses = []
    for p in sorted(torch_dir.glob("kineto-*.status.json")) if torch_dir.is_dir() else []:
        try:
            statuses.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    traces = sorted(f"{torch_dir.name}/{s['trace']}" for s in statuses
                    if s.get("trace") and (torch_dir / s["trace"]).is_file())
    out = {"recorded": bool(traces), "traces": traces, "processes": statuses,
           "clock": "Kineto ts are µs since baseTimeNanoseconds (in the file); "
                    "epoch ns = baseTimeNanoseconds + ts*1000"}
    if leftovers:
        out["incomplete_exports_removed"] = len(leftovers)
    if not traces:
        out["reason"] = _why_no_trace(statuses, returncode)
    return out


def _why_no_trace(statuses: list[dict], returncode: int) -> str:
    errors = [s["error"] for s in statuses if s.get("error")]
    if errors:
        return errors[0]
    notes = [s["note"] for s in statuses if s.get("note")]
    if notes:
        return notes[0]
    if any(s.get("state") in ("running", "exporting") for s in statuses):
        how = _signal_name(returncode)
        return f"the child was stopped ({how}) before torch.profiler could export its trace"
    if statuses:
        return "torch.profiler never started in the child"
    return ("the child never imported torch (or is not a Python program, or ran a Python that "
            "ignores PYTHONPATH)")


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"
