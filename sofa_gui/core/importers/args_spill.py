"""Raw per-event args written to an anonymous temp file and memory-mapped back.

A Kineto trace's args (shapes, call stacks, kernel launch parameters) are often
larger than everything else in it together. Keeping them on the heap would cost
hundreds of bytes per event; instead each decoded chunk's args are appended to
a temp file as they come, and :meth:`ArgsSpill.array` returns one zero-copy
Arrow ``large_binary`` array over a read-only mapping of it. Pages are then read
only when an event's args are shown (or the cache is written), and the kernel can
drop them again under memory pressure.

If the temp file cannot be created or written (full, read-only or unwritable
disk), the values are kept in memory instead and one warning line is logged:
a full cache disk must never make a readable trace unreadable.
"""

from __future__ import annotations

import logging
import mmap
import tempfile

import numpy as np
import pyarrow as pa

from .. import store

log = logging.getLogger(__name__)


def spill_dir() -> str | None:
    """The cache dir (on disk, unlike a tmpfs /tmp), or the default temp dir."""
    try:
        d = store.cache_root()
        d.mkdir(mode=0o700, parents=True, exist_ok=True)  # the cache root is private
        return str(d)
    except OSError:
        return None


def _temp_file():
    """An anonymous temp file in the cache dir, else in the default temp dir."""
    try:
        return tempfile.TemporaryFile(prefix="sofa-args-", dir=spill_dir())
    except OSError:
        return tempfile.TemporaryFile(prefix="sofa-args-")


class ArgsSpill:
    """Append-only store of JSON ``bytes`` values, one per event.

    ``path``: spill into this (named) file instead of an anonymous one, so another
    process can map it (a decode worker, see :meth:`export` and :func:`part_array`).
    """

    def __init__(self, path: str | None = None):
        self._path = path
        self._file = None
        self._memory: list[bytes] | None = None  # set when the disk refused the spill
        self._lengths: list[np.ndarray] = []
        self._n = 0
        self._size = 0

    def __len__(self) -> int:
        return self._n

    def append(self, raws: list) -> int:
        """Append values (bytes-like; empty = no args); returns the index of the first."""
        first = self._n
        if not raws:
            return first
        blob = b"".join(raws)
        lengths = np.fromiter(map(len, raws), np.int64, len(raws))
        if blob:
            self._store(blob)
        self._lengths.append(lengths)
        self._n += len(raws)
        self._size += len(blob)
        return first

    def _store(self, blob: bytes) -> None:
        if self._memory is not None:
            self._memory.append(blob)
            return
        try:
            if self._file is None:
                self._file = open(self._path, "w+b") if self._path else _temp_file()
            self._file.write(blob)
            self._file.flush()  # so a full disk shows here, not in array()
        except OSError as exc:
            self._to_memory(exc)
            self._memory.append(blob)

    def _to_memory(self, exc: OSError) -> None:
        """Keep what the file holds (up to the last whole write) and carry on in memory."""
        log.warning("args spill file not writable (%s); keeping trace args in memory",
                    exc.strerror or exc)
        self._memory = []
        if self._file is not None:
            try:
                self._file.seek(0)
                self._memory.append(self._file.read(self._size))
            finally:
                self._file.close()
                self._file = None

    def _offsets(self) -> np.ndarray:
        offsets = np.zeros(self._n + 1, np.int64)
        if self._lengths:
            np.cumsum(np.concatenate(self._lengths), out=offsets[1:])
        self._lengths = []
        return offsets

    def array(self) -> pa.LargeBinaryArray:
        """All values as one Arrow array over the mapped file (call once, at the end)."""
        offsets = self._offsets()
        if self._memory is not None:
            data = pa.py_buffer(b"".join(self._memory))
            self._memory = None
        elif self._file is None or self._size == 0:
            data = pa.py_buffer(b"")
        else:
            self._file.flush()
            data = pa.py_buffer(mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ))
            self._file.close()  # the mapping keeps the (already unlinked) data alive
            self._file = None
        return _binary(offsets, data)

    def export(self) -> tuple[np.ndarray, bytes | None]:
        """(offsets, values kept in memory or None) of a spill made with ``path``: the
        file is closed, for :func:`part_array` in another process to map."""
        offsets = self._offsets()
        blob = b"".join(self._memory) if self._memory is not None else None
        self.close()
        return offsets, blob

    def close(self) -> None:
        """Drop the temp file without building the array (e.g. after an error)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._lengths = []
        self._memory = None


def part_array(path: str, offsets: np.ndarray, blob: bytes | None) -> pa.LargeBinaryArray:
    """The Arrow array of an exported spill (see :meth:`ArgsSpill.export`); maps the
    file, which the caller may unlink at once."""
    size = int(offsets[-1])
    if blob is not None:
        data = pa.py_buffer(blob)
    elif size == 0:
        data = pa.py_buffer(b"")
    else:
        with open(path, "rb") as f:
            data = pa.py_buffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    return _binary(offsets, data)


def _binary(offsets: np.ndarray, data) -> pa.LargeBinaryArray:
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), data])
