"""The SQL tables over a real trace: documented columns, values equal to the trace's
columns, the locked connection, slice ids of results, and cancelling a running query."""

from __future__ import annotations

import threading
import time

import duckdb
import numpy as np
import pytest

from sofa_gui.core.analysis.iterations import detect_iterations
from sofa_gui.core.analysis.self_time import parents
from sofa_gui.core.importers import load_trace
from sofa_gui.core.query.db import QueryError, TraceDB
from sofa_gui.core.query.schema import EXAMPLES, TABLES, VIEWS, schema_lines
from sofa_gui.core.samples import demo_trace_path


class _Analysis:
    def __init__(self, iterations):
        self.iterations = iterations
        self.findings = []


@pytest.fixture(scope="module")
def trace():
    return load_trace(demo_trace_path())


@pytest.fixture(scope="module")
def db(trace):
    d = TraceDB(trace, _Analysis(detect_iterations(trace)))
    yield d
    d.close()


def test_every_documented_column_exists_in_order(db):
    for table, (_, cols) in TABLES.items():
        got = db.run(f"SELECT * FROM {table} LIMIT 0")
        assert got.columns == [c for c, _, _ in cols], table
    slices_cols = db.run("SELECT * FROM slices LIMIT 0").columns
    for view in VIEWS:
        assert db.run(f"SELECT * FROM {view} LIMIT 0").columns == slices_cols
    assert any(line.startswith("slices:") for line in schema_lines())


def test_examples_run(db):
    for _, sql in EXAMPLES:
        db.run(sql, max_rows=5)  # raises QueryError if an example broke


def test_slices_equal_the_trace_columns(trace, db):
    s = trace.slices
    res = db.run("SELECT id, lane, name, dur_us, depth, parent, iteration, rank FROM slices "
                 "ORDER BY id")
    assert len(res.rows) == len(s)
    ids, lanes, names, dur, depth, parent, it, rank = map(list, zip(*res.rows))
    assert ids == list(range(len(s)))
    np.testing.assert_array_equal(lanes, s.lane)
    assert names == [trace.names[int(i)] for i in s.name]
    np.testing.assert_allclose(dur, s.dur / 1e3)
    np.testing.assert_array_equal(depth, s.depth)
    par = parents(trace)
    assert [-1 if p is None else p for p in parent] == par.tolist()
    assert all((p is None) == (d == 0) for p, d in zip(parent, depth))
    iters = detect_iterations(trace)
    k = 3
    inside = (s.start >= iters.starts[k]) & (s.start < iters.ends[k])
    assert sum(1 for x in it if x == k) == int(inside.sum())
    np.testing.assert_array_equal(rank, np.asarray(trace.lanes.rank)[s.lane])


def test_args_and_slice_ids(trace, db):
    res = db.run("SELECT id, json_extract_string(args, '$.\"External id\"') FROM ops "
                 "ORDER BY dur_us DESC LIMIT 3")
    for i, ext in res.rows:
        assert ext == str(trace.args.get(int(trace.slices.args[i]))["External id"])
    np.testing.assert_array_equal(res.slice_ids, sorted(r[0] for r in res.rows))
    none = int(np.flatnonzero(trace.slices.args < 0)[0])
    assert db.run(f"SELECT args FROM slices WHERE id = {none}").rows == [(None,)]
    assert db.run("SELECT count(args) FROM slices").rows == [(int((trace.slices.args >= 0)
                                                                  .sum()),)]
    assert db.run("SELECT id FROM lanes").slice_ids is None  # a lane id is no slice id
    assert db.run("SELECT count(*) FROM slices").slice_ids is None


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO 'x.csv'", "SELECT * FROM read_csv('/etc/passwd')",
    "ATTACH 'x.db'", "INSTALL httpfs", "LOAD httpfs", "SELECT * FROM glob('/*')",
    "SET enable_external_access = true", "SET lock_configuration = false",
    "SET autoload_known_extensions = true", "SELECT * FROM '/etc/hostname'",
])
def test_the_connection_itself_refuses_what_the_guard_refuses(db, sql):
    """Past the statement check (raw ``con.execute``), the settings still say no."""
    with pytest.raises(duckdb.Error):
        db.con.execute(sql).fetchall()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM query('SELECT 1')", "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT (SELECT count(*) FROM read_json('x.json'))", "DROP VIEW slices",
    "INSERT INTO lanes VALUES (1)", "DELETE FROM lanes", "EXPORT DATABASE 'd'",
    "CALL pragma_version()", "DETACH memory", "CHECKPOINT", "CREATE MACRO m() AS 1",
])
def test_guard_refuses_more(db, sql):
    with pytest.raises(QueryError) as e:
        db.run(sql)
    assert e.value.refused and "\n" not in str(e.value)


def test_interrupt_stops_a_long_query(db):
    done: list = []

    def run():
        try:
            db.run("SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b")
            done.append("finished")
        except QueryError as exc:
            done.append(str(exc))

    t = threading.Thread(target=run)
    t.start()
    seen = []
    deadline = time.monotonic() + 30
    time.sleep(0.3)
    while t.is_alive() and time.monotonic() < deadline:
        seen.append(db.progress())  # DuckDB's estimate, None where it has none
        db.interrupt()  # again until it lands: the query may not have started yet
        t.join(0.2)
    assert not t.is_alive() and done and "nterrupt" in done[0]
    assert all(p is None or 0 <= p <= 1 for p in seen)
    assert db.run("SELECT 1 AS x").rows == [(1,)]  # the connection is usable afterwards


def test_the_schema_page_lists_every_table_and_column():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "sql.md").read_text()
    for table, (_, cols) in TABLES.items():
        assert f"### `{table}`" in page
        for c, typ, _ in cols:
            assert f"| `{c}` | {typ} |" in page, (table, c)
    for view in VIEWS:
        assert f"| `{view}` |" in page


@pytest.mark.parametrize("rel", ["xplane/tw003.xplane.pb", "sofa-demo-sofalog",
                                 "recording-torch-pyspy", "ranks",
                                 "sofa-deepprof-gputrace/gputrace.csv"])
def test_every_format_opens_as_tables(rel):
    """Each importer's traces (counters, no CPU lanes, several ranks...) give the tables,
    and the call tree of their main thread holds their top-level time."""
    from pathlib import Path

    from sofa_gui.core.analysis import calltree

    t = load_trace(Path(__file__).resolve().parents[1] / "data" / rel)
    d = TraceDB(t, _Analysis(detect_iterations(t)))
    try:
        assert d.run("SELECT count(*) FROM slices").rows == [(len(t.slices),)]
        assert d.run("SELECT count(*) FROM counters").rows == [(len(t.counters),)]
        assert d.run("SELECT count(*) FROM lanes").rows == [(len(t.lanes),)]
        d.run("SELECT * FROM slices", max_rows=50)
    finally:
        d.close()
    try:
        lanes, _ = calltree.pick_lanes(t, None)
    except ValueError:
        assert not len(calltree.cpu_lanes(t))
        return
    tree = calltree.build(t, lanes)
    top = np.isin(t.slices.lane, lanes) & (parents(t) < 0)
    assert int(tree.total[0]) == int(t.slices.dur[top].sum())
