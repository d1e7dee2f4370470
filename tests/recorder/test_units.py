"""Small pieces of the recorder: options, parts, the tick schedule, NVML handling, summary."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sofa_gui.core.importers.recording import contract as schema
from sofa_gui.recorder.cli import split_argv
from sofa_gui.recorder.clock import EpochClock
from sofa_gui.recorder.config import (
    CommandError,
    RecordConfig,
    command_label,
    default_output,
    parse_window,
    resolve_executable,
)
from sofa_gui.recorder.nvml import GpuSampler, Nvml
from sofa_gui.recorder.parts import PartWriter, compact, part_files
from sofa_gui.recorder.periodic import Periodic
from sofa_gui.recorder.runner import RecordResult
from sofa_gui.recorder.summary import summary_text
from sofa_gui.recorder.torchinfo import collect_torch


def test_parse_window():
    assert parse_window("5:10") == (5.0, 10.0)
    assert parse_window(" 0.5 : 2 ") == (0.5, 2.0)
    for bad in ("", "5", "a:b", "1:0", "-1:2", "1:2:3"):
        with pytest.raises(ValueError):
            parse_window(bad)


def test_config_validation():
    with pytest.raises(ValueError):
        RecordConfig(command=())
    with pytest.raises(ValueError):
        RecordConfig(command=("x",), interval_s=0.001)
    with pytest.raises(ValueError):
        RecordConfig(command=("x",), torch_window=(1.0, 2.0))


def test_command_label_and_default_output(tmp_path):
    assert command_label(["python3", "train.py", "--lr", "1"]) == "train"
    assert command_label(["/usr/bin/python3.11", "-u", "-m", "pkg.main"]) == "pkg.main"
    assert command_label(["python", "-c", "print(1)"]) == "python"
    assert command_label(["./run me.sh"]) == "run_me.sh"
    first = default_output(["torchrun", "x.py"], tmp_path, now=0)
    first.mkdir()
    second = default_output(["torchrun", "x.py"], tmp_path, now=0)
    assert first.name.endswith("-torchrun") and second.name == first.name + "-2"


def test_resolve_executable(tmp_path):
    assert Path(resolve_executable(["sh"], None)).name == "sh"
    (tmp_path / "d").mkdir()
    f = tmp_path / "f.sh"
    f.write_text("#!/bin/sh\n")
    f.chmod(0o755)
    assert resolve_executable(["./f.sh"], tmp_path) == str(f)
    with pytest.raises(CommandError, match="folder"):
        resolve_executable(["./d"], tmp_path)
    with pytest.raises(CommandError, match="not found"):
        resolve_executable(["./missing"], tmp_path)


def test_split_argv():
    assert split_argv(["-o", "x", "--", "python", "-o"]) == (["-o", "x"], ["python", "-o"])
    assert split_argv(["--torch", "--interval", "0.5", "python", "t.py", "--interval", "3"]) == (
        ["--torch", "--interval", "0.5"], ["python", "t.py", "--interval", "3"])
    assert split_argv(["--py-spy"]) == (["--py-spy"], [])


def test_parts_flush_and_compact(tmp_path):
    w = PartWriter(tmp_path / "parts", schema.COUNTERS)
    assert w.flush() is None
    for k in range(3):
        w.add(time_ns=[k, k], lane=["CPU", "CPU"], series=["a", "b"], unit=["%", "%"],
              device=[-1, -1], value=[1.0, 2.0])
        w.flush()
    assert [p.name for p in part_files(tmp_path / "parts")] == [
        "part-000001.parquet", "part-000002.parquet", "part-000003.parquet"]
    assert not list((tmp_path / "parts").glob(".*"))
    assert compact(tmp_path / "parts", tmp_path / "all.parquet", schema.COUNTERS) == 6
    assert not (tmp_path / "parts").exists()
    t = pq.read_table(tmp_path / "all.parquet")
    assert t.column("time_ns").to_pylist() == [0, 0, 1, 1, 2, 2]
    assert compact(tmp_path / "none", tmp_path / "empty.parquet", schema.PROCESSES) == 0
    assert pq.read_table(tmp_path / "empty.parquet").schema.names == schema.PROCESSES.names


def test_periodic_survives_failing_ticks_and_skips_missed_slots():
    class Flaky(Periodic):
        def __init__(self):
            super().__init__("flaky", 0.02)
            self.calls = 0

        def tick(self, mono_ns):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("boom")
            if self.calls == 3:
                time.sleep(0.1)  # ~5 slots late

    p = Flaky()
    p.start()
    time.sleep(0.3)
    p.stop()
    assert p.errors == {"RuntimeError: boom": 1}
    assert p.late_ticks >= 4
    assert p.calls < 0.3 / 0.02 + 3  # no burst to catch up


def test_epoch_clock_tracks_wall_time():
    c = EpochClock()
    assert abs(c.now() - time.time_ns()) < 50_000_000
    assert c.describe()["timeline"] == "unix_epoch_ns"


def test_nvml_absent_is_a_reason_not_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    n = Nvml()
    assert not n.ok and "nvidia-ml-py is not installed" in n.reason


def test_nvml_on_this_machine_says_why_when_there_is_no_gpu():
    n = Nvml()
    try:
        if n.ok:
            assert n.gpus and n.gpus[0]["name"]
        else:
            assert n.reason and not n.gpus
    finally:
        n.close()


def _fake_pynvml(pcie_supported: bool):
    """A stand-in NVML with one GPU, to exercise the sampler without a GPU."""
    class NVMLError(Exception):
        pass

    nv = types.SimpleNamespace(NVMLError=NVMLError, NVML_CLOCK_SM=1,
                               NVML_PCIE_UTIL_TX_BYTES=0, NVML_PCIE_UTIL_RX_BYTES=1)
    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlSystemGetDriverVersion = lambda: b"999.1"
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("h", i)
    nv.nvmlDeviceGetName = lambda h: "Fake GPU"
    nv.nvmlDeviceGetUUID = lambda h: "GPU-0"
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=80 << 30, used=5 << 30)
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"0000:01:00.0")
    nv.nvmlDeviceGetPowerManagementLimit = lambda h: 700_000
    nv.nvmlDeviceGetMaxClockInfo = lambda h, c: 1980
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=70, memory=30)
    nv.nvmlDeviceGetPowerUsage = lambda h: 350_000
    nv.nvmlDeviceGetClockInfo = lambda h, c: 1755

    def pcie(h, direction):
        if not pcie_supported:
            raise NVMLError("Not Supported")
        return 1000 + direction

    nv.nvmlDeviceGetPcieThroughput = pcie
    return nv


def test_gpu_sampler_records_metrics_and_drops_unsupported_ones(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(pcie_supported=False))
    nvml = Nvml()
    assert nvml.ok and nvml.gpus[0]["name"] == "Fake GPU"
    assert nvml.gpus[0]["memory_bytes"] == 80 << 30 and nvml.gpus[0]["power_limit_w"] == 700
    w = PartWriter(tmp_path / "c", schema.COUNTERS)
    g = GpuSampler(nvml, EpochClock(), w, interval_s=0.1)
    for _ in range(3):
        g.tick(time.monotonic_ns())
        g.ticks += 1
    w.flush()
    t = pq.read_table(part_files(tmp_path / "c")[0]).to_pydict()
    got = dict(zip(t["series"], t["value"]))
    assert got["GPU0 SM util %"] == 70 and got["GPU0 memory used"] == 5 << 30
    assert got["GPU0 power"] == 350 and got["GPU0 SM clock"] == 1755
    assert not any("PCIe" in s for s in t["series"])
    d = g.describe()
    assert d["mean_utilization_percent"] == {"0": 70.0}
    assert any("PCIe" in x and "Not Supported" in x for x in d["dropped_metrics"])
    assert set(t["device"]) == {0}


def test_gpu_sampler_reads_pcie_every_kth_tick(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(pcie_supported=True))
    w = PartWriter(tmp_path / "c", schema.COUNTERS)
    g = GpuSampler(Nvml(), EpochClock(), w, interval_s=0.02)  # 45 ms of PCIe > half of 20 ms
    assert g.pcie_every == 5
    for _ in range(10):
        g.tick(time.monotonic_ns())
        g.ticks += 1
    w.flush()
    series = pq.read_table(part_files(tmp_path / "c")[0]).column("series").to_pylist()
    assert series.count("GPU0 PCIe tx") == 2 and series.count("GPU0 SM util %") == 10


def test_torch_reasons(tmp_path):
    assert "never imported torch" in collect_torch(tmp_path / "torch", 0)["reason"]
    d = tmp_path / "torch"
    d.mkdir()
    (d / "kineto-7.status.json").write_text(json.dumps({"pid": 7, "state": "running"}))
    (d / ".kineto-7.json.tmp").write_text("{")  # an export cut short
    out = collect_torch(d, -9)
    assert not out["recorded"] and "SIGKILL" in out["reason"]
    assert out["incomplete_exports_removed"] == 1 and not (d / ".kineto-7.json.tmp").exists()
    (d / "kineto-7.status.json").write_text(json.dumps({"pid": 7, "error": "could not x"}))
    assert collect_torch(d, 0)["reason"] == "could not x"


def test_summary_paragraph():
    r = RecordResult(folder=Path("/r"), exit_code=137, returncode=-9, signal="SIGKILL",
                     duration_s=3.5, mean_cpu=42.0, busiest_core=(3, 99.0), mean_tree_cpu=180.0,
                     peak_rss=3 << 30, gpu_mean={0: 55.5, 1: 60.0}, gpu_reason="",
                     sources={"torch": {"recorded": False, "reason": "the child never "
                                                                     "imported torch"}},
                     stopped_by="SIGINT forwarded to the child")
    text = summary_text(r)
    assert "3.50 s" in text and "killed by SIGKILL (exit code 137)" in text
    assert "42.0% of all cores" in text and "busiest core 3: 99.0%" in text
    assert "GPU0 55.5%, GPU1 60.0%" in text and "3.22 GB" in text
    assert "torch.profiler not recorded (the child never imported torch)" in text.lower()


def test_handover_figures_are_robust_to_a_few_late_batches():
    """The hand-over calibration takes medians of paired one/two-tensor batches: a few
    batches the scheduler delayed by 10 ms (a busy shared machine) do not move the figures,
    where a mean would; the spread says how uneven the batches were."""
    from sofa_gui.recorder.calibrate import handover_parts_from
    one = [2.0e-3] * 40
    two = [2.5e-3] * 40
    big = [4.1e-3] * 40
    late = [k for k in range(0, 40, 8)]  # 5 of 40 cycles: both batches 10 ms late
    for k in late:
        one[k] += 10e-3
        two[k] += 10e-3
    h = handover_parts_from(one, two, big)
    assert h["per_tensor_us"] == pytest.approx(500.0)
    assert h["per_batch_us"] == pytest.approx(1500.0)  # median one (2 ms) minus a tensor
    assert h["per_mb_us"] == pytest.approx(2100.0 / 4.194304, rel=1e-3)
    assert h["batches"] == 40 and h["spread_us"] == pytest.approx(0.0, abs=1e-6)
    two[1] += 4e-3  # one uneven batch more: a non-zero interquartile range needs a quarter
    for k in range(2, 12):
        two[k] += 1e-3
    assert handover_parts_from(one, two, big)["spread_us"] > 0
    assert handover_parts_from([], two, big) is None


def test_the_worker_s_side_of_the_hand_over_is_its_cpu_beyond_making_the_batch():
    """Per layout, the median over rounds of the worker's CPU per batch less the main
    process's for making the same batch; the tensor and MB parts are differences of those
    medians; a layout without a usable round (no thread clocks) gives no figures."""
    from sofa_gui.recorder.calibrate import send_parts_from
    got = {"one": {"worker": [1.2e-3, 1.3e-3, 9e-3], "local": [0.3e-3, 0.3e-3, 0.3e-3]},
           "two": {"worker": [1.6e-3, 1.7e-3, 1.6e-3], "local": [0.4e-3, 0.4e-3, 0.4e-3]},
           "big": {"worker": [5.0e-3, 5.1e-3, 5.2e-3], "local": [0.7e-3, 0.8e-3, 0.7e-3]}}
    s = send_parts_from(got)  # one late round (9 ms) does not move the medians
    assert s["send_per_tensor_us"] == pytest.approx(200.0)  # 1.2 ms - 1.0 ms
    assert s["send_per_batch_us"] == pytest.approx(800.0)  # 1.0 ms less a tensor
    assert s["send_per_mb_us"] == pytest.approx((4.3e-3 - 1.0e-3) * 1e6 / 4.194304, rel=1e-3)
    got["big"]["worker"] = [None, None, None]
    assert send_parts_from(got)["send_per_mb_us"] is None
