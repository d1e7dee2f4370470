"""An Nsight SQLite export is plain tables: one that computes a column on every read
(a generated column), carries a trigger, or makes its queries run past a budget of SQLite
steps for its size is refused in one line, in bounded time and memory."""
from __future__ import annotations

import sqlite3

import pytest
from attacks import generated_column_sqlite
from hostile import assert_one_line_error, run_cli

from sofa_gui.core.importers.nsys import db as nsys_db
from sofa_gui.core.progress import NullProgress


@pytest.mark.parametrize("how, what", [("virtual", "has a generated column (start)"),
                                       ("trigger", "has a trigger (t)")])
def test_crafted_tables_are_refused_in_one_line(tmp_path, how, what):
    path = generated_column_sqlite(tmp_path, rows=200, cost=64 << 20, how=how)
    assert path.stat().st_size < 64 * 1024
    # 1 GB of address space: reading the generated column once would need more
    proc = run_cli(["analyze", "--no-cache", str(path)], address_space=2 << 30, timeout=60)
    err = assert_one_line_error(proc, 2)
    assert f"SQLite file not read: table CUPTI_ACTIVITY_KIND_KERNEL {what}" in err


def test_virtual_tables_are_not_taken_for_tables(tmp_path):
    path = tmp_path / "fts.sqlite"
    con = sqlite3.connect(path)
    try:
        con.execute("CREATE VIRTUAL TABLE CUPTI_ACTIVITY_KIND_KERNEL USING fts5(start)")
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no fts5")
    con.commit()
    con.close()
    con = nsys_db.connect(path)
    assert "CUPTI_ACTIVITY_KIND_KERNEL" not in nsys_db.NsysDb(con).tables


def test_queries_stop_past_their_budget():
    con = sqlite3.connect(":memory:")
    db = nsys_db.NsysDb(con, NullProgress(), budget=1_000_000)
    with pytest.raises(sqlite3.OperationalError) as exc:
        db.ints("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r "
                "WHERE x < 100000000) SELECT count(*) FROM r", 1, NullProgress(), 1, "")
    assert isinstance(db.why_stopped(exc.value), nsys_db.OverBudget)


def test_budget_grows_with_the_file(tmp_path):
    small, big = tmp_path / "a", tmp_path / "b"
    small.write_bytes(b"x")
    big.write_bytes(b"x" * (1 << 20))
    assert nsys_db.budget_for(small) == nsys_db.STEPS_FLOOR
    assert nsys_db.budget_for(big) == max(nsys_db.STEPS_FLOOR, nsys_db.STEPS_PER_BYTE << 20)
