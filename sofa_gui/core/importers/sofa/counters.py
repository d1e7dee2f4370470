"""SOFA CSVs that become counter series: mpstat, vmstat, nvidia-smi, netstat, diskstat.

All five share the 13-column schema but use its columns differently (see
``../shared/reference/sofa-profiler.md`` section 2.3); each row becomes one
sample (mpstat also yields machine-wide averages, the old nvidia-smi rows two).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...builder import TraceBuilder, default_sort_key
from ...trace import LaneKind
from .csv_rows import CsvRows, NumericRows, parse_float, reads, text_ids

# Display order of the counter sections, top to bottom.
_SECTION = {"cpu": 0, "gpu": 1, "vmstat": 2, "net": 3, "disk": 4}


def counter_lane(b: TraceBuilder, section: str, index: int, name: str, group: str) -> int:
    sort = default_sort_key(LaneKind.COUNTER, -1, -1, -1, -1, -1) + (
        (_SECTION[section] << 24) + index)
    return b.lane(("counter", section, name), name, LaneKind.COUNTER, group, sort_key=sort)


def _series(b, lane, name, unit, t, v, mask=None) -> None:
    if mask is not None:
        t, v = t[mask], v[mask]
    if len(t):
        b.add_counter(name, unit, lane, t, v)


def _extract(rows: CsvRows, pattern: str) -> pa.StructArray:
    text = rows.columns["name"].cast(pa.string(), safe=False)
    return pc.extract_regex(text, pattern)


def _field(match: pa.StructArray, key: str) -> np.ndarray:
    v, _ = parse_float(pc.struct_field(match, key).fill_null(""))
    return v


# -- mpstat ---------------------------------------------------------------------------------
_MPSTAT = (r"mpstat_core(?P<core>-?\d+)\s*\(usr\|sys\|idl\|iow\|irq\):\s*\|\s*(?P<usr>-?\d+)"
           r"\|\s*(?P<sys>-?\d+)\|\s*(?P<idl>-?\d+)\|\s*(?P<iow>-?\d+)\|\s*(?P<irq>-?\d+)\|")


@reads("timestamp", "name")
def load_mpstat(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """Per-core utilisation (usr+sys+irq %) plus all-core usr / sys / iowait averages."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    v = nr.finish()
    m = _extract(rows, _MPSTAT)
    ok = m.is_valid().to_numpy(zero_copy_only=False)
    rows.skip("name not in mpstat's usr|sys|idl|iow|irq form", int((~ok).sum()))
    t = v["timestamp"][ok] + shift_ns
    m = m.filter(pa.array(ok))
    core = _field(m, "core").astype(np.int64)
    usr, sys_, iow, irq = (_field(m, k) for k in ("usr", "sys", "iow", "irq"))
    util = usr + sys_ + irq
    for c in np.unique(core).tolist():
        lane = counter_lane(b, "cpu", c + 1, f"CPU{c}", "CPU utilisation")
        _series(b, lane, f"CPU{c} util %", "%", t, util, core == c)
    if len(t):
        times, inv = np.unique(t, return_inverse=True)
        count = np.bincount(inv)
        lane = counter_lane(b, "cpu", 0, "CPU (all cores)", "CPU utilisation")
        for label, x in (("usr", usr), ("sys", sys_), ("iowait", iow)):
            _series(b, lane, f"CPU {label} % (mean of cores)", "%", times,
                    np.bincount(inv, weights=x) / count)
        b.load_stats.notes.append(f"{rows.file}: {len(t):,} per-core samples, plus "
                              f"{3 * len(times):,} derived all-core means")


# -- vmstat ---------------------------------------------------------------------------------
#: SOFA writes vmstat.csv as 8 equal blocks, one metric each, in this order.
_VMSTAT_BLOCKS = [
    ("bi", "vmstat blocks in/s", "blocks/s", "vmstat block I/O"),
    ("bo", "vmstat blocks out/s", "blocks/s", "vmstat block I/O"),
    ("in", "vmstat interrupts/s", "1/s", "vmstat interrupts, context switches"),
    ("cs", "vmstat context switches/s", "1/s", "vmstat interrupts, context switches"),
    ("wa", "vmstat iowait %", "%", "vmstat CPU %"),
    ("st", "vmstat steal %", "%", "vmstat CPU %"),
    ("usr", "vmstat user %", "%", "vmstat CPU %"),
    ("sys", "vmstat system %", "%", "vmstat CPU %"),
]
_VM_FIELD = re.compile(r"(\w+)=(-?\d+(?:\.\d*)?)")


@reads("timestamp", "duration", "name")
def load_vmstat(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """8 metric blocks -> 8 series; the row's ``duration`` is the value (+1e-5)."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.float("duration")
    v = nr.finish()
    t = v["timestamp"] + shift_ns
    names, idx = text_ids(rows.columns["name"])
    n = len(t)
    blocks = _vmstat_blocks(t, idx, n)
    lanes = {}
    for k, (key, series, unit, lane_name) in enumerate(_VMSTAT_BLOCKS):
        lane = lanes.get(lane_name)
        if lane is None:
            lane = lanes[lane_name] = counter_lane(b, "vmstat", len(lanes), lane_name, "vmstat")
        if blocks is not None:
            sl = slice(k * blocks, (k + 1) * blocks)
            _series(b, lane, series, unit, t[sl], np.round(v["duration"][sl] - 1e-5, 6))
        else:
            value = np.array([_vm_fields(names[i]).get(key, np.nan) for i in idx.tolist()])
            _series(b, lane, series, unit, t, value, np.isfinite(value) & _first_of_dupes(t, idx))
    if blocks is None and n:
        b.load_stats.notes.append(f"{rows.file}: rows do not form SOFA's 8 metric blocks; metrics "
                              "read from each row's name")


def _vmstat_blocks(t: np.ndarray, idx: np.ndarray, n: int) -> int | None:
    """Block length if the rows are 8 copies of one sample list (same times and names)."""
    if n == 0 or n % 8:
        return None
    m = n // 8
    t8, i8 = t.reshape(8, m), idx.reshape(8, m)
    if (t8 == t8[0]).all() and (i8 == i8[0]).all():
        return m
    return None


def _vm_fields(name: str) -> dict:
    return {k: float(x) for k, x in _VM_FIELD.findall(name)}


def _first_of_dupes(t: np.ndarray, idx: np.ndarray) -> np.ndarray:
    key = np.stack([t, idx], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    out = np.zeros(len(t), bool)
    out[first] = True
    return out


# -- nvidia-smi -----------------------------------------------------------------------------
_NVSMI_METRICS = ["SM", "memory", "encoder", "decoder"]  # event 0..3
_NVSMI_NAME = (r"^GPUID_(?P<what>sm_mem|sm|mem|enc|dec)=(?P<gpu>\d+)_(?P<a>[-\d.]+)"
               r"(?:_(?P<b>[-\d.]+))?")
_NAME_METRIC = {"sm": 0, "mem": 1, "enc": 2, "dec": 3}


@reads("timestamp", "event", "duration", "deviceId", "name")
def load_nvsmi(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """GPU utilisation %: event 0 SM, 1 memory, 2 encoder, 3 decoder; deviceId = GPU.

    Older logdirs (event -1) put SM and memory in one row's name,
    ``GPUID_sm_mem=<gpu>_<sm>_<mem>``; those rows give two samples.
    """
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.optional("event")
    nr.optional("duration", np.nan)
    nr.optional("deviceId")
    v = nr.finish()
    t = v["timestamp"] + shift_ns
    event = v["event"].astype(np.int64)
    by_event = (event >= 0) & (event <= 3) & np.isfinite(v["duration"]) & (v["deviceId"] >= 0)
    m = _extract(rows, _NVSMI_NAME)
    named = ~by_event & m.is_valid().to_numpy(zero_copy_only=False)
    rows.skip("neither a metric event (0-3) nor a GPUID_ name", int((~by_event & ~named).sum()))
    gpu = np.where(by_event, v["deviceId"], _field(m, "gpu")).astype(np.int64)
    what = pc.struct_field(m, "what").fill_null("").to_numpy(zero_copy_only=False)
    metric = np.where(by_event, event, [_NAME_METRIC.get(w.split("_")[0], 0) for w in what])
    value = np.where(by_event, v["duration"], _field(m, "a"))
    t_all = [t[by_event | named]]
    g_all, m_all, v_all = [gpu[by_event | named]], [metric[by_event | named]], \
        [value[by_event | named]]
    pair = named & (what == "sm_mem")
    if pair.any():
        b.load_stats.notes.append(f"{rows.file}: {int(pair.sum()):,} old-style rows carry SM and "
                              "memory util together (two samples each)")
    t_all.append(t[pair])
    g_all.append(gpu[pair])
    m_all.append(np.ones(int(pair.sum()), np.int64))
    v_all.append(_field(m, "b")[pair])
    t, gpu, metric, value = (np.concatenate(x) for x in (t_all, g_all, m_all, v_all))
    value = np.round(value, 3)  # SOFA adds 1e-5 to zero readings
    for g in np.unique(gpu).tolist():
        lane = counter_lane(b, "gpu", g, f"GPU{g} utilisation", "GPU utilisation")
        for k, label in enumerate(_NVSMI_METRICS):
            _series(b, lane, f"GPU{g} {label} util %", "%", t, value, (gpu == g) & (metric == k))


# -- network bandwidth ----------------------------------------------------------------------
@reads("timestamp", "bandwidth", "event", "name")
def load_netstat(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """Interface bytes/s: event 0 = tx, 1 = rx; the value is in ``bandwidth``."""
    nr = NumericRows(rows)
    nr.ns("timestamp")
    nr.float("bandwidth")
    nr.optional("event")
    v = nr.finish()
    text = rows.columns["name"].cast(pa.string(), safe=False)
    named_rx = pc.match_substring(text, "_rx").to_numpy(zero_copy_only=False)
    named_tx = pc.match_substring(text, "_tx").to_numpy(zero_copy_only=False)
    event = v["event"].astype(np.int64)
    rx = (event == 1) | ((event != 0) & named_rx)
    tx = (event == 0) | ((event != 1) & named_tx & ~named_rx)
    rows.skip("direction neither tx nor rx", int((~rx & ~tx).sum()))
    t = v["timestamp"] + shift_ns
    lane = counter_lane(b, "net", 0, "Network bandwidth", "Network")
    _series(b, lane, "network tx B/s", "B/s", t, v["bandwidth"], tx)
    _series(b, lane, "network rx B/s", "B/s", t, v["bandwidth"], rx & ~tx)


# -- disks ----------------------------------------------------------------------------------
_DISK_DEV = r"diskstat_dev:(?P<dev>[^\s(|]+)"


@reads("timestamp", "bandwidth", "payload", "duration", "deviceId", "name")
def load_diskstat(b: TraceBuilder, rows: CsvRows, shift_ns: int) -> None:
    """Per-device disk throughput.

    Current SOFA: ``deviceId`` = device name, ``bandwidth`` = MB/s. Older SOFA wrote
    ``deviceId`` -1 and the bytes moved in the interval as ``duration``; those rows
    become a bytes-per-sample series.
    """
    nr = NumericRows(rows)
    nr.ns("timestamp")
    for col in ("bandwidth", "payload", "duration"):
        nr.optional(col)
    v = nr.finish()
    dev_col = pc.ascii_trim_whitespace(rows.columns["deviceId"])
    dev_numeric = parse_float(dev_col)[1]
    named = pc.struct_field(_extract(rows, _DISK_DEV), "dev").fill_null("")
    dev = pc.if_else(pa.array(dev_numeric), named, dev_col).to_pylist()
    missing = np.array([d == "" for d in dev], bool)
    rows.skip("no device name", int(missing.sum()))
    t = v["timestamp"] + shift_ns
    rate = v["bandwidth"] >= 0
    old_bytes = np.where(v["payload"] >= 0, v["payload"], v["duration"])
    names = sorted(set(dev) - {""})
    dev_arr = np.array(dev, dtype=object)
    for k, d in enumerate(names):
        lane = counter_lane(b, "disk", k, f"disk {d}", "Disk")
        mine = (dev_arr == d) & ~missing
        _series(b, lane, f"disk {d} MB/s", "MB/s", t, v["bandwidth"], mine & rate)
        _series(b, lane, f"disk {d} read+write bytes per sample", "B", t, old_bytes,
                mine & ~rate & (old_bytes >= 0))
    lost = ~missing & ~rate & (old_bytes < 0)
    rows.skip("no bandwidth or byte count", int(lost.sum()))
