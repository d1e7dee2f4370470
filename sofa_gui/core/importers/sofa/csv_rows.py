"""Fast, forgiving reader for SOFA's CSV files.

Two schemas: the 13-column trace schema every preprocessed SOFA file shares and
the 2017 six-column GPU trace. pyarrow parses the text (every column as a
string), numbers are converted column-wise, and rows that cannot be used are
dropped and counted by reason -- never silently.
"""

from __future__ import annotations

import mmap
import sys
from bisect import bisect_left
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...progress import NullProgress, Progress

SOFA_COLUMNS = ("timestamp", "event", "duration", "deviceId", "copyKind", "payload",
                "bandwidth", "pkt_src", "pkt_dst", "pid", "tid", "name", "category")
LEGACY_COLUMNS = ("time_ms", "event", "duration(ms)", "copyKind", "data_B", "streamId")
SCHEMAS = {"sofa": SOFA_COLUMNS, "legacy": LEGACY_COLUMNS}

_TEXT_COLUMNS = {"name", "deviceId"}  # may hold text (diskstat's deviceId is a device name)
_NUMBER = r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$"
_BLOCK = 4 << 20
# Below this magnitude float64 holds 9 decimals exactly; above it parse decimals.
_FLOAT_EXACT = 2.0**22


def _header_fields(line: str) -> tuple[str, ...]:
    return tuple(f.strip().strip('"') for f in line.lstrip("\ufeff").strip().split(","))


def sniff_schema(path: Path) -> str | None:
    """``"sofa"`` or ``"legacy"`` from the header line, else None."""
    with open(path, "rb") as f:
        head = f.read(4096)
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    fields = _header_fields(line)
    for name, cols in SCHEMAS.items():
        if fields == cols:
            return name
    return None


@dataclass
class CsvRows:
    """The rows of one CSV as string columns (``name`` as bytes), plus what was dropped."""

    file: str
    columns: dict[str, pa.Array]
    read: int = 0  # data rows seen, header repeats excluded
    header_repeats: int = 0
    skipped: Counter = field(default_factory=Counter)

    def __len__(self) -> int:
        first = next(iter(self.columns.values()), None)
        return 0 if first is None else len(first)

    def keep(self, mask: np.ndarray) -> None:
        import pyarrow.compute as pc
        if mask.all():
            return
        m = pa.array(mask)
        self.columns = {k: pc.filter(v, m) for k, v in self.columns.items()}

    def skip(self, reason: str, n: int) -> None:
        if n:
            self.skipped[f"{self.file}: {reason}"] += int(n)


def reads(*columns: str):
    """Declare the columns a file handler uses; :func:`read_rows` materialises only those."""
    def mark(fn):
        fn.columns = columns
        return fn

    return mark


def read_rows(path: Path, schema: str, progress: Progress | None = None,
              columns: tuple[str, ...] | None = None) -> CsvRows:
    """Parse ``path`` (header already sniffed as ``schema``) into string columns.

    ``columns`` limits which columns are converted (all when None); the first
    column is always kept, to recognise header lines repeated inside the file.
    """
    progress = progress or NullProgress()
    try:
        with _quiet_undecodable_rows():
            rows = _read_rows(path, path, schema, progress, columns)
    except pa.ArrowInvalid as exc:
        # pyarrow decodes a malformed row as UTF-8 before calling the invalid-row handler;
        # when that fails the handler never runs and the whole file errors. And a row
        # longer than the read block "straddles" blocks: the whole file errors too. Retry
        # on a copy with undecodable bytes replaced and over-long rows cut out, so those
        # rows are skipped (and counted) like others.
        data = Path(path).read_bytes()
        clean = data.decode("utf-8", "replace").encode("utf-8")
        long_rows = quoted = 0
        if "straddl" in str(exc):
            clean, long_rows = _without_long_lines(clean, _BLOCK)
        if "out of sync" in str(exc):  # a quoted cell with line breaks across blocks
            clean, quoted = _cut_quoted_breaks(clean)
        if clean == data:
            raise
        rows = _read_rows(path, pa.BufferReader(clean), schema, progress, columns)
        rows.read += long_rows + quoted
        rows.skip(f"row longer than {_BLOCK >> 20} MiB", long_rows)
        rows.skip(_QUOTED_BREAK, quoted)
    return _without_quoted_line_breaks(path, rows, schema, progress, columns)


_BAD_COUNT = "wrong number of columns"
_QUOTED_BREAK = "row with a line break inside quotes"


def _without_quoted_line_breaks(path: Path, rows: CsvRows, schema: str, progress: Progress,
                                columns: tuple[str, ...] | None) -> CsvRows:
    """``rows``, or a re-read without records whose quoted cells hold line breaks.

    pyarrow splits the file into blocks at line breaks without looking at quotes
    (SOFA's writer never quotes), so such a cell across a block boundary turns
    the rest of that block into garbage rows. Only a read that already skipped
    rows for their column count is checked (a byte search for '"'); the re-read
    wins if it keeps more rows.
    """
    if not rows.skipped.get(f"{rows.file}: {_BAD_COUNT}"):
        return rows
    if not _has_quote(Path(path)):
        return rows
    clean, cut = _cut_quoted_breaks(Path(path).read_bytes())
    if not cut:
        return rows
    again = _read_rows(path, pa.BufferReader(clean), schema, progress, columns)
    if len(again) <= len(rows):
        return rows
    again.read += cut
    again.skip(_QUOTED_BREAK, cut)
    return again


def _has_quote(path: Path) -> bool:
    with open(path, "rb") as f:
        try:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return m.find(b'"') >= 0
        except (ValueError, OSError):  # empty, or not mappable
            return b'"' in f.read()


def _cut_quoted_breaks(data: bytes) -> tuple[bytes, int]:
    """``data`` without its records that have a quoted cell holding a line break.

    Quotes are read as CSV does: one opens a cell at the start of a field, ``""``
    inside is a quote, the next lone one closes it (an unclosed one: to the end).
    """
    arr = np.frombuffer(data, np.uint8)
    quotes = np.flatnonzero(arr == 34).tolist()
    nl = np.flatnonzero(arr == 10).tolist()
    size, n = len(data), len(quotes)
    keep, at, cut, k = [], 0, 0, 0
    while k < n:
        q = quotes[k]
        k += 1
        if q < at or (q and data[q - 1] not in b",\n\r"):
            continue  # inside a record already cut, or a quote inside a bare cell
        while k + 1 < n and quotes[k + 1] == quotes[k] + 1:
            k += 2  # an escaped quote: ""
        close = quotes[k] if k < n else size
        k += 1
        first = bisect_left(nl, q)
        if first == len(nl) or nl[first] > close:
            continue  # no line break inside this cell
        after = bisect_left(nl, close)
        keep.append((at, nl[first - 1] + 1 if first else 0))
        at, cut = (nl[after] + 1 if after < len(nl) else size), cut + 1
    if not cut:
        return data, 0
    keep.append((at, size))
    view = memoryview(data)
    return b"".join(view[a:b] for a, b in keep), cut


def _without_long_lines(data: bytes, limit: int) -> tuple[bytes, int]:
    """``data`` without its lines (newline included) longer than ``limit``, and how many."""
    nl = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    starts = np.r_[0, nl + 1]
    ends = np.r_[nl + 1, len(data)]
    long = np.flatnonzero(ends - starts > limit)
    if not len(long):
        return data, 0
    view, pieces, at = memoryview(data), [], 0
    for i in long.tolist():
        pieces.append(view[at:starts[i]])
        at = int(ends[i])
    pieces.append(view[at:])
    return b"".join(pieces), len(long)


@contextmanager
def _quiet_undecodable_rows():
    """Hide the "Exception ignored" report pyarrow prints for such a row (handled above)."""
    previous = sys.unraisablehook

    def hook(info):
        if not isinstance(info.exc_value, UnicodeDecodeError):
            previous(info)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _read_rows(path: Path, source, schema: str, progress: Progress,
               columns: tuple[str, ...] | None) -> CsvRows:
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    cols = SCHEMAS[schema]
    wanted = [c for c in cols if columns is None or c in columns or c == cols[0]]
    rows = CsvRows(Path(path).name, {})
    bad = [0]

    def on_invalid(_row) -> str:
        bad[0] += 1
        return "skip"

    types = {c: (pa.binary() if c == "name" else pa.string()) for c in cols}
    reader = pacsv.open_csv(
        source,
        read_options=pacsv.ReadOptions(column_names=list(cols), skip_rows=1, block_size=_BLOCK),
        parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
        convert_options=pacsv.ConvertOptions(column_types=types, check_utf8=False,
                                             strings_can_be_null=False,
                                             include_columns=wanted),
    )
    size = max(Path(path).stat().st_size, 1)
    batches = []
    for i, batch in enumerate(reader):
        batches.append(batch)
        progress.update(min((i + 1) * _BLOCK / size, 1.0), f"reading {rows.file}")
    table = pa.Table.from_batches(batches, schema=reader.schema)
    rows.columns = {c: table.column(c).combine_chunks() for c in wanted}
    rows.skip(_BAD_COUNT, bad[0])
    repeats = pc.equal(rows.columns[cols[0]], cols[0]).to_numpy(zero_copy_only=False)
    rows.header_repeats = int(repeats.sum())
    rows.keep(~repeats)
    rows.read = len(rows) + bad[0]
    return rows


# -- numbers -------------------------------------------------------------------------------
def _trimmed(col: pa.Array) -> pa.Array:
    import pyarrow.compute as pc
    return pc.ascii_trim_whitespace(col)


def parse_float(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, ok): float64 values (0 where not ok) and which cells were finite numbers."""
    import pyarrow.compute as pc
    try:
        v = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        text = _trimmed(col)
        ok = pc.match_substring_regex(text, _NUMBER).to_numpy(zero_copy_only=False)
        v = pc.cast(pc.if_else(pa.array(ok), text, "0"), pa.float64()).to_numpy(
            zero_copy_only=False)
    else:
        ok = np.ones(len(v), bool)
    ok &= np.isfinite(v)
    return np.where(ok, v, 0.0), ok


def parse_scaled_int(col: pa.Array, exp: int) -> tuple[np.ndarray, np.ndarray]:
    """(value x 10**exp as int64, ok), exact for decimal text with <= ``exp`` decimals.

    Seconds -> ns is ``exp=9``; milliseconds -> ns is ``exp=6``. Small numbers go
    through float64 (exact at this size); large ones (epoch seconds) are parsed as
    decimals so that e.g. ``1548903852.071722`` becomes exactly ``...071722000`` ns.
    """
    import pyarrow.compute as pc
    v, ok = parse_float(col)
    scale = 10.0**exp
    ok &= np.abs(v) * scale < 9.0e18
    v = np.where(ok, v, 0.0)
    if not ok.any() or np.abs(v).max() < _FLOAT_EXACT:
        return np.rint(v * scale).astype(np.int64), ok
    text = pc.if_else(pa.array(ok), _trimmed(col), "0")
    try:
        dec = pc.cast(text, pa.decimal128(38, exp))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # more decimals than exp
        return np.rint(v * scale).astype(np.int64), ok
    unscaled = pa.Array.from_buffers(pa.decimal128(38, 0), len(dec), dec.buffers(),
                                     offset=dec.offset)
    return unscaled.cast(pa.int64()).to_numpy(zero_copy_only=False), ok


class NumericRows:
    """Converts the columns a file needs; rows with a bad required cell are dropped.

    Each dropped row is counted once, under the first required column that failed
    (``"mpstat.csv: non-numeric duration"`` / ``"...: missing duration"``).
    """

    def __init__(self, rows: CsvRows):
        self.rows = rows
        self.values: dict[str, np.ndarray] = {}
        self._ok = np.ones(len(rows), bool)
        self.kept = self._ok  # after finish(): which of the original rows were kept

    def ns(self, col: str, exp: int = 9) -> None:
        self._take(col, *parse_scaled_int(self.rows.columns[col], exp))

    def float(self, col: str) -> None:
        self._take(col, *parse_float(self.rows.columns[col]))

    def optional(self, col: str, default: float = -1.0) -> None:
        """A column whose bad cells just take ``default`` (row kept)."""
        v, ok = parse_float(self.rows.columns[col])
        self.values[col] = np.where(ok, v, default)

    def _take(self, col: str, v: np.ndarray, ok: np.ndarray) -> None:
        import pyarrow.compute as pc
        newly_bad = self._ok & ~ok
        if newly_bad.any():
            empty = pc.equal(_trimmed(self.rows.columns[col]), "").to_numpy(
                zero_copy_only=False)
            self.rows.skip(f"missing {col}", int((newly_bad & empty).sum()))
            self.rows.skip(f"non-numeric {col}", int((newly_bad & ~empty).sum()))
        self._ok &= ok
        self.values[col] = v

    def finish(self) -> dict[str, np.ndarray]:
        """Drop the bad rows everywhere; return the numeric columns of the kept rows."""
        ok = self.kept = self._ok
        self.rows.keep(ok)
        return {k: v[ok] for k, v in self.values.items()}


def text_ids(col: pa.Array) -> tuple[list[str], np.ndarray]:
    """(distinct strings, index per row): transform names once per distinct value."""
    enc = col.dictionary_encode()
    uniq = [b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)
            for b in enc.dictionary.to_pylist()]
    return uniq, enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def text_values(col: pa.Array) -> list[str]:
    """Every cell as ``str`` (for small files)."""
    return [b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)
            for b in col.to_pylist()]
