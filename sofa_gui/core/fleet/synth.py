"""Make a rank folder from real rank traces (tests, benchmarks, demos of ``fleet``).

Rank ``i`` is a copy of ``sources[i % len(sources)]`` with ``distributedInfo.rank = i``;
``tile`` repeats the trace's steps end to end (to reach a target event count);
``slow`` ranks get their compute kernels stretched by ``stretch``: time is warped so
that each compute kernel lasts ``stretch`` times longer and everything after it moves
later by the added time, as if that GPU were slower at compute and nothing else.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np

_STEP = re.compile(r"^(ProfilerStep#)(\d+)$")


def read_events(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        return json.load(fh)


def _is_compute(ev: dict) -> bool:
    return ev.get("cat") == "kernel" and "nccl" not in str(ev.get("name", "")).lower()


def stretch_compute(events: list[dict], factor: float) -> list[dict]:
    """Warp time: every compute kernel lasts ``factor`` x longer, later events shift."""
    ends = sorted(float(e["ts"]) + float(e.get("dur", 0)) for e in events if _is_compute(e))
    extra = sorted((float(e["ts"]) + float(e["dur"]), float(e["dur"]) * (factor - 1.0))
                   for e in events if _is_compute(e) and "dur" in e)
    if not ends:
        return events
    at = np.array([x[0] for x in extra])
    cum = np.concatenate([[0.0], np.cumsum([x[1] for x in extra])])

    def warp(t: float) -> float:
        return t + cum[int(np.searchsorted(at, t, side="right"))]

    out = []
    for e in events:
        if "ts" not in e or e.get("ph") == "M":
            out.append(e)
            continue
        e = dict(e)
        t0 = float(e["ts"])
        e["ts"] = round(warp(t0), 3)
        if "dur" in e:
            e["dur"] = round(warp(t0 + float(e["dur"])) - e["ts"], 3)
        out.append(e)
    return out


def tile(events: list[dict], times: int) -> list[dict]:
    """The trace's timed events repeated ``times`` x end to end; steps renumbered."""
    timed = [e for e in events if "ts" in e and e.get("ph") != "M"]
    if times <= 1 or not timed:
        return events
    t0 = min(float(e["ts"]) for e in timed)
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - t0
    steps = {int(m.group(2)) for e in timed if (m := _STEP.match(str(e.get("name", ""))))}
    nsteps = (max(steps) - min(steps) + 1) if steps else 0
    out = list(events)
    for k in range(1, times):
        for e in timed:
            e = dict(e)
            e["ts"] = round(float(e["ts"]) + k * span, 3)
            m = _STEP.match(str(e.get("name", "")))
            if m:
                e["name"] = f"{m.group(1)}{int(m.group(2)) + k * nsteps}"
            for key in ("id", "correlation"):
                if isinstance(e.get(key), int):
                    e[key] = e[key] + k * 10_000_000
            args = e.get("args")
            if isinstance(args, dict) and isinstance(args.get("correlation"), int):
                e["args"] = {**args, "correlation": args["correlation"] + k * 10_000_000}
            out.append(e)
    return out


def make_rank_folder(out: Path, sources: list[Path], n_ranks: int, slow: dict[int, float]
                     | None = None, times: int = 1, compress: bool = False) -> list[Path]:
    """Write ``rank-{i}.json[.gz]`` for i < n_ranks; returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    docs = [read_events(p) for p in sources]
    bodies = [tile(d["traceEvents"], times) for d in docs]
    paths = []
    for i in range(n_ranks):
        doc = dict(docs[i % len(docs)])
        events = bodies[i % len(docs)]
        if slow and i in slow:
            events = stretch_compute(events, slow[i])
        info = dict(doc.get("distributedInfo") or {})
        info.update(rank=i, world_size=n_ranks)
        doc["distributedInfo"] = info
        doc["traceEvents"] = events
        data = json.dumps(doc, separators=(",", ":")).encode()
        p = out / f"rank-{i}.json{'.gz' if compress else ''}"
        p.write_bytes(gzip.compress(data, compresslevel=1) if compress else data)
        paths.append(p)
    return paths
