"""NVIDIA GPU counters through NVML (``nvidia-ml-py``), when it loads.

Per GPU: utilisation (SM and memory-controller %), memory used, PCIe tx/rx
throughput, power and SM clock. A metric the device does not support is
dropped for that device and noted; a machine without the library or driver
records no GPU counters and the manifest says why. Nothing here ever fails a
recording.

``nvmlDeviceGetPcieThroughput`` blocks ~20 ms per direction, so with many GPUs
and a short interval PCIe is read every k-th tick (k chosen so PCIe costs at
most half an interval); the manifest records k.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from .clock import EpochClock
from .parts import PartWriter
from .periodic import Periodic

_PCIE_READ_S = 0.045  # two directions, ~20 ms each


@dataclass
class _Metric:
    lane: str
    series: str
    unit: str
    read: Callable[[], float]
    kind: str = ""  # "util" | "mem" | "pcie" | "": what the summary and schedule need


@dataclass
class _Gpu:
    index: int
    handle: object
    metrics: list[_Metric] = field(default_factory=list)
    util_sum: float = 0.0
    util_n: int = 0
    mem_peak: float = 0.0


def _decode(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class Nvml:
    """An initialised NVML session, or the reason there is none (``reason``)."""

    def __init__(self):
        self.nv = None
        self.reason = ""
        self.gpus: list[dict] = []
        self.driver = ""
        try:
            import pynvml as nv
        except ImportError:
            self.reason = "nvidia-ml-py is not installed (pip install 'sofa-gui[gpu]')"
            return
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            self.reason = _init_reason(nv, exc)
            return
        self.nv = nv
        try:
            count = nv.nvmlDeviceGetCount()
            self.driver = _decode(nv.nvmlSystemGetDriverVersion())
        except nv.NVMLError as exc:
            self.close()
            self.reason = f"NVML loaded but could not list GPUs: {exc}"
            return
        if count == 0:
            self.close()
            self.reason = "NVML loaded but reports no GPUs"
            return
        for i in range(count):
            self.gpus.append(self._describe(i))

    @property
    def ok(self) -> bool:
        return self.nv is not None

    def _describe(self, i: int) -> dict:
        nv = self.nv
        h = nv.nvmlDeviceGetHandleByIndex(i)
        info = {"index": i, "driver_version": self.driver}
        for key, fn in (("name", lambda: _decode(nv.nvmlDeviceGetName(h))),
                        ("uuid", lambda: _decode(nv.nvmlDeviceGetUUID(h))),
                        ("memory_bytes", lambda: int(nv.nvmlDeviceGetMemoryInfo(h).total)),
                        ("pci_bus_id", lambda: _decode(nv.nvmlDeviceGetPciInfo(h).busId)),
                        ("power_limit_w", lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1e3),
                        ("max_sm_clock_mhz",
                         lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))):
            try:
                info[key] = fn()
            except nv.NVMLError:
                pass
        return info

    def close(self) -> None:
        if self.nv is not None:
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass
            self.nv = None


def _init_reason(nv, exc) -> str:
    lib_missing = getattr(nv, "NVMLError_LibraryNotFound", ())
    driver_missing = getattr(nv, "NVMLError_DriverNotLoaded", ())
    if lib_missing and isinstance(exc, lib_missing):
        return "NVML library not found: no NVIDIA driver on this machine"
    if driver_missing and isinstance(exc, driver_missing):
        return "NVIDIA driver not loaded: no usable GPU on this machine"
    return f"NVML could not start: {exc}"


class GpuSampler(Periodic):
    """Samples every GPU of an :class:`Nvml` session into the counter parts."""

    def __init__(self, nvml: Nvml, clock: EpochClock, counters: PartWriter, interval_s: float):
        super().__init__("sofa-gpu-sampler", interval_s)
        self.nvml, self.clock, self.counters = nvml, clock, counters
        self.gpus = [self._metrics(g["index"]) for g in nvml.gpus]
        self.dropped: list[str] = []
        self.pcie_every = max(1, math.ceil(len(self.gpus) * _PCIE_READ_S / (interval_s * 0.5)))
        self.latest: dict = {}

    def _metrics(self, i: int) -> _Gpu:
        nv = self.nvml.nv
        h = nv.nvmlDeviceGetHandleByIndex(i)
        g = f"GPU{i}"
        kb = 1024.0

        def pcie(direction):
            return lambda: kb * nv.nvmlDeviceGetPcieThroughput(h, direction)

        return _Gpu(i, h, [
            _Metric(f"{g} utilization", f"{g} SM util %", "%",
                    lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu, kind="util"),
            _Metric(f"{g} utilization", f"{g} memory util %", "%",
                    lambda: nv.nvmlDeviceGetUtilizationRates(h).memory),
            _Metric(f"{g} memory", f"{g} memory used", "B",
                    lambda: nv.nvmlDeviceGetMemoryInfo(h).used, kind="mem"),
            _Metric(f"{g} PCIe", f"{g} PCIe tx", "B/s", pcie(nv.NVML_PCIE_UTIL_TX_BYTES),
                    kind="pcie"),
            _Metric(f"{g} PCIe", f"{g} PCIe rx", "B/s", pcie(nv.NVML_PCIE_UTIL_RX_BYTES),
                    kind="pcie"),
            _Metric(f"{g} power", f"{g} power", "W", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1e3),
            _Metric(f"{g} SM clock", f"{g} SM clock", "MHz",
                    lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        ])

    def tick(self, mono_ns: int) -> None:
        nv = self.nvml.nv
        t = self.clock.to_epoch(mono_ns)
        with_pcie = self.ticks % self.pcie_every == 0
        cols = {k: [] for k in ("time_ns", "lane", "series", "unit", "device", "value")}
        live_util, live_mem = [], []
        for g in self.gpus:
            for m in list(g.metrics):
                if m.kind == "pcie" and not with_pcie:
                    continue
                try:
                    v = float(m.read())
                except nv.NVMLError as exc:
                    g.metrics.remove(m)
                    self.dropped.append(f"{m.series}: {exc}")
                    continue
                for k, x in zip(cols, (t, m.lane, m.series, m.unit, g.index, v)):
                    cols[k].append(x)
                if m.kind == "util":
                    g.util_sum, g.util_n = g.util_sum + v, g.util_n + 1
                    live_util.append(v)
                elif m.kind == "mem":
                    g.mem_peak = max(g.mem_peak, v)
                    live_mem.append(v)
        if cols["time_ns"]:
            self.counters.add(**cols)
        self.latest = {"gpu_util": live_util, "gpu_mem": live_mem}

    def mean_utilization(self) -> dict[int, float]:
        return {g.index: g.util_sum / g.util_n for g in self.gpus if g.util_n}

    def describe(self) -> dict:
        return {
            "recorded": True,
            "gpus": len(self.gpus),
            "metrics": sorted({m.series.split(" ", 1)[1] for g in self.gpus for m in g.metrics}),
            "pcie_every_n_samples": self.pcie_every,
            "dropped_metrics": self.dropped,
            "samples": self.ticks,
            "errors": dict(self.errors),
            "mean_utilization_percent": {str(k): round(v, 2)
                                         for k, v in self.mean_utilization().items()},
            "peak_memory_bytes": {str(g.index): int(g.mem_peak) for g in self.gpus},
        }
