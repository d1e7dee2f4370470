"""Columnar cache: the first open writes the trace's tables, later opens memory-map them.

Entries live under the user cache dir (``$SOFA_GUI_CACHE_DIR`` or
``$XDG_CACHE_HOME/sofa_gui``), never beside the source, keyed by the source's
absolute path, size and mtime (for a folder: every file in it). Each entry is
a folder written under a temporary name and renamed into place, so a crash
never leaves a half-written entry. Bump :data:`FORMAT_VERSION` to invalidate.

The cache is the user's alone (:mod:`.cache_dir`): a root or entry that someone else
owns or may write is never read. Each entry records its source
(:mod:`.source_record`: inode, ctime, a hash of both ends...) taken before the source
was read, and is only served while the source still matches it.

Tables are uncompressed Arrow IPC files (the Feather v2 layout): opening one is
a memory map with no decoding, so a cached reopen costs milliseconds however
big the trace, and columns (args above all) are paged in only when read.
Parquet would have to decode every page into memory first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import arrowbuf, cache_dir
from .source_record import record_matches, source_record
from .trace import (
    ArgsStore,
    Counters,
    CounterSeries,
    Flows,
    Lanes,
    Slices,
    Trace,
    TraceMeta,
)

log = logging.getLogger(__name__)

FORMAT_VERSION = 7  # 7: XPlane traces note their XLA programs (meta.extra xla_programs)
#: Files whose bytes are checksummed (CRC-32 in the manifest) and checked on every open:
#: a flipped byte in a cached entry must not give wrong results or crash later opens.
#: One CRC per :data:`CRC_BLOCK` bytes, so the blocks are checked on every core at once
#: (zlib releases the GIL): checking a 1e7-event entry is not one long pass.
#: ``args.arrow`` (often the largest, paged in only when an event's args are shown) is
#: checked for structure instead: its offsets, so no read can go out of bounds.
_CHECKSUMMED = ("slices.arrow", "lanes.arrow", "names.arrow", "counters.arrow",
                "series.arrow", "flows.arrow")
_SLICE_COLS = ["start", "dur", "lane", "name", "kind", "depth", "device", "stream",
               "bytes", "copy_kind", "correlation", "args"]
_LANE_NUM = ["kind", "rank", "pid", "tid", "device", "stream", "sort_key", "depth"]


def cache_root() -> Path:
    env = os.environ.get("SOFA_GUI_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sofa_gui"


def _fingerprint(path: Path) -> str:
    path = path.resolve()
    # surrogateescape: file names need not be UTF-8 (os.fsencode's rule on POSIX).
    h = hashlib.sha256(f"v{FORMAT_VERSION}|{path}".encode("utf-8", "surrogateescape"))
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        st = f.stat()
        h.update(f"|{f.relative_to(path.parent)}|{st.st_size}|{st.st_mtime_ns}".encode(
            "utf-8", "surrogateescape"))
    return h.hexdigest()[:32]


def entry_dir(path: Path) -> Path:
    return cache_root() / _fingerprint(path)


#: The source record of each entry this process looked up (:func:`try_entry_dir`),
#: taken before the source was read: what :func:`save_cached` writes into the entry.
_records: dict[str, dict] = {}


def try_entry_dir(path: Path) -> Path | None:
    """:func:`entry_dir`, or None when the source cannot be fingerprinted or the cache
    root cannot be used (:func:`cache_dir.usable`). Takes the source's record."""
    if not cache_dir.usable(cache_root()):
        return None
    try:
        d = entry_dir(path)
        _records[str(d)] = source_record(path)
        return d
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Path.resolve)
        return None


def is_cached(path: Path) -> bool:
    """Whether a fresh entry for ``path`` exists (without reading its tables)."""
    d = try_entry_dir(path)
    return d is not None and _fresh(path, d)


def _fresh(path: Path, d: Path) -> bool:
    """Whether entry ``d`` is the user's alone and was made from ``path`` as it is now;
    an entry that is not is dropped (a foreign one with a warning)."""
    try:
        if not os.path.lexists(d / "manifest.json"):
            return False
        problem = cache_dir.entry_problem(d)
        if problem is None:
            stored = json.loads((d / "manifest.json").read_text()).get("source")
            known = _records.get(str(d))
            if stored is not None and (stored == known or record_matches(stored, path)):
                return True
            log.info("dropping the cache entry of %s: the source changed", path)
        else:
            log.warning("dropping the cache entry %s: %s", d.name, problem)
    except (OSError, ValueError, AttributeError, RecursionError) as exc:  # dropped below
        log.info("dropping unreadable cache entry %s: %s", d, exc)
    shutil.rmtree(d, ignore_errors=True)
    return False


def load_cached(path: Path, entry: Path | None = None) -> Trace | None:
    """The cached trace for ``path`` if fresh and readable, else None.

    ``entry`` is the source's :func:`entry_dir` when the caller already has it.
    """
    d = entry or try_entry_dir(path)
    if d is None or not _fresh(path, d):
        return None
    try:
        return read_trace(d)
    except Exception as exc:  # a damaged cache entry is dropped, never fatal
        _warn(f"dropping unreadable cache entry {d}", exc)
        shutil.rmtree(d, ignore_errors=True)
        return None


def save_cached(path: Path, trace: Trace, entry: Path | None = None) -> Path | None:
    """Write ``trace`` into the cache; failures are logged, never raised.

    Pass the ``entry`` taken *before* reading the source, so a source that
    changes during the load is not cached under its new size and mtime.
    """
    if not cache_dir.usable(cache_root()):
        return None
    try:
        d = entry or entry_dir(path)
        record = _records.get(str(d)) or source_record(path)
        _sweep_stale_tmp(d.parent)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=d.parent))
        try:
            write_trace(tmp, trace, source=record)
            cache_dir.make_private(tmp)
            if d.exists():
                shutil.rmtree(d, ignore_errors=True)
            try:
                os.replace(tmp, d)
            except OSError:
                if _fresh(path, d):
                    return d  # another process opening the same trace wrote it first
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return d
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:  # disk full, odd text
        _warn(f"could not write cache for {path}", exc)
        return None


def _warn(what: str, exc: BaseException) -> None:
    """One warning line (the traceback only at debug level): this is no bug of ours."""
    from .errors import one_line

    why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    log.warning("%s: %s", what, one_line(why, 200))
    log.debug("%s", what, exc_info=exc)


def write_handoff(trace: Trace) -> Path | None:
    """Write ``trace`` to a private temp folder (for a reader in another process), or None."""
    try:
        d = Path(tempfile.mkdtemp(prefix="sofa-gui-handoff-"))
    except OSError as exc:
        _warn("could not write the trace for the app", exc)
        return None
    try:
        write_trace(d, trace)
        return d
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
        shutil.rmtree(d, ignore_errors=True)
        _warn("could not write the trace for the app", exc)
        return None


def read_handoff(d: Path) -> Trace:
    """Map a :func:`write_handoff` folder and remove it (the open maps keep the data)."""
    try:
        return read_trace(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


#: A temporary entry older than this was left by a writer that died (killed loader child).
STALE_TMP_SECONDS = 3600


def _sweep_stale_tmp(root: Path) -> None:
    """Remove half-written entries that a killed writer left behind (never fresh ones)."""
    now = time.time()
    for p in root.glob(".tmp-*"):
        try:
            if now - p.stat().st_mtime > STALE_TMP_SECONDS:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def _write(path: Path, columns: dict) -> None:
    table = arrowbuf.table(columns)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _map(path: Path) -> pa.Buffer:
    """The file's bytes, memory-mapped (zlib releases the GIL, so the GUI keeps running)."""
    with pa.memory_map(str(path), "r") as f:
        return f.read_buffer()  # keeps the map alive after the file closes


def _read(buf: pa.Buffer) -> pa.Table:
    """A zero-copy table over a mapped file (:func:`_map`)."""
    return pa.ipc.open_file(buf).read_all()


def write_trace(d: Path, trace: Trace, source: dict | None = None) -> None:
    """Write ``trace``'s tables and manifest into folder ``d`` (``source``: the record
    of what it was read from, for a cache entry)."""
    s = trace.slices
    _write(d / "slices.arrow", {c: getattr(s, c) for c in _SLICE_COLS})
    lanes = {c: getattr(trace.lanes, c) for c in _LANE_NUM}
    lanes.update(name=arrowbuf.strings(trace.lanes.name),
                 group=arrowbuf.strings(trace.lanes.group))
    _write(d / "lanes.arrow", lanes)
    _write(d / "names.arrow", {"name": arrowbuf.strings(trace.names, large=True)})
    c = trace.counters
    _write(d / "counters.arrow", {"series": c.series, "time": c.time, "value": c.value})
    _write(d / "series.arrow", {"name": arrowbuf.strings(c.table.name),
                                "unit": arrowbuf.strings(c.table.unit),
                                "lane": c.table.lane})
    f = trace.flows
    _write(d / "flows.arrow", {"src": f.src, "dst": f.dst, "kind": f.kind})
    args = trace.args.backing
    if hasattr(args, "to_arrow"):  # rows read on demand from the source file: read them all
        args = args.to_arrow()
    if not isinstance(args, (pa.Array, pa.ChunkedArray)):
        args = pa.array(list(args), pa.large_binary())
    _write(d / "args.arrow", {"args": args})
    manifest = {"format_version": FORMAT_VERSION, "meta": trace.meta.to_dict(),
                "checksums": _checksums({f: _map(d / f) for f in _CHECKSUMMED})}
    if source is not None:
        manifest["source"] = source
    (d / "manifest.json").write_text(json.dumps(manifest))


def _np(table: pa.Table, col: str, dtype=None) -> np.ndarray:
    out = arrowbuf.to_numpy(table.column(col))
    return out if dtype is None else out.astype(dtype, copy=False)


CRC_BLOCK = 16 << 20


def _checksums(maps: dict[str, pa.Buffer]) -> dict[str, list[int]]:
    """CRC-32 of every :data:`CRC_BLOCK` of each mapped file, computed in threads."""
    views = {name: memoryview(buf) for name, buf in maps.items()}
    jobs = [(name, k) for name, v in views.items() for k in range(0, len(v), CRC_BLOCK)]
    workers = min(len(jobs), os.cpu_count() or 1) or 1
    with ThreadPoolExecutor(workers) as pool:
        crcs = list(pool.map(lambda job: zlib.crc32(
            views[job[0]][job[1]:job[1] + CRC_BLOCK]), jobs))
    out: dict[str, list[int]] = {name: [] for name in maps}
    for (name, _), crc in zip(jobs, crcs):
        out[name].append(crc)
    return out


def verify_checksums(manifest: dict, maps: dict[str, pa.Buffer]) -> None:
    """Raise ValueError unless every checksummed file has the bytes that were written
    (``maps``: the files mapped once, checked here and then read as tables)."""
    sums = manifest.get("checksums")
    if not isinstance(sums, dict) or set(sums) != set(_CHECKSUMMED):
        raise ValueError("cache entry has no checksums")
    got = _checksums(maps)
    for name in _CHECKSUMMED:
        if got[name] != sums[name]:
            raise ValueError(f"{name} is corrupt (checksum mismatch)")


def read_trace(d: Path) -> Trace:
    """The trace in cache entry ``d``; ValueError (or an Arrow error) if it is damaged."""
    manifest = json.loads((d / "manifest.json").read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError("old cache format")
    maps = {name: _map(d / name) for name in _CHECKSUMMED}
    verify_checksums(manifest, maps)
    t = _read(maps["slices.arrow"])
    slices = Slices(**{c: _np(t, c) for c in _SLICE_COLS})
    lt = _read(maps["lanes.arrow"])
    lanes = Lanes(name=lt.column("name").to_pylist(), group=lt.column("group").to_pylist(),
                  **{c: _np(lt, c) for c in _LANE_NUM})
    names = _read(maps["names.arrow"]).column("name").to_pylist()
    ct = _read(maps["counters.arrow"])
    st = _read(maps["series.arrow"])
    counters = Counters(
        _np(ct, "series", np.int32), _np(ct, "time", np.int64), _np(ct, "value", np.float64),
        CounterSeries(st.column("name").to_pylist(), st.column("unit").to_pylist(),
                      _np(st, "lane", np.int32)),
    )
    ft = _read(maps["flows.arrow"])
    flows = Flows(_np(ft, "src", np.int64), _np(ft, "dst", np.int64), _np(ft, "kind", np.int8))
    args = _read(_map(d / "args.arrow")).column("args")
    args.validate(full=True)  # offsets in order and inside the data: no read out of bounds
    if args.num_chunks == 1:
        args = args.chunk(0)
    if len(slices) and int(slices.args.max()) >= len(args):
        raise ValueError("args.arrow does not match slices.arrow")
    return Trace(slices, lanes, names, counters, flows, ArgsStore(args),
                 TraceMeta.from_dict(manifest["meta"]))
