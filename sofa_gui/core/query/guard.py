"""What a query may be: one ``SELECT`` reading only the trace's tables.

Checked on DuckDB's own parse of the text (never by matching words in it): the
statement list must hold exactly one statement of type SELECT, and every table
function in its syntax tree (``FROM read_csv(...)``, ``FROM glob(...)``,
``FROM query(...)``...) must be one of :data:`TABLE_FUNCTIONS`, which read no
file and run no other SQL. The connection's settings (see :mod:`.db`) refuse the
same things again, should a way past this check exist.
"""

from __future__ import annotations

import json

#: Table functions a query may use: generators and the catalog's own listings.
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "duckdb_tables",
                             "duckdb_views", "duckdb_columns", "duckdb_functions",
                             "duckdb_types", "duckdb_keywords"})
READ_ONLY = "the trace's tables are read-only: only a SELECT statement is run"


class QueryError(Exception):
    """A statement that failed or was refused; ``str()`` is one line for the user."""

    def __init__(self, message: str, refused: bool = False):
        super().__init__(message)
        self.refused = refused


def one_line(exc: BaseException | str, limit: int = 400) -> str:
    """An engine message as one line: its lines joined, DuckDB's position hint (``LINE 1:``
    and the caret under it) dropped, cut to ``limit`` characters."""
    lines = []
    for line in str(exc).splitlines():
        if line.startswith("LINE ") or not line.strip() or set(line.strip()) <= {"^"}:
            continue
        lines.append(" ".join(line.split()))
    text = " ".join(lines) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check(con, sql: str) -> set[str]:
    """Raise :class:`QueryError` (refused) unless ``sql`` is one permitted SELECT;
    return the lower-cased names of the tables and views it reads."""
    import duckdb

    if not sql.strip():
        raise QueryError("empty query", refused=True)
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(one_line(exc)) from None
    if len(statements) != 1:
        raise QueryError(f"one statement at a time, not {len(statements)}", refused=True)
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryError(f"{kind.name} refused: {READ_ONLY}", refused=True)
    tree = _syntax_tree(con, sql)
    functions, tables = set(), set()
    _walk(tree, functions, tables)
    paths = sorted(t for t in tables if any(c in t for c in "/\\:.*?"))
    if paths:
        raise QueryError(f"reading {paths[0]!r} refused: queries read the trace's tables "
                         f"only, never files", refused=True)
    bad = sorted(functions - TABLE_FUNCTIONS)
    if bad:
        raise QueryError(f"table function {bad[0]}() refused: queries read the trace's "
                         f"tables only, never files or other SQL", refused=True)
    return tables


def _syntax_tree(con, sql: str) -> dict:
    """DuckDB's parse of a SELECT as JSON (``json_serialize_sql``)."""
    try:
        text = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()[0]
        tree = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - anything unparsable is refused
        raise QueryError(f"could not check the query: {one_line(exc)}", refused=True) from None
    if tree.get("error"):  # it parsed (extract_statements) but is no plain SELECT: PRAGMA...
        raise QueryError(f"statement refused: {READ_ONLY} "
                         f"({one_line(tree.get('error_message') or 'not a SELECT')})",
                         refused=True)
    return tree


def _walk(node, functions: set[str], tables: set[str]) -> None:
    """Collect table-function names and base-table names anywhere in ``node``."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            kind = n.get("type")
            if kind == "TABLE_FUNCTION":
                fn = n.get("function") or {}
                functions.add(str(fn.get("function_name", "?")).lower())
            elif kind == "BASE_TABLE":
                tables.add(str(n.get("table_name", "")).lower())
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
