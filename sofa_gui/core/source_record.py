"""What a cache entry was made from: enough to tell the same source from a changed one.

A cache entry is found by the source's path, size and mtime; it records more, and is
only served when all of it still holds: for each file of the source (the file itself,
or every file of a folder) its path, size, mtime, inode, ctime and a SHA-256 of its
first and last MiB. New content copied over the source with ``cp -p`` (same size,
same mtime) changes the ctime and the hashed bytes, so the old results are dropped.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: How much of each end of a file the record hashes.
HASHED_END = 1 << 20


def _ends_hash(path: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(HASHED_END))
        if size > HASHED_END:
            f.seek(max(HASHED_END, size - HASHED_END))
            h.update(f.read(HASHED_END))
    return h.hexdigest()


def _file_record(f: Path, name: str) -> list:
    st = os.stat(f)
    return [name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns,
            _ends_hash(f, st.st_size)]


def source_record(path: Path) -> dict:
    """The record of ``path`` (a file or a folder); OSError if it cannot be read."""
    path = Path(path).resolve()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
    else:
        files = [path]
    # names that are not UTF-8 stay str with surrogates: the JSON manifest escapes them
    return {"path": str(path),
            "files": [_file_record(f, str(f.relative_to(path.parent))) for f in files]}


def record_matches(stored, path: Path) -> bool:
    """Whether ``stored`` (a record from a manifest) is the record of ``path`` now."""
    try:
        return stored == source_record(path)
    except OSError:
        return False
