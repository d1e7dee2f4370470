"""Utilisation counters on one time grid: the advisor's evidence where traces are missing.

A recording (``sofa-gui record``) or a SOFA logdir may hold no device trace at all,
only sampled counters: per-core CPU % (recorder ``CPU{i} util %``, SOFA mpstat
``CPU{i} util %``), GPU SM utilisation (recorder NVML / SOFA nvidia-smi
``GPU{i} SM util %``) and the profiled process tree's CPU % in units of one core
(recorder ``process tree CPU %`` or the single ``name [pid] CPU %``).

:func:`host_signals` puts them on the grid of the per-core samples: interval ``k``
is ``[t_k, t_k+1)`` (the recorder stamps a rate with the start of the interval it
measures; an interval is cut at 1.5 sampling periods so a pause in sampling is not
filled in), and each other series contributes the sample that covers the
interval's midpoint (NaN where none does).  ``weight`` is the part of each
interval inside the analyzed windows (iterations, or the whole trace).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..trace import Trace
from .intervals import measure_in

_CORE = re.compile(r"^CPU ?(\d+) util ?%$", re.I)
_GPU_SM = re.compile(r"^GPU ?(\d+) (?:SM )?util(?:i[sz]ation)? ?%$", re.I)
_PROC = re.compile(r"\[\d+\] CPU %$")
PROCESS_TREE = "process tree CPU %"
#: A GPU counts as used by the run when its SM utilisation reaches this anywhere
#: (SOFA's ``is_idle_threshold`` default: below 10% a window is idle).
GPU_USED_PCT = 10.0


@dataclass
class HostSignals:
    """Counter values per grid interval (NaN: no sample covers it)."""

    start: np.ndarray  # int64 ns
    end: np.ndarray  # int64 ns
    weight: np.ndarray  # int64 ns inside the analyzed windows
    cores: np.ndarray  # (n_cores, n) % busy per core
    core_lanes: list[int]
    gpu: np.ndarray  # (n,) max SM % over the GPUs the run used; NaN if none / unknown
    gpu_names: list[str]
    gpu_lanes: list[int]
    proc: np.ndarray  # (n,) process tree CPU %, 100 = one core; NaN if unknown
    proc_name: str
    proc_lanes: list[int]

    def __len__(self) -> int:
        return len(self.start)

    @property
    def n_cores(self) -> int:
        return len(self.cores)

    @property
    def busy(self) -> np.ndarray:
        """Mean CPU % over all cores, per interval."""
        return self.cores.mean(axis=0)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpu_names)


def host_signals(trace: Trace, ws: np.ndarray, we: np.ndarray) -> HostSignals | None:
    """The grid over the analyzed windows ``ws``/``we``; None without per-core counters
    or when no sample interval falls inside the windows."""
    c = trace.counters
    names = c.table.name
    cores = sorted((int(m.group(1)), sid) for sid, n in enumerate(names)
                   if (m := _CORE.match(n)))
    if len(cores) == 0 or len(ws) == 0:
        return None
    series = {sid: c.samples(sid) for _, sid in cores}
    grid = np.unique(np.concatenate([t for t, _ in series.values()]))
    period = _period(grid)
    if period <= 0:
        return None
    end = np.minimum(np.append(grid[1:], grid[-1] + period), grid + (3 * period) // 2)
    weight = measure_in(ws, we, grid, end)
    keep = weight > 0
    if not keep.any():
        return None
    start, end, weight = grid[keep], end[keep], weight[keep]
    core_vals = np.vstack([_hold(*series[sid], start, period) for _, sid in cores])
    mid = start + (end - start) // 2
    gpu, gpu_names, gpu_lanes = _gpu(trace, mid, period)
    proc, proc_name, proc_lanes = _process(trace, mid, period)
    core_lanes = sorted({int(c.table.lane[sid]) for _, sid in cores})
    return HostSignals(start, end, weight, core_vals, core_lanes, gpu, gpu_names, gpu_lanes,
                       proc, proc_name, proc_lanes)


def _period(t: np.ndarray) -> int:
    d = np.diff(np.unique(t))
    return int(np.median(d)) if len(d) else 0


def _hold(t: np.ndarray, v: np.ndarray, at: np.ndarray, grid_period: int) -> np.ndarray:
    """The sample whose interval ``[t_i, t_i + period)`` covers each time in ``at``."""
    if not len(t):
        return np.full(len(at), np.nan)
    period = max(_period(t), grid_period)
    i = np.searchsorted(t, at, side="right") - 1
    j = np.maximum(i, 0)
    ok = (i >= 0) & (at - t[j] < (3 * period) // 2)
    return np.where(ok, v[j].astype(np.float64), np.nan)


def _gpu(trace: Trace, at: np.ndarray, period: int) -> tuple[np.ndarray, list[str], list[int]]:
    """Max SM % over the GPUs that the run used (SOFA's concurrency breakdown takes the
    maximum over GPUs too)."""
    c = trace.counters
    rows, names, lanes = [], [], []
    for sid, name in enumerate(c.table.name):
        if not _GPU_SM.match(name):
            continue
        t, v = c.samples(sid)
        if not len(v) or float(np.max(v)) < GPU_USED_PCT:
            continue  # an idle GPU on the machine is not one the run waited for
        rows.append(_hold(t, v, at, period))
        names.append(name)
        lanes.append(int(c.table.lane[sid]))
    if not rows:
        return np.full(len(at), np.nan), [], []
    stack = np.vstack(rows)
    known = ~np.isnan(stack).all(axis=0)
    out = np.full(len(at), np.nan)
    out[known] = np.nanmax(stack[:, known], axis=0)
    return out, names, sorted(set(lanes))


def _process(trace: Trace, at: np.ndarray, period: int) -> tuple[np.ndarray, str, list[int]]:
    """CPU % of the profiled process tree (100 = one core), from the recorder's samples."""
    c = trace.counters
    names = c.table.name
    sids = [i for i, n in enumerate(names) if n == PROCESS_TREE]
    label = "the process tree"
    if not sids:
        sids = [i for i, n in enumerate(names) if _PROC.search(n)]
        if len(sids) == 1:
            label = names[sids[0]][:-len(" CPU %")]
    if not sids:
        return np.full(len(at), np.nan), "", []
    stack = np.vstack([_hold(*c.samples(sid), at, period) for sid in sids])
    known = ~np.isnan(stack).all(axis=0)
    out = np.full(len(at), np.nan)
    out[known] = np.nansum(stack[:, known], axis=0)
    return out, label, sorted({int(c.table.lane[s]) for s in sids})
