"""A read-only DuckDB connection over one trace's columns.

The connection is in memory, with every way out of it closed before the first user
statement: no file or network access (``enable_external_access=false``, which also
stops COPY, ATTACH, INSTALL, LOAD and the file-reading table functions), no extension
auto-install / auto-load, no Python variables as tables, and the configuration locked
so a ``SET`` cannot reopen any of it. :mod:`.guard` additionally refuses, before
DuckDB sees it, any statement that is not one ``SELECT`` and any table function that
is not on its short list, so the message is ours and names what was refused.

Usage::

    db = TraceDB(trace, analysis)      # analysis: iterations and findings (optional)
    res = db.run("SELECT count(*) FROM slices")
    res.columns, res.rows, res.slice_ids

:meth:`TraceDB.interrupt` and :meth:`TraceDB.progress` may be called from another
thread while :meth:`TraceDB.run` runs (the app's Cancel button and progress bar).
"""

from __future__ import annotations

import decimal
import functools
import json
import math
from dataclasses import dataclass, field

import numpy as np

from ..trace import Trace
from . import guard, tables
from .guard import QueryError
from .schema import VIEWS

__all__ = ["QueryError", "QueryResult", "TraceDB", "json_value", "preload", "refuse_early"]

#: Integer result columns taken for slice ids when the query reads slices.
SLICE_ID_COLUMNS = ("id", "slice_id", "slice", "from_slice", "to_slice", "parent")
#: Tables whose ``id`` is a slice id (``lanes.id`` is not).
SLICE_SOURCES = {"slices", "flows", *VIEWS}
#: DuckDB's memory for one query; past it the query fails with DuckDB's message.
MEMORY_LIMIT = "2GB"


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    truncated: bool = False  # more rows than ``max_rows`` existed
    slice_ids: np.ndarray | None = field(default=None, repr=False)  # see :func:`_slice_ids`
    slice_column: int | None = None  # the column the slice ids are read from

    def to_dict(self) -> dict:
        return {"columns": self.columns, "types": self.types,
                "rows": [[json_value(v) for v in r] for r in self.rows],
                "truncated": self.truncated}


def json_value(v):
    """A result value as JSON can hold it (NaN / infinity as null, decimals as floats)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, decimal.Decimal):
        return json_value(float(v))
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def preload() -> None:
    """Import DuckDB and what it loads on the first table it registers (pyarrow.dataset,
    which imports pandas: ~0.5 s), for a caller with time to spare."""
    import duckdb  # noqa: F401
    import pyarrow.dataset  # noqa: F401


def _connect():
    import duckdb

    con = duckdb.connect(":memory:", config={
        "enable_external_access": False, "autoinstall_known_extensions": False,
        "autoload_known_extensions": False, "allow_community_extensions": False,
        "python_enable_replacements": False, "memory_limit": MEMORY_LIMIT})
    con.execute("SET enable_progress_bar = true")  # query_progress() needs it
    con.execute("SET enable_progress_bar_print = false")
    return con


def refuse_early(sql: str) -> None:
    """Raise :class:`QueryError` if ``sql`` would be refused (before a trace is loaded)."""
    con = _connect()
    try:
        con.execute("SET lock_configuration = true")
        guard.check(con, sql)
    finally:
        con.close()


class TraceDB:
    """The documented tables of one trace (:data:`.schema.TABLES`) in a locked connection."""

    def __init__(self, trace: Trace, analysis=None):
        self.trace = trace
        self.con = _connect()
        self._register_functions()
        self._register(analysis)
        self._create_views()
        self.con.execute("SET lock_configuration = true")

    def _register_functions(self) -> None:
        from ..analysis.iterations.symbols import normalize_name
        from ..names import demangle

        args = self.trace.args

        @functools.lru_cache(maxsize=65536)
        def short_name(name: str) -> str:
            return normalize_name(demangle(name))

        def slice_args(row: int) -> str | None:
            return None if row < 0 else json.dumps(args.get(int(row)), default=str)

        self.con.create_function("short_name", short_name, ["VARCHAR"], "VARCHAR",
                                 side_effects=False)
        self.con.create_function("slice_args", slice_args, ["BIGINT"], "VARCHAR",
                                 null_handling="special", side_effects=False)

    def _register(self, analysis) -> None:
        iters = getattr(analysis, "iterations", None)
        t = self.trace
        self.con.register("_slices_ns", tables.raw_slices(t, iters))
        self.con.register("_iterations_ns", tables.raw_iterations(iters))
        self.con.register("_counters_ns", tables.raw_counters(t))
        self.con.register("lanes", tables.lanes_table(t))
        self.con.register("flows", tables.flows_table(t))
        self.con.register("findings", tables.findings_table(t, getattr(analysis, "findings",
                                                                       None)))

    def _create_views(self) -> None:
        t0 = int(self.trace.start_ns)
        self.con.execute(f"""CREATE TEMP VIEW slices AS SELECT id, lane, name, kind,
            start / 1e3 AS start_us, dur / 1e3 AS dur_us, (start + dur) / 1e3 AS end_us,
            (start - {t0}) / 1e3 AS rel_start_us, depth, parent, iteration, rank, device,
            stream, bytes, copy_kind, correlation, slice_args(args_row) AS args
            FROM _slices_ns""")
        self.con.execute(f"""CREATE TEMP VIEW iterations AS SELECT index, label,
            start / 1e3 AS start_us, "end" / 1e3 AS end_us, ("end" - start) / 1e3 AS duration_us,
            warmup, (start - {t0}) / 1e3 AS rel_start_us FROM _iterations_ns""")
        self.con.execute("""CREATE TEMP VIEW counters AS SELECT lane, name, unit,
            ts / 1e3 AS ts_us, value FROM _counters_ns""")
        for view, (_, body) in VIEWS.items():
            self.con.execute(f"CREATE TEMP VIEW {view} AS {body}")

    def run(self, sql: str, max_rows: int | None = None) -> QueryResult:
        """Run one ``SELECT``; at most ``max_rows`` rows (None: all). Raises
        :class:`QueryError` with one line (DuckDB's message, or why it was refused)."""
        import duckdb

        sources = guard.check(self.con, sql)
        try:
            cur = self.con.execute(sql)
            cols = [d[0] for d in cur.description or []]
            types = [str(d[1]) for d in cur.description or []]
            rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows + 1)
        except duckdb.Error as exc:
            raise QueryError(guard.one_line(exc)) from None
        truncated = max_rows is not None and len(rows) > max_rows
        res = QueryResult(cols, types, rows[:max_rows] if truncated else rows, truncated)
        if sources & SLICE_SOURCES:
            _slice_ids(res, len(self.trace.slices))
        return res

    def interrupt(self) -> None:
        """Stop the running query (it raises QueryError "INTERRUPT..."); safe from any thread."""
        self.con.interrupt()

    def progress(self) -> float | None:
        """The running query's progress 0..1, None when DuckDB cannot tell."""
        try:
            p = float(self.con.query_progress())
        except Exception:  # no query running, or the connection is closing
            return None
        return p / 100.0 if p >= 0 else None

    def close(self) -> None:
        self.con.close()


def _slice_ids(res: QueryResult, n_slices: int) -> None:
    """Set ``res.slice_ids`` (sorted, unique) and ``res.slice_column`` from the first
    integer column named like a slice id (:data:`SLICE_ID_COLUMNS`), if any."""
    for c, (name, typ) in enumerate(zip(res.columns, res.types)):
        if name.lower() in SLICE_ID_COLUMNS and "INT" in typ.upper():
            ids = np.fromiter((r[c] for r in res.rows if r[c] is not None), np.int64)
            ids = np.unique(ids)
            res.slice_ids = ids[(ids >= 0) & (ids < n_slices)]
            res.slice_column = c
            return
