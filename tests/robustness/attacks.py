"""Hostile inputs past the mutation fuzzer: small files with a huge cost.

Each ``make_*`` writes one input into a folder and returns its path. The tests in
``tests/robustness`` use small sizes; ``benchmarks/fuzz.py --attacks`` runs the same
families at full size in child processes and prints time, peak memory and outcome.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np


def _event(name: str, ts: float, tid: int, dur: float = 1.0, **extra) -> dict:
    return {"ph": "X", "name": name, "cat": "cpu_op", "ts": ts, "dur": dur, "pid": 1,
            "tid": tid, **extra}


def many_threads(folder: Path, threads: int, per_thread: int = 2) -> Path:
    """A Chrome trace with ``threads`` lanes (load time was quadratic in them)."""
    evs = [_event("op", t * 10 + i * 3, t, 2) for t in range(threads) for i in range(per_thread)]
    path = folder / f"threads-{threads}.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


def gzip_stream(path: Path, parts) -> Path:
    """Write ``parts`` (bytes, or (byte, count) runs of one repeated byte) gzip-compressed."""
    with gzip.open(path, "wb", compresslevel=9) as f:
        for part in parts:
            if isinstance(part, tuple):
                byte, count = part
                block = byte * min(count, 1 << 20)
                for _ in range(count // len(block)):
                    f.write(block)
                f.write(byte * (count % len(block)))
            else:
                f.write(part)
    return path


ONE_EVENT = json.dumps(_event("op", 1.0, 1)).encode()


def trailing_blank_gzip(folder: Path, blank: int, where: str = "after") -> Path:
    """One event then ``blank`` bytes of spaces (after the document, or inside the array)."""
    path = folder / f"blank-{where}-{blank}.json.gz"
    if where == "after":
        parts = [b'{"traceEvents": [', ONE_EVENT, b"]}", (b" ", blank)]
    elif where == "array":
        parts = [b'{"traceEvents": [', ONE_EVENT, b",", (b" ", blank), ONE_EVENT, b"]}"]
    else:  # before the events array, between header keys
        parts = [b'{"a": 1,', (b" ", blank), b'"traceEvents": [', ONE_EVENT, b"]}"]
    return gzip_stream(path, parts)


def huge_header_value(folder: Path, size: int, after: bool = False) -> Path:
    """A top-level key (before or after the events) holding a ``size``-byte string."""
    path = folder / f"header-{size}-{after}.json.gz"
    value = [b'"big": "', (b"x", size), b'"']
    if after:
        parts = [b'{"traceEvents": [', ONE_EVENT, b"], ", *value, b"}"]
    else:
        parts = [b"{", *value, b', "traceEvents": [', ONE_EVENT, b"]}"]
    return gzip_stream(path, parts)


def nested_args(folder: Path, depth: int, events: int = 100) -> Path:
    """``events`` events, one of whose args nest ``depth`` levels deep."""
    evs = [_event("op", i * 10.0, 1, 2.0) for i in range(events)]
    deep = "[" * depth + "1" + "]" * depth
    text = json.dumps({"traceEvents": evs})
    bad = json.dumps(_event("deep", 5.0, 1, 1.0))[:-1] + ', "args": {"x": ' + deep + "}}"
    path = folder / f"nested-{depth}.json"
    path.write_text(text.replace('"traceEvents": [', '"traceEvents": [' + bad + ", ", 1))
    return path


def recursive_view_sqlite(folder: Path) -> Path:
    """An 8 KB SQLite whose kernel "table" is an endless recursive VIEW."""
    import sqlite3

    path = folder / "recursive-view.sqlite"
    con = sqlite3.connect(path)
    con.executescript(f"""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'kernel');
        CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS {ENDLESS_QUERY};
    """)
    con.commit()
    con.close()
    return path


ENDLESS_QUERY = (
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
    "SELECT x AS start, x + 1 AS end, 0 AS deviceId, 0 AS contextId, 7 AS streamId, "
    "x AS correlationId, 0 AS globalPid, 1 AS demangledName, 1 AS shortName FROM r")


def hostile_names(folder: Path) -> Path:
    """Names with ESC/CSI/CR, bidi overrides and Markdown table syntax."""
    name = "evil\r# heading\x1b[31m\u009b2J\u202egnp.exe \\| cell"
    evs = [_event(name if i % 3 == 0 else "aten::mm", i * 10.0, 1, 5.0) for i in range(60)]
    path = folder / "hostile-names.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


def huge_name(folder: Path, size: int, events: int = 40) -> Path:
    """Every third event named by one ``size``-character string (the others ``aten::mm``);
    a 20 MB name took 8 s to analyze, 200 MB over 115 s, and froze the app."""
    name = ("ncclKernel_AllReduce " + "ab" * size)[:size]
    evs = [_event(name if i % 3 == 0 else "aten::mm", i * 10.0, 1, 5.0) for i in range(events)]
    path = folder / f"huge-name-{size}.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


SOFA_HEADER = ("timestamp,event,duration,deviceId,copyKind,payload,bandwidth,pkt_src,pkt_dst,"
               "pid,tid,name,category\n")


def _sofa_logdir(folder: Path, tag: str, odd_name: str, rows: int) -> Path:
    """A SOFA logdir whose ``gputrace.csv`` has ``odd_name`` in its middle row."""
    d = folder / f"sofa-{tag}"
    d.mkdir()
    (d / "sofa_time.txt").write_text("1700000000.0\n")
    with open(d / "gputrace.csv", "w") as f:
        f.write(SOFA_HEADER)
        for i in range(rows):
            name = odd_name if i == rows // 2 else f"kernel_{i % 7}"
            f.write(f"{i * 1e-5:.6f},0,0.000008,1,0,0,0,-1,-1,1,7,{name},0\n")
    return d


def sofa_long_cell(folder: Path, cell: int, rows: int = 200) -> Path:
    """One ``cell``-byte name among ``rows`` rows: past two 4 MiB read blocks the
    whole file was lost ("(0 skipped)")."""
    return _sofa_logdir(folder, f"long-cell-{cell}", "x" * cell, rows)


def sofa_quoted_breaks(folder: Path, breaks: int, rows: int = 1200) -> Path:
    """A quoted name holding ``breaks`` line breaks: across a 4 MiB read block the
    real rows after it were lost."""
    return _sofa_logdir(folder, f"quoted-breaks-{breaks}", '"' + "x\n" * breaks + '"', rows)


def symlink_loop(folder: Path) -> Path:
    (folder / "loop-a").symlink_to(folder / "loop-b")
    (folder / "loop-b").symlink_to(folder / "loop-a")
    return folder / "loop-a"


def _pb(num: int, value) -> bytes:
    """One protobuf field: an int as a varint, bytes/str length-delimited."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def xplane_shared_stats(folder: Path, size: int, events: int, how: str = "metadata") -> Path:
    """One XSpace whose events all carry a ``size``-byte string: as a stat of their event
    *metadata* (``how="metadata"``) or as an interned string each event's own stat refers to
    (``how="ref"``). Copied into each event's args, a 1 MB file took 1.3 GB for 300 events."""
    big = "x" * size
    if how == "metadata":
        meta_stats = _pb(5, _pb(1, 2) + _pb(5, big))
        event_stats, names = b"", [(2, "big")]
    else:
        meta_stats, event_stats = b"", _pb(4, _pb(1, 2) + _pb(7, 3))
        names = [(2, "big"), (3, big)]
    line = _pb(1, 1) + _pb(2, "thread") + _pb(3, 1000) + b"".join(
        _pb(4, _pb(1, 1) + _pb(2, k * 2_000_000) + _pb(3, 1_000_000) + event_stats)
        for k in range(events))
    plane = _pb(1, 1) + _pb(2, "/host:CPU") + _pb(3, line)
    plane += _pb(4, _pb(1, 1) + _pb(2, _pb(1, 1) + _pb(2, "op") + meta_stats))
    for sid, text in names:
        plane += _pb(5, _pb(1, sid) + _pb(2, _pb(1, sid) + _pb(2, text)))
    path = folder / f"shared-{how}-{size}-{events}.xplane.pb"
    path.write_bytes(_pb(1, plane))
    return path




# -- recordings, SQLite, values: hostile inputs past the importer families above ---------
RECORDING = Path(__file__).resolve().parents[1] / "data" / "recording-torch-pyspy"


def _recording(folder: Path, tag: str) -> Path:
    """A copy of the small real recording (manifest, counters, processes) without its
    Kineto and py-spy files, to plant one hostile part in."""
    import shutil

    d = folder / f"recording-{tag}"
    shutil.copytree(RECORDING, d, ignore=shutil.ignore_patterns("torch", "pyspy"))
    return d


def recording_many_processes(folder: Path, processes: int, samples: int = 2) -> Path:
    """A recording whose processes.parquet holds ``processes`` processes (47 s for 80k:
    each process scanned every row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = _recording(folder, f"processes-{processes}")
    n = processes * samples
    pid = np.repeat(np.arange(1000, 1000 + processes, dtype=np.int64), samples)
    t = np.tile(np.arange(samples, dtype=np.int64), processes) * 100_000_000 + 1_795_947_168 * \
        10 ** 9
    cols = {"time_ns": t, "since_ns": t - 100_000_000, "pid": pid, "ppid": pid - 1,
            "name": pa.array(["worker"] * n).dictionary_encode(),
            "cpu_percent": np.full(n, 12.5), "rss_bytes": np.full(n, 1 << 20, np.int64),
            "threads": np.full(n, 2, np.int32), "ctx_switches_per_s": np.full(n, 10.0)}
    pq.write_table(pa.table(cols), d / "processes.parquet")
    return d


def recording_rle_counters(folder: Path, rows: int) -> Path:
    """A recording whose counters.parquet is ``rows`` identical rows: run-length encoded
    into a few hundred KB (10M rows took 1.55 GB to read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = _recording(folder, f"rle-{rows}")
    schema = pq.read_schema(RECORDING / "counters.parquet")
    with pq.ParquetWriter(d / "counters.parquet", schema, compression="zstd") as w:
        block = min(rows, 1 << 20)
        one = pa.table({"time_ns": np.full(block, 1_795_947_168 * 10 ** 9, np.int64),
                        "lane": pa.array(["CPU"] * block).dictionary_encode(),
                        "series": pa.array(["cpu %"] * block).dictionary_encode(),
                        "unit": pa.array(["%"] * block).dictionary_encode(),
                        "device": np.full(block, -1, np.int16), "value": np.ones(block)},
                       schema=schema)
        for start in range(0, rows, block):
            w.write_table(one.slice(0, min(block, rows - start)))
    return d


def recording_symlinks(folder: Path) -> Path:
    """A recording whose Kineto trace and py-spy file are links to a file outside it
    (its first bytes were quoted in a load note)."""
    d = _recording(folder, "symlinks")
    secret = folder / "outside-secret.txt"
    secret.write_text("root:x:0:0:SECRET-OUTSIDE-THE-FOLDER:/root:/bin/bash\n")
    (d / "torch").mkdir()
    (d / "torch" / "kineto-1.json").symlink_to(secret)
    (d / "pyspy").mkdir()
    (d / "pyspy" / "pyspy.json").symlink_to(secret)
    return d


def period_stream(folder: Path, events: int, period: int) -> Path:
    """``events`` CPU ops cycling through ``period`` names: a period-3 stream took 15-30 s
    against 0.7 s for period 600 (a median per candidate warm-up length)."""
    evs = [_event(f"op{i % period}", i * 7.0, 1, 5.0 + (i * 7919 % 97) / 100)
           for i in range(events)]
    path = folder / f"period-{period}-{events}.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


KERNEL_COLUMNS = ("end INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER, "
                  "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, "
                  "shortName INTEGER")


def generated_column_sqlite(folder: Path, rows: int = 200, cost: int = 1 << 20,
                            how: str = "virtual") -> Path:
    """A small SQLite whose kernel table computes ``start`` on every read from a costly
    generated column (``how="virtual"``), or a plain table with a trigger
    (``how="trigger"``): 12 KB took 3.5 GB, 128 KB hung past 150 s."""
    import sqlite3

    path = folder / f"generated-{how}-{rows}.sqlite"
    con = sqlite3.connect(path)
    start = (f"start INTEGER AS (length(hex(zeroblob({cost}))) + id) VIRTUAL"
             if how == "virtual" else "start INTEGER")
    con.executescript(f"""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'kernel');
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (id INTEGER PRIMARY KEY, {start},
                                                 {KERNEL_COLUMNS});
    """)
    cols = "end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, " \
           "shortName"
    if how != "virtual":
        cols = "start, " + cols
    con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({cols}) VALUES "
                    f"({', '.join('?' * len(cols.split(',')))})",
                    [((i * 10,) if how != "virtual" else ()) + (i * 10 + 5, 0, 0, 7, i, 0, 1, 1)
                     for i in range(rows)])
    if how == "trigger":
        con.execute("CREATE TRIGGER t AFTER INSERT ON CUPTI_ACTIVITY_KIND_KERNEL BEGIN "
                    "DELETE FROM StringIds; END")
    con.commit()
    con.close()
    return path


def value_attacks(folder: Path, kind: str) -> Path:
    """One small Chrome trace with one hostile value: a ``[memory]`` Device Id of 2**40
    (the file was lost), a lone ``\\ud83d`` escape after the events ("truncated JSON"),
    metadata of the wrong type (a traceback), or names with line breaks (forged lines)."""
    evs = [_event("aten::mm", i * 10.0, 1, 5.0) for i in range(60)]
    head = ""
    if kind == "memory":
        evs.append({"ph": "i", "s": "t", "name": "[memory]", "ts": 3.0, "pid": 1, "tid": 1,
                    "args": {"Device Id": 2 ** 40, "Device Type": 1, "Bytes": 64,
                             "Total Allocated": 64, "Total Reserved": 128}})
    elif kind == "metadata":
        head = '"cpu_cores": "many", "cpu_busy_other_cores": 1e999, "cpu_core_interference": ' \
               '"nan", '
    elif kind == "names":
        evs += [_event("op\nerror: forged line\r", 700.0 + i, 1, 0.5) for i in range(3)]
        evs.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
                    "args": {"name": "main\nerror: forged"}})
    text = "{" + head + '"traceEvents": ' + json.dumps(evs)
    text += ', "traceName": "\\ud83d"}' if kind == "surrogate" else "}"
    path = folder / f"value-{kind}.json"
    path.write_text(text)
    return path


#: (family, generator, args at full size, args at test size, env) for fuzz.py --attacks
FAMILIES = [
    ("gzip: 1 event + blank space after the document", trailing_blank_gzip,
     (1 << 30, "after"), (8 << 20, "after"), {}),
    ("gzip: blank space between header keys", trailing_blank_gzip,
     (1 << 30, "before"), (8 << 20, "before"), {}),
    ("gzip: blank space inside the events array", trailing_blank_gzip,
     (200 << 20, "array"), (8 << 20, "array"), {}),
    ("gzip: huge header value", huge_header_value, (1 << 30,), (40 << 20,), {}),
    ("gzip: decompresses past the limit (limit 256 MiB)", trailing_blank_gzip,
     (1 << 30, "after"), (8 << 20, "after"),
     {"SOFA_GUI_MAX_DECOMPRESSED_BYTES": str(256 << 20)}),
    ("args nested 990 deep", nested_args, (990,), (990,), {}),
    ("args nested 100,000 deep", nested_args, (100_000,), (5_000,), {}),
    ("xplane: 1 MB metadata stat, 3,000 events", xplane_shared_stats,
     (1 << 20, 3000), (1 << 20, 300), {}),
    ("xplane: 1 MB interned string, 3,000 events refer to it", xplane_shared_stats,
     (1 << 20, 3000, "ref"), (1 << 20, 300, "ref"), {}),
    ("100,000 threads", many_threads, (100_000, 1), (2_000, 1), {}),
    ("SQLite: kernel table is a recursive VIEW", recursive_view_sqlite, (), (), {}),
    ("names with ESC/CSI/CR/bidi/Markdown", hostile_names, (), (), {}),
    ("one 200 MB slice name", huge_name, (200 << 20, 2), (4 << 20, 4), {}),
    ("SOFA CSV: one 9 MiB cell", sofa_long_cell, (9 << 20,), (9 << 20,), {}),
    ("SOFA CSV: quoted cell of 2.5M line breaks (5 MB)", sofa_quoted_breaks,
     (2_500_000,), (2_500_000,), {}),
    ("symlink loop as the path", symlink_loop, (), (), {}),
    ("period-3 stream, 200k events", period_stream, (200_000, 3), (30_000, 3), {}),
    ("period-600 stream, 200k events", period_stream, (200_000, 600), (30_000, 600), {}),
    ("recording: 80,000 processes", recording_many_processes, (80_000,), (3_000,), {}),
    ("recording: 10M run-length rows in counters.parquet", recording_rle_counters,
     (10_000_000,), (2_000_000,), {}),
    ("recording: files linking out of the folder", recording_symlinks, (), (), {}),
    ("SQLite: costly VIRTUAL generated column", generated_column_sqlite,
     (4000, 1 << 30), (200, 64 << 20), {}),
    ("SQLite: trigger on a kernel table", generated_column_sqlite,
     (200, 1, "trigger"), (200, 1, "trigger"), {}),
    ("[memory] Device Id 2**40", value_attacks, ("memory",), ("memory",), {}),
    ("lone \\ud83d escape after the events", value_attacks, ("surrogate",), ("surrogate",),
     {}),
    ("metadata of the wrong type", value_attacks, ("metadata",), ("metadata",), {}),
    ("line breaks in names", value_attacks, ("names",), ("names",), {}),
]
