"""Independent facts about a Chrome/Kineto JSON file, counted with plain ``json``.

The importer tests compare what the importer built against these counts. The
classification table here is written out again on purpose (not imported from
``sofa_gui.core.kinds``), so a change there that breaks the documented mapping
shows up as a test failure.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

CAT_KIND = {
    "cpu_op": "cpu_op", "operator": "cpu_op", "python_function": "python",
    "cuda_runtime": "runtime", "runtime": "runtime", "cuda_driver": "runtime",
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset", "cuda_sync": "sync",
    "user_annotation": "annotation", "gpu_user_annotation": "annotation",
}
DEVICE_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset", "cuda_sync"}
LAUNCH_CATS = {"ac2g", "async_cpu_to_gpu", "async"}
COLLECTIVE_WORDS = ("nccl", "rccl", "allreduce", "all_reduce", "allgather", "all_gather",
                    "reducescatter", "reduce_scatter", "alltoall", "broadcast", "sendrecv")


def expected_kind(cat: str | None, name: str) -> str:
    if name.startswith("ProfilerStep#"):
        return "annotation"
    kind = CAT_KIND.get((cat or "").lower(), "other")
    if kind == "kernel" and any(w in name.lower() for w in COLLECTIVE_WORDS):
        return "communication"
    return kind


def norm_id(v):
    """tid/pid as the importer keys lanes: numeric strings are numbers."""
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return v


@dataclass
class Truth:
    doc: dict | list
    events: list
    kinds: Counter = field(default_factory=Counter)
    slices: int = 0
    memory: Counter = field(default_factory=Counter)  # (device type, device id) -> events
    metadata: int = 0
    gpu_lanes: set = field(default_factory=set)  # (pid, tid) of device events
    annotation_pids: set = field(default_factory=set)
    cpu_lanes: set = field(default_factory=set)
    launch_pairs: int = 0  # launch-category f events whose (cat, id) has an s event
    f_without_s: int = 0  # f events (any category) whose (cat, id) has no s event
    s_without_f: int = 0
    steps: int = 0
    x_starts_ns: list = field(default_factory=list)


def load_json(path: Path):
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal)


def truth(path: Path) -> Truth:
    doc = load_json(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    t = Truth(doc, events)
    starts: dict = {}
    finishes: dict = {}
    for e in events:
        ph, cat, name = e.get("ph"), e.get("cat"), e.get("name", "")
        if ph == "X" or (ph in ("i", "I") and name != "[memory]"):
            t.slices += 1
            t.kinds[expected_kind(cat, name)] += 1
            t.x_starts_ns.append(int(Decimal(e["ts"]) * 1000))
            t.steps += name.startswith("ProfilerStep#")
            key = (norm_id(e.get("pid")), norm_id(e.get("tid")))
            if (cat or "").lower() in DEVICE_CATS:
                t.gpu_lanes.add(key)
            elif (cat or "").lower() == "gpu_user_annotation":
                t.annotation_pids.add(key[0])
            elif not (ph in ("i", "I") and e.get("s") == "g"):
                t.cpu_lanes.add(key)
        elif ph in ("i", "I"):
            a = e.get("args", {})
            t.memory[(a.get("Device Type"), a.get("Device Id"))] += 1
        elif ph == "M":
            t.metadata += 1
        elif ph in ("s", "f"):
            (starts if ph == "s" else finishes).setdefault((cat, e["id"]), []).append(e)
    for key, fs in finishes.items():
        if key not in starts:
            t.f_without_s += len(fs)
        elif key[0] in LAUNCH_CATS:
            t.launch_pairs += len(fs)
    t.s_without_f = sum(len(v) for k, v in starts.items() if k not in finishes)
    # a CPU (pid, tid) that also runs device events is a GPU lane in the importer
    t.cpu_lanes -= t.gpu_lanes
    return t
