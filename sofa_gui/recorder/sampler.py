"""psutil sampling of the machine and of the child's process tree.

Every ``interval`` the :class:`HostSampler` reads per-core CPU times, memory,
disk and network byte counters and context switches (one ``/proc`` pass each),
plus CPU time, RSS, threads and context switches of every process in the
child's tree (new children are looked for every 0.5 s and kept once seen, so a
grandchild re-parented to init is still followed). Rows go to :class:`PartWriter`
buffers that this thread flushes every ``flush_interval``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field

import psutil

from ..core import metadata
from .clock import EpochClock
from .parts import PartWriter
from .periodic import Periodic

_GUEST = ("guest", "guest_nice")
#: How often the tree is searched for new processes. Walking it means reading every
#: /proc/<pid>/stat on the machine (~2-7 ms), so it runs at most every 0.5 s, while the
#: known processes are sampled every tick.
DISCOVER_EVERY_NS = 500_000_000  # already counted inside user / nice on Linux


def _busy_total(t) -> tuple[float, float]:
    """(busy, total) CPU seconds of one ``cpu_times`` entry; idle and iowait are not busy."""
    d = t._asdict()
    total = sum(v for k, v in d.items() if k not in _GUEST)
    return total - d.get("idle", 0.0) - d.get("iowait", 0.0), total


@dataclass
class _Proc:
    proc: psutil.Process
    name: str
    ppid: int
    cmdline: list[str]
    first_ns: int
    last_ns: int = 0
    cpu_s: float | None = None
    ctx: int | None = None
    prev_ns: int = 0


@dataclass
class SampleStats:
    """Running aggregates for the end-of-run summary (no re-reading of files)."""

    samples: int = 0
    cpu_busy_sum: float = 0.0
    core_sums: list[float] = field(default_factory=list)
    tree_cpu_sum: float = 0.0
    tree_cpu_n: int = 0
    peak_rss: int = 0
    peak_processes: int = 0

    def mean_cpu(self) -> float | None:
        return self.cpu_busy_sum / self.samples if self.samples else None

    def busiest_core(self) -> tuple[int, float] | None:
        if not self.samples or not self.core_sums:
            return None
        i = max(range(len(self.core_sums)), key=self.core_sums.__getitem__)
        return i, self.core_sums[i] / self.samples

    def mean_tree_cpu(self) -> float | None:
        return self.tree_cpu_sum / self.tree_cpu_n if self.tree_cpu_n else None


class HostSampler(Periodic):
    """Samples the machine and the watched process tree; see the module docstring."""

    def __init__(self, clock: EpochClock, counters: PartWriter, processes: PartWriter,
                 interval_s: float, flush_interval_s: float, on_sample=None,
                 extra_flush: list[PartWriter] | None = None):
        super().__init__("sofa-host-sampler", interval_s)
        self.clock = clock
        self.counters = counters
        self.processes = processes
        self.flush_ns = int(flush_interval_s * 1e9)
        self.on_sample = on_sample
        self.extra_flush = list(extra_flush or [])
        self.stats = SampleStats()
        self.latest: dict = {}  # last snapshot, also read by the GPU sampler's callback
        self._root: psutil.Process | None = None
        self._procs: dict[int, _Proc] = {}
        self._discovered_ns = 0
        self._gone: dict[int, _Proc] = {}
        self._prev: dict | None = None
        self._last_flush = time.monotonic_ns()
        self._lock = threading.Lock()

    # -- public ---------------------------------------------------------------------
    def watch(self, pid: int) -> None:
        """Start following the process tree rooted at ``pid``."""
        try:
            root = psutil.Process(pid)
        except psutil.Error:
            return
        with self._lock:
            self._root = root

    def process_list(self) -> list[dict]:
        """Every process seen in the tree, for the manifest."""
        with self._lock:
            procs = list(self._gone.values()) + list(self._procs.values())
        rows = [{"pid": p.proc.pid, "ppid": p.ppid, "name": p.name, "cmdline": p.cmdline,
                 "first_seen_ns": p.first_ns, "last_seen_ns": p.last_ns} for p in procs]
        return sorted(rows, key=lambda r: (r["first_seen_ns"], r["pid"]))

    # -- sampling -------------------------------------------------------------------
    def tick(self, mono_ns: int) -> None:
        t = self.clock.to_epoch(mono_ns)
        snap = {
            "t": t,
            "cpu": psutil.cpu_times(percpu=True),
            "mem": psutil.virtual_memory(),
            "swap": psutil.swap_memory(),
            "disk": psutil.disk_io_counters(perdisk=False),
            "net": psutil.net_io_counters(pernic=True),
            "ctx": psutil.cpu_stats().ctx_switches,
        }
        live = {"t": t}
        self._gauges(snap, live)
        if self._prev is not None:
            self._rates(self._prev, snap, live)
        self._prev = snap
        self._sample_tree(t, live)
        self.latest = live
        if self.on_sample is not None:
            self.on_sample(dict(live))
        if mono_ns - self._last_flush >= self.flush_ns:
            self.flush()
            self._last_flush = mono_ns

    def flush(self) -> None:
        for w in (self.counters, self.processes, *self.extra_flush):
            w.flush()

    def finish(self) -> None:
        self.flush()

    def _emit(self, t: int, lane: str, unit: str, values: dict[str, float], device: int = -1):
        n = len(values)
        self.counters.add(time_ns=[t] * n, lane=[lane] * n, series=list(values),
                          unit=[unit] * n, device=[device] * n,
                          value=[float(v) for v in values.values()])

    def _gauges(self, s: dict, live: dict) -> None:
        t, mem, swap = s["t"], s["mem"], s["swap"]
        self._emit(t, "Memory", "B", {"memory used": mem.total - mem.available,
                                      "memory available": mem.available,
                                      "swap used": swap.used})
        live["mem_used"] = mem.total - mem.available

    def _rates(self, a: dict, b: dict, live: dict) -> None:
        t0, dt = a["t"], (b["t"] - a["t"]) / 1e9
        if dt <= 0:
            return
        cores = {}
        for i, (ca, cb) in enumerate(zip(a["cpu"], b["cpu"])):
            busy_a, tot_a = _busy_total(ca)
            busy_b, tot_b = _busy_total(cb)
            d = tot_b - tot_a
            cores[f"CPU{i} util %"] = min(max(100.0 * (busy_b - busy_a) / d, 0.0), 100.0) if d > 0 \
                else 0.0
        self._emit(t0, "CPU cores", "%", cores)
        self._emit(t0, "CPU", "%", _split(a["cpu"], b["cpu"]))
        if a["disk"] is not None and b["disk"] is not None:
            self._emit(t0, "Disk I/O", "B/s", {
                "disk read": max(b["disk"].read_bytes - a["disk"].read_bytes, 0) / dt,
                "disk write": max(b["disk"].write_bytes - a["disk"].write_bytes, 0) / dt})
        for nic, nb in b["net"].items():
            na = a["net"].get(nic)
            if na is not None:
                self._emit(t0, "Network", "B/s", {
                    f"{nic} tx": max(nb.bytes_sent - na.bytes_sent, 0) / dt,
                    f"{nic} rx": max(nb.bytes_recv - na.bytes_recv, 0) / dt})
        self._emit(t0, "Context switches", "1/s",
                   {"context switches": max(b["ctx"] - a["ctx"], 0) / dt})
        busy = sum(cores.values()) / max(len(cores), 1)
        live.update(cpu_busy=busy, cores=list(cores.values()))
        st = self.stats
        st.samples += 1
        st.cpu_busy_sum += busy
        if len(st.core_sums) != len(cores):
            st.core_sums = [0.0] * len(cores)
        for i, v in enumerate(cores.values()):
            st.core_sums[i] += v

    # -- the child's process tree ---------------------------------------------------------
    def _sample_tree(self, t: int, live: dict) -> None:
        with self._lock:
            root = self._root
            if root is None:
                return
            if t - self._discovered_ns >= DISCOVER_EVERY_NS or not self._procs:
                self._discover(root, t)
                self._discovered_ns = t
            rows = {k: [] for k in ("time_ns", "since_ns", "pid", "ppid", "name", "cpu_percent",
                                    "rss_bytes", "threads", "ctx_switches_per_s")}
            for pid in list(self._procs):
                self._sample_one(self._procs[pid], t, rows)
        if rows["pid"]:
            self.processes.add(**rows)
        cpu = [v for v in rows["cpu_percent"] if not math.isnan(v)]
        rss = sum(rows["rss_bytes"])
        live.update(tree_cpu=sum(cpu) if cpu else None, tree_rss=rss, processes=len(rows["pid"]))
        st = self.stats
        if cpu:
            st.tree_cpu_sum += sum(cpu)
            st.tree_cpu_n += 1
        st.peak_rss = max(st.peak_rss, rss)
        st.peak_processes = max(st.peak_processes, len(rows["pid"]))

    def _discover(self, root: psutil.Process, t: int) -> None:
        procs = [root]
        try:
            procs += root.children(recursive=True)
        except psutil.Error:
            pass
        for p in procs:
            if p.pid in self._procs:
                continue
            try:
                with p.oneshot():
                    info = _Proc(p, p.name(), p.ppid(), _cmdline(p), t)
            except psutil.Error:
                continue
            self._procs[p.pid] = info

    def _sample_one(self, info: _Proc, t: int, rows: dict) -> None:
        p = info.proc
        try:
            with p.oneshot():
                if p.status() == psutil.STATUS_ZOMBIE:
                    raise psutil.ZombieProcess(p.pid)
                ct = p.cpu_times()
                rss = p.memory_info().rss
                threads = p.num_threads()
                cs = p.num_ctx_switches()
        except psutil.Error:
            self._gone[p.pid] = self._procs.pop(p.pid)
            return
        cpu_s, ctx = ct.user + ct.system, cs.voluntary + cs.involuntary
        dt = (t - info.prev_ns) / 1e9 if info.cpu_s is not None else 0.0
        cpu_pct = 100.0 * (cpu_s - info.cpu_s) / dt if dt > 0 else math.nan
        ctx_rate = (ctx - info.ctx) / dt if dt > 0 else math.nan
        since = info.prev_ns if dt > 0 else t
        info.cpu_s, info.ctx, info.prev_ns, info.last_ns = cpu_s, ctx, t, t
        for k, v in (("time_ns", t), ("since_ns", since), ("pid", p.pid), ("ppid", info.ppid),
                     ("name", info.name), ("cpu_percent", max(cpu_pct, 0.0)),
                     ("rss_bytes", rss), ("threads", threads),
                     ("ctx_switches_per_s", max(ctx_rate, 0.0))):
            rows[k].append(v)


def _split(a, b) -> dict[str, float]:
    """Whole-machine user / system / iowait / busy % over an interval."""
    def tot(times, key):
        return sum(getattr(c, key, 0.0) for c in times)

    total = sum(_busy_total(cb)[1] - _busy_total(ca)[1] for ca, cb in zip(a, b))
    if total <= 0:
        return {"CPU busy %": 0.0, "CPU user %": 0.0, "CPU system %": 0.0, "CPU iowait %": 0.0}
    busy = sum(_busy_total(cb)[0] - _busy_total(ca)[0] for ca, cb in zip(a, b))

    def pct(*keys):
        return max(100.0 * sum(tot(b, k) - tot(a, k) for k in keys) / total, 0.0)

    return {"CPU busy %": min(max(100.0 * busy / total, 0.0), 100.0),
            "CPU user %": pct("user", "nice"), "CPU system %": pct("system", "irq", "softirq"),
            "CPU iowait %": pct("iowait")}


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _cpuinfo_field(names: tuple[str, ...]) -> str | None:
    """The first /proc/cpuinfo line's value whose field starts with one of ``names``
    (Linux); None where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(names) and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (Linux), else platform's guess."""
    name = _cpuinfo_field(("model name", "hardware", "cpu model"))
    if name:
        return name
    import platform

    return platform.processor() or platform.machine()


def cpu_isa() -> dict[str, bool] | None:
    """Which of the instruction sets that decide low-precision speed the CPU has
    (:data:`~sofa_gui.core.metadata.CPU_ISA_FLAGS`, from /proc/cpuinfo's ``flags`` on
    x86 Linux): with native bf16 (avx512_bf16, amx_bf16) autocast to bf16 speeds the math
    up, without it bf16 is emulated and slower than fp32. None where the CPU's flags
    cannot be read."""
    return metadata.cpu_isa(_cpuinfo_field(("flags",)) or "")


def host_info() -> dict:
    """CPU model, core counts and memory of this machine (GPUs are added by NVML)."""
    import platform
    import socket

    return {
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_isa": cpu_isa(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "memory_bytes": psutil.virtual_memory().total,
        "boot_time_epoch_s": psutil.boot_time(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
