"""Read-only access to an Nsight Systems SQLite export, column-wise.

The stdlib ``sqlite3`` module hands out one Python tuple per row, so queries
here return few, packed integer columns (e.g. ``deviceId << 32 | streamId``)
fetched in chunks into numpy; columns an older export lacks become defaults
instead of errors, and ``ENUM_*`` tables fall back to their documented values.

The file is untrusted: only real tables are read (a VIEW can be an endless
recursive query), and every query runs under a progress handler that stops it
on Cancel or Ctrl-C (SQLite holds the interpreter otherwise, so SIGINT would
wait for a query that may never end).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import numpy as np

from ...progress import Cancelled, Progress

if TYPE_CHECKING:  # imported where used: only SQLite files need it
    import sqlite3

SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 100_000
#: SQLite virtual-machine steps between two cancel / Ctrl-C checks (~1 ms of work).
_CHECK_STEPS = 20_000
PID = "((globalPid >> 24) & 16777215)"  # NVIDIA's idiom: pid bits of a globalPid/globalTid


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def connect(path: Path) -> sqlite3.Connection:
    """Open read-only (never creates, never writes a journal beside the file)."""
    import sqlite3  # here: only an SQLite file needs it

    uri = "file:" + quote(str(Path(path).resolve())) + "?mode=ro"
    con = sqlite3.connect(uri, uri=True, check_same_thread=False)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    if hasattr(con, "setlimit"):  # Python 3.11+
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    return con


#: SQLite VM steps the reads of one file may take: this many per file byte, at least
#: :data:`STEPS_FLOOR` (an export reads in a few dozen steps per byte; a hostile one
#: computing something per row would run for minutes).
STEPS_PER_BYTE, STEPS_FLOOR = 4_000, 2_000_000_000
#: Longest string or blob a query may make (SQLITE_LIMIT_LENGTH): exports hold short names.
MAX_VALUE_BYTES = 64 << 20


def budget_for(path: Path) -> int:
    try:
        size = Path(path).stat().st_size
    except OSError:
        size = 0
    return max(STEPS_FLOOR, STEPS_PER_BYTE * size)


class OverBudget(Exception):
    """The reads of a file took more SQLite steps than :func:`budget_for` allows."""


class NsysDb:
    """Table/column discovery plus chunked integer fetches."""

    def __init__(self, con: sqlite3.Connection, progress: Progress | None = None,
                 budget: int | None = None):
        self.con = con
        self._progress = progress
        #: why the running query was stopped (Cancelled or KeyboardInterrupt), to re-raise
        self.stopped: BaseException | None = None
        #: rows dropped because a value in an integer column was not an integer (skipped)
        self.bad_rows = 0
        con.set_progress_handler(self._keep_going, _CHECK_STEPS)
        #: VM steps left before the reads are stopped (None: no budget)
        self.steps_left = budget
        self.tables = {r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql NOT LIKE 'CREATE VIRTUAL%'")}
        self._columns: dict[str, set[str]] = {}

    def crafted(self) -> str | None:
        """Why the file is not a plain export, or None: a generated column (computed on
        every read, at any cost) or a trigger in a table it reads. Views are never read."""
        for table in sorted(self.tables):
            rows = self.con.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
            gen = [r[1] for r in rows if r[6] in (2, 3)]
            if gen:
                return f"table {table} has a generated column ({gen[0]}): not an export"
        trig = self.con.execute("SELECT name, tbl_name FROM sqlite_master "
                                "WHERE type = 'trigger' LIMIT 1").fetchone()
        if trig is not None:
            return f"table {trig[1]} has a trigger ({trig[0]}): not an export"
        return None

    def _keep_going(self) -> int:
        """SQLite's progress callback: non-zero aborts the query (Cancel, Ctrl-C)."""
        try:
            if self._progress is not None:
                self._progress.check_cancelled()
            if self.steps_left is not None:
                self.steps_left -= _CHECK_STEPS
                if self.steps_left < 0:
                    raise OverBudget("its queries ran past their budget of SQLite steps "
                                     "for a file of this size: not an export")
        except OverBudget as exc:
            self.stopped = exc
        except Cancelled as exc:
            self.stopped = exc
        except KeyboardInterrupt as exc:  # the SIGINT handler runs here, in Python code
            self.stopped = exc
        return 1 if self.stopped is not None else 0

    def why_stopped(self, exc: sqlite3.Error) -> BaseException | None:
        """Cancelled / KeyboardInterrupt when ``exc`` is our handler stopping a query.

        Only the handler interrupts queries, so an "interrupted" error whose reason was
        not recorded is a SIGINT that fired as the callback was entered.
        """
        if self.stopped is not None:
            return self.stopped
        return KeyboardInterrupt() if str(exc) == "interrupted" else None

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            rows = self.con.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = {r[1] for r in rows}
        return self._columns[table]

    def col(self, table: str, *names: str, default: str = "0") -> str:
        """SQL for the first of ``names`` the table has (NULLs -> default), else the default."""
        have = [n for n in names if n in self.columns(table)]
        if not have:
            return default
        return f"COALESCE({', '.join(have)}, {default})"

    def count(self, table: str) -> int:
        if table not in self.tables:
            return 0
        return int(self.con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])

    def ints(self, sql: str, ncols: int, progress: Progress, total: int, message: str,
             texts: list | None = None) -> np.ndarray:
        """All rows of an integer query as an (n, ncols) int64 array.

        With ``texts`` (a list), the query has one more, last, column of text that
        is appended to it instead.
        """
        cur = self.con.execute(sql)
        chunks = []
        done = 0
        while True:
            progress.check_cancelled()
            rows = cur.fetchmany(_CHUNK)
            if not rows:
                break
            kept = rows
            try:
                chunk = _int_rows(rows, ncols, texts is not None)
            except (ValueError, TypeError, OverflowError):  # e.g. text in an INTEGER column
                kept = [r for r in rows if _all_ints(r[:ncols])]
                self.bad_rows += len(rows) - len(kept)
                chunk = _int_rows(kept, ncols, texts is not None)
            if texts is not None:
                texts.extend(r[ncols] for r in kept)
            chunks.append(chunk)
            done += len(rows)
            progress.update(min(done / max(total, 1), 1.0), message)
        if not chunks:
            return np.zeros((0, ncols), np.int64)
        return np.concatenate(chunks)

    def rows(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def enum(self, table: str, default: dict[int, tuple[str, str]]) -> dict[int, tuple[str, str]]:
        """``ENUM_*`` table as {id: (name, label)}; the documented values when absent."""
        if table not in self.tables:
            return dict(default)
        out = dict(default)
        label = "label" if "label" in self.columns(table) else "name"
        for i, name, lab in self.rows(f'SELECT id, name, {label} FROM "{table}"'):
            out[int(i)] = (str(name or ""), str(lab or name or ""))
        return out


def _int_rows(rows: list, ncols: int, with_text: bool) -> np.ndarray:
    if not rows:
        return np.zeros((0, ncols), np.int64)
    if with_text:
        cols = list(zip(*rows))[:ncols]
        return np.array(cols, np.int64).T.reshape(len(rows), ncols)
    return np.array(rows, np.int64).reshape(len(rows), ncols)


def _all_ints(values) -> bool:
    """Whether a row's values fit an int64 column (a hostile export may hold text there)."""
    return all(isinstance(v, int) and -(1 << 63) <= v < (1 << 63)
               or isinstance(v, float) and abs(v) < 9e18 for v in values)


class StringIds:
    """``StringIds`` (id -> text) interned into the builder only for ids actually used."""

    def __init__(self, db: NsysDb):
        self._text: dict[int, str] = {}
        if "StringIds" in db.tables:
            self._text = {int(i): (v if isinstance(v, str) else str(v))
                          for i, v in db.rows("SELECT id, value FROM StringIds")}

    def get(self, i: int, default: str = "") -> str:
        return self._text.get(int(i), default)

    def name_ids(self, builder, ids: np.ndarray, fallback: str, clean=None):
        """(builder name id per row, distinct texts, row -> distinct index) for string ids."""
        uniq, inv = np.unique(ids, return_inverse=True)
        texts = [self._text.get(int(u), fallback) for u in uniq.tolist()]
        if clean is not None:
            texts = [clean(t) for t in texts]
        interned = builder.intern_many(texts) if texts else np.zeros(0, np.int32)
        inv = inv.reshape(-1)
        return interned[inv], texts, inv
