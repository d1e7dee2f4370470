"""What a recording folder can make the importer read.

Only its own files: a name inside the folder that is a link to a place outside it
(``torch/kineto-1.json -> /etc/passwd``) is not opened, so no byte of the target reaches
a note or an error message.

Only tables their file can hold: a Parquet file states its row count and uncompressed
size in its footer, read before the data. Run-length encoding lets 210 KB declare 10
million rows (1.5 GB once read), so a table declaring more than :data:`ROWS_PER_BYTE`
rows per file byte (real recordings hold about 0.3) or more than :data:`BYTES_PER_BYTE`
uncompressed bytes per file byte, above the floors, is left out with a note.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Rows a Parquet table may declare per byte of its file, and always allowed.
ROWS_PER_BYTE, ROWS_FLOOR = 16, 1_000_000
#: Uncompressed bytes a Parquet table may declare per byte of its file, and always allowed.
BYTES_PER_BYTE, BYTES_FLOOR = 64, 64 << 20


def inside(folder: Path, path: Path) -> bool:
    """``path`` (links followed) lies in ``folder`` (links followed)."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))
    except (OSError, ValueError):
        return False


def outside_note(folder: Path, path: Path) -> str:
    return f"{_rel(folder, path)}: a link out of the recording folder; not read"


def own(folder: Path, paths, notes: list[str]) -> list[Path]:
    """The ``paths`` inside ``folder``; each other one gets a note (its target unread)."""
    kept = []
    for p in paths:
        if inside(folder, p):
            kept.append(p)
        else:
            notes.append(outside_note(folder, p))
    return kept


def oversized(folder: Path, path: Path) -> str | None:
    """Why the Parquet file at ``path`` is not read (its footer declares more than its
    size can hold), or None."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    size = max(path.stat().st_size, 1)
    rows = meta.num_rows
    raw = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
    if rows > max(ROWS_FLOOR, ROWS_PER_BYTE * size):
        return (f"{_rel(folder, path)}: declares {rows:,} rows in {size:,} bytes, more than "
                f"such a file holds (at most {max(ROWS_FLOOR, ROWS_PER_BYTE * size):,}); "
                "not read")
    if raw > max(BYTES_FLOOR, BYTES_PER_BYTE * size):
        return (f"{_rel(folder, path)}: declares {raw:,} bytes of data in {size:,} bytes, "
                f"more than such a file holds; not read")
    return None


def _rel(folder: Path, path: Path) -> str:
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return path.name
