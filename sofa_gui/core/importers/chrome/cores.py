"""How many cores a parallel decode can use.

The affinity mask says how many CPUs this process may run on, not how much of them it
gets: a container's CPU quota (cgroup ``cpu.max``) can allow one CPU's worth of time on
two visible CPUs. Then a second decode process runs beside the first instead of in
parallel with it, and the split, the workers' start and the merge make the open slower
than one process, so the quota caps the part count.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

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
