"""How many cores a parallel decode can really use, right now.

The affinity mask says how many CPUs this process may run on, not how much of them it
gets. A container's CPU quota (cgroup ``cpu.max``) can allow one CPU's worth of time on
two visible CPUs, two vCPUs can be SMT siblings or share a host core with another guest,
and other processes can hold the cores. Then a second decode process runs beside the
first instead of in parallel with it, and the split, the workers' start and the merge
make the open slower than one process. :func:`parallel_gain` measures it: the same short
CPU task run by two processes at once against one process running it twice.
"""

from __future__ import annotations

import math
import os
import struct
import sys
import threading
import time
from pathlib import Path

import msgspec

#: Below this gain (two tasks' time in one process / their time in two) the decode stays
#: in one process: the parallel path costs ~0.1-0.3 s of split, start and merge that a
#: smaller gain does not win back on the files it is used for (>= 64 MiB).
MIN_GAIN = 1.3
#: How long one probe task runs; a probe costs about twice this (a second probe confirms
#: a low reading, so a busy moment alone does not send a big file to one process).
TASK_S = 0.008
_SAMPLE = msgspec.json.encode([{"ph": "X", "name": f"aten::op_{i}", "ts": 1.5 * i, "dur": 3.25,
                                "pid": 1, "tid": 7, "args": {"External id": i, "seq": [i, i]}}
                               for i in range(400)])
_CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
              Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def quota_cpus(v2: Path = _CGROUP_V2, v1: tuple[Path, Path] = _CGROUP_V1) -> int | None:
    """CPUs' worth of time the cgroup allows (rounded up), or None for no limit."""
    try:
        quota, period = v2.read_text().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    try:
        quota_us, period_us = (int(p.read_text()) for p in v1)
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else max(1, math.ceil(quota_us / period_us))


def usable_cpus() -> int:
    """CPUs this process may run on, capped by its cgroup's CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = quota_cpus()
    return max(1, min(n, quota) if quota else n)


def _task(reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        msgspec.json.decode(_SAMPLE)
    return time.perf_counter() - t


def _reps() -> int:
    one = min(_task(1) for _ in range(3))
    return max(1, int(TASK_S / max(one, 1e-6)))


def can_fork() -> bool:
    """fork is safe here: one thread, no Qt (the CLI and the app's loader child)."""
    return (hasattr(os, "fork") and threading.active_count() == 1
            and "PySide6" not in sys.modules)


def parallel_gain() -> float | None:
    """Two equal tasks' time in one process over their time in two processes at once
    (2.0: two free cores; 1.0: one core's worth), or None where it cannot be measured."""
    if not can_fork():
        return None
    reps = _reps()
    alone = _task(reps)
    r, w = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's side is measured through the pipe
        try:
            _task(reps)
            os.write(w, struct.pack("d", time.perf_counter()))
        finally:
            os._exit(0)
    os.close(w)
    try:
        _task(reps)
        done = time.perf_counter()
        got = os.read(r, 8)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    if len(got) != 8:
        return None
    both = max(done, struct.unpack("d", got)[0]) - start
    return 2 * alone / both if both > 0 else None


def parallel_pays() -> bool:
    """Whether a second decode process would run in parallel with this one now: two
    probes must both find the gain under :data:`MIN_GAIN` to say no."""
    for _ in range(2):
        gain = parallel_gain()
        if gain is None or gain >= MIN_GAIN:
            return True
    return False
