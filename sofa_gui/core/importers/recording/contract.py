"""The recording folder's contract, shared by the recorder (writes) and the importer (reads).

Layout of a folder made by ``sofa-gui record``::

    manifest.json        what ran, when, on what; ``format`` = FORMAT_NAME, ``version``
    counters.parquet     COUNTERS rows (written as parts under counters/, then compacted)
    processes.parquet    PROCESSES rows (parts under processes/)
    output.log           the command's stdout + stderr
    torch/               torch.profiler (Kineto) traces of the recorded processes
    pyspy/pyspy.json     py-spy samples (speedscope JSON)

Counters are long-format rows ``(time_ns, lane, series, unit, device, value)``:
self-describing, so a part written before a new network interface or GPU
appeared still reads fine. Rates (utilisation, bytes/s) are stamped at the
start of the interval they describe, gauges (memory) at the sample time, so a
step plot of each series is right.
"""

from __future__ import annotations

import pyarrow as pa

FORMAT_NAME = "sofa_gui.recording"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
COUNTERS_FILE = "counters.parquet"
COUNTERS_PARTS = "counters"
PROCESSES_FILE = "processes.parquet"
PROCESSES_PARTS = "processes"
OUTPUT_LOG = "output.log"
TORCH_DIR = "torch"
PYSPY_PATH = "pyspy/pyspy.json"

_STR = pa.dictionary(pa.int32(), pa.string())

COUNTERS = pa.schema([
    ("time_ns", pa.int64()),
    ("lane", _STR),
    ("series", _STR),
    ("unit", _STR),
    ("device", pa.int16()),
    ("value", pa.float64()),
])

#: One row per process of the child's tree per sample. ``cpu_percent`` and
#: ``ctx_switches_per_s`` describe ``[since_ns, time_ns)``; NaN on a first sample.
PROCESSES = pa.schema([
    ("time_ns", pa.int64()),
    ("since_ns", pa.int64()),
    ("pid", pa.int64()),
    ("ppid", pa.int64()),
    ("name", _STR),
    ("cpu_percent", pa.float64()),
    ("rss_bytes", pa.int64()),
    ("threads", pa.int32()),
    ("ctx_switches_per_s", pa.float64()),
])
