"""Append-only Parquet part files: rows are buffered and flushed as whole files.

Each flush writes ``part-NNNNNN.parquet`` under a temporary name and renames it,
so a recorder killed at any moment leaves only complete parts (data up to the
last flush). :func:`compact` merges the parts into one file at the end.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TMP_SUFFIX = ".tmp"


def write_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` via a temporary name in the same folder."""
    tmp = path.with_name(f".{path.name}{TMP_SUFFIX}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


class PartWriter:
    """Thread-safe row buffer for one table schema, flushed to numbered parts."""

    def __init__(self, folder: Path, schema: pa.Schema):
        self.folder = Path(folder)
        self.schema = schema
        self._rows: dict[str, list] = {f.name: [] for f in schema}
        self._lock = threading.Lock()
        self._parts = 0

    def add(self, **columns: list) -> None:
        """Append equal-length lists, one per schema column."""
        with self._lock:
            for name, values in columns.items():
                self._rows[name].extend(values)

    def flush(self) -> Path | None:
        """Write buffered rows as the next part; None when there was nothing."""
        with self._lock:
            rows, n = self._rows, len(next(iter(self._rows.values())))
            if n == 0:
                return None
            self._rows = {f.name: [] for f in self.schema}
            self._parts += 1
            index = self._parts
        table = pa.table({f.name: pa.array(rows[f.name], f.type) for f in self.schema},
                         schema=self.schema)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"part-{index:06d}.parquet"
        write_atomic(table, path)
        return path


def part_files(folder: Path) -> list[Path]:
    """Complete part files in write order (temporary files are ignored)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("part-*.parquet") if not p.name.startswith("."))


def compact(folder: Path, target: Path, schema: pa.Schema) -> int:
    """Merge the parts of ``folder`` into ``target`` and delete the parts; returns rows.

    ``target`` appears complete (renamed into place) before any part is
    deleted, and readers prefer ``target`` when it exists, so a crash in
    between never loses or doubles rows.
    """
    parts = part_files(folder)
    tables = [pq.read_table(p).cast(schema) for p in parts]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    write_atomic(table, target)
    shutil.rmtree(folder, ignore_errors=True)
    return table.num_rows
