"""Builds small Nsight Systems SQLite exports with the documented schema (nsys 2024.6,
export schema 3.16.1; ``../shared/reference/peer-tools-and-formats.md`` section 3.4).

No public ``.sqlite`` export exists to copy, so tests write one: a training-like
process with a main and a backward thread, kernels, copies, a memset, syncs and
NVTX ranges. ``enums=False`` / ``old=True`` drop the ENUM tables / newer columns.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
    busLocation TEXT, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
    smCount INTEGER, uuid TEXT, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
    sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER,
    srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER,
    dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER,
    virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
    int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
    floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
"""

ENUMS = """
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES
    (0,'CUDA_MEMCPY_KIND_UNKNOWN','Unknown'), (1,'CUDA_MEMCPY_KIND_HTOD','Host-to-Device'),
    (2,'CUDA_MEMCPY_KIND_DTOH','Device-to-Host'), (8,'CUDA_MEMCPY_KIND_DTOD','Device-to-Device'),
    (10,'CUDA_MEMCPY_KIND_PTOP','Peer-to-Peer');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES
    (0,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable'),
    (1,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned'),
    (2,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device'), (7,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown');
INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES
    (0,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN','Unknown'),
    (1,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE','Event sync'),
    (2,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT','Stream wait sync'),
    (3,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE','Stream sync'),
    (4,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE','Context sync');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (34,'NvtxMark','NvtxMark'),
    (59,'NvtxPushPopRange','NvtxPushPopRange'), (60,'NvtxStartEndRange','NvtxStartEndRange'),
    (75,'NvtxDomainCreate','NvtxDomainCreate');
"""

EPOCH_NS = 1_700_000_000_123_456_789
PID, MAIN, BWD = 1234, 1234, 1240


def gtid(pid: int, tid: int) -> int:
    """Serialized globalTid as nsys writes it (high bits hold a hardware / VM id)."""
    return (7 << 56) | (pid << 24) | tid


def gpid(pid: int) -> int:
    return (7 << 56) | (pid << 24)


STRINGS = {1: "cudaLaunchKernel_v7000", 2: "cudaMemcpyAsync_v3020", 3: "cudaMemsetAsync_v3020",
           4: "cudaStreamSynchronize_v3020", 5: "void gemm_kernel<float, 128>(float*, int)",
           6: "gemm_kernel", 7: "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)",
           8: "ncclKernel_AllReduce", 9: "elementwise_kernel", 10: "python3", 11: "pt_autograd_0",
           12: "ProfilerStep#1"}

# (start, end, tid, corr, nameId)
RUNTIME = [(100, 150, MAIN, 10, 1), (200, 230, MAIN, 11, 1), (300, 330, MAIN, 12, 1),
           (400, 480, MAIN, 13, 2), (500, 520, MAIN, 14, 3), (600, 900, MAIN, 15, 4),
           (700, 720, BWD, 16, 1)]
# (start, end, device, stream, corr, demangled, short, grid, block, regs, static, dynamic)
KERNELS = [(160, 260, 0, 7, 10, 5, 6, (64, 2, 1), (128, 1, 1), 32, 0, 1024),
           (270, 420, 0, 7, 11, 7, 8, (8, 1, 1), (640, 1, 1), 96, 4096, 0),
           (430, 800, 0, 7, 12, 9, 9, (1024, 1, 1), (256, 1, 1), 16, 0, 0),
           (730, 760, 1, 14, 16, 5, 6, (32, 1, 1), (128, 1, 1), 32, 0, 1024)]
# (start, end, device, stream, corr, bytes, copyKind, srcKind, dstKind, srcDev, dstDev)
MEMCPY = [(410, 470, 0, 8, 13, 4096, 1, 0, 2, -1, 0),
          (810, 840, 0, 8, None, 1 << 20, 2, 2, 1, 0, -1),
          (850, 860, 0, 8, None, 2048, 10, 2, 2, 0, 1)]
# (start, end, device, stream, corr, bytes, memKind)
MEMSET = [(505, 515, 0, 7, 14, 512, 2)]
# (start, end, device, stream, corr, syncType)
SYNC = [(610, 890, 0, 7, 15, 3), (950, 960, 0, 7, 99, 4)]
# (start, end, eventType, text, tid, textId)
NVTX = [(90, 880, 60, None, MAIN, 12), (95, 470, 59, "forward", MAIN, None),
        (500, 500, 34, "checkpoint", MAIN, None), (700, None, 60, "never ends", BWD, None),
        (10, 10, 75, "my domain", MAIN, None)]


def make_nsys_db(path: Path, *, enums: bool = True, old: bool = False, second_pid: int = 0,
                 kernels=None) -> Path:
    """Write the export; ``second_pid`` adds a process with clashing correlation ids."""
    con = sqlite3.connect(path)
    schema = SCHEMA
    if old:  # an older export: no shortName/greenContextId in KERNEL, no text in NVTX
        schema = (schema.replace("greenContextId INTEGER,", "")
                  .replace("shortName INTEGER NOT NULL,", "")
                  .replace("floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT",
                           "floatValue REAL")
                  .replace(" text TEXT,", ""))
    con.executescript(schema + (ENUMS if enums else ""))
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", STRINGS.items())
    con.executemany("INSERT INTO ThreadNames VALUES (?, 0, ?)",
                    [(10, gtid(PID, MAIN)), (11, gtid(PID, BWD))])
    con.execute("INSERT INTO PROCESSES VALUES (?, ?, 'python')", (gpid(PID), PID))
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (EPOCH_NS,))
    con.executemany("INSERT INTO TARGET_INFO_GPU (vmId, id, name, totalMemory, smCount, "
                    "computeMajor, computeMinor) VALUES (0, ?, ?, ?, 132, 9, 0)",
                    [(0, "NVIDIA H100 80GB HBM3", 85899345920),
                     (1, "NVIDIA H100 80GB HBM3", 85899345920)])
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
                    [("EXPORT_PRODUCT_VERSION", "2024.6.2.225"), ("EXPORT_SCHEMA_VERSION",
                                                                  "3.16.1")])
    pids = [PID] + ([second_pid] if second_pid else [])
    for p in pids:
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
            [(s, e, gtid(p, tid if p == PID else p), c, n) for s, e, tid, c, n in RUNTIME])
        _kernels(con, p, old, KERNELS if kernels is None else kernels)
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId,"
            " correlationId, globalPid, bytes, copyKind, srcKind, dstKind, srcDeviceId,"
            " dstDeviceId) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(s, e, d, st, c, gpid(p), b, ck, sk, dk, sd, dd)
             for s, e, d, st, c, b, ck, sk, dk, sd, dd in MEMCPY])
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId,"
            " correlationId, globalPid, value, bytes, memKind) VALUES (?, ?, ?, 1, ?, ?, ?, 0, ?,"
            " ?)", [(s, e, d, st, c, gpid(p), b, mk) for s, e, d, st, c, b, mk in MEMSET])
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId,"
            " streamId, correlationId, globalPid, syncType, eventId) VALUES (?, ?, ?, 1, ?, ?, ?,"
            " ?, 0)", [(s, e, d, st, c, gpid(p), t) for s, e, d, st, c, t in SYNC])
    if old:  # no text column: every name is a registered string
        extra = {100 + k: x for k, (_, _, _, x, _, _) in enumerate(NVTX) if x}
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", extra.items())
        con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId) "
                        "VALUES (?, ?, ?, ?, ?)",
                        [(s, e, t, gtid(PID, tid), i if i else 100 + k)
                         for k, (s, e, t, _, tid, i) in enumerate(NVTX)])
    else:
        con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        [(s, e, t, x, gtid(PID, tid), i) for s, e, t, x, tid, i in NVTX])
    con.commit()
    con.close()
    return path


def _kernels(con, p: int, old: bool, rows) -> None:
    cols = ("start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, "
            + ("" if old else "shortName, ")
            + "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
              "staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, "
              "gridId")
    n = cols.count(",") + 1
    values = []
    for s, e, d, st, c, dn, sn, grid, block, regs, smem, dmem in rows:
        short = () if old else (sn,)
        values.append((s, e, d, 1, st, c, gpid(p), dn, *short, regs, *grid, *block, smem, dmem,
                       0, 0, 1))
    con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({cols}) VALUES "
                    f"({', '.join('?' * n)})", values)
