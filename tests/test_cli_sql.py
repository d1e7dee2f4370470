"""``sofa-gui sql`` and ``sofa-gui calltree`` on real traces: their answers equal those of
``analyze --json`` and ``stats``, refusals are one line with exit 2, no Qt is loaded."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sofa_gui.cli import main
from sofa_gui.core.samples import demo_trace_path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(demo_trace_path())
KINETO = ROOT / "tests/data/kineto/benchmark_result_2869224_1695835535_trace.json.gz"
HTA_RANK = (ROOT / "tests/data/real/holistic-trace-analysis"
            / "negative_queue_length_values_check/rank0.json.gz")


def _json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _sql(capsys, path, query: str, *extra) -> dict:
    return _json(capsys, "sql", str(path), query, "--json", *extra)


@pytest.mark.parametrize("path", [SAMPLE, KINETO, HTA_RANK], ids=["resnet50", "alexnet", "hta"])
def test_sql_counts_and_top_kernel_equal_analyze_and_stats(capsys, path):
    doc = _json(capsys, "analyze", str(path), "--json")
    got = _sql(capsys, path, "SELECT count(*) AS n FROM slices")
    assert got["columns"] == ["n"] and got["rows"] == [[doc["trace"]["slices"]]]
    kinds = _sql(capsys, path, "SELECT kind, count(*) FROM slices GROUP BY 1")
    assert dict(map(tuple, kinds["rows"])) == doc["trace"]["kinds"]
    top = _json(capsys, "stats", str(path), "--kind", "kernel", "--top", "1", "--json")["rows"]
    q = ("SELECT short_name(name) AS k, count(*) AS n, sum(dur_us) AS t FROM kernels "
         "GROUP BY 1 ORDER BY t DESC LIMIT 1")
    rows = _sql(capsys, path, q)["rows"]
    if not top:
        assert rows == []
        return
    assert rows[0][0] == top[0]["name"] and rows[0][1] == top[0]["count"]
    assert rows[0][2] == pytest.approx(top[0]["total_us"], abs=1e-3)


def test_sql_iteration_durations_equal_analyze(capsys):
    doc = _json(capsys, "analyze", SAMPLE, "--json")
    want = [it["duration_us"] for it in doc["iterations"]["items"]]
    got = _sql(capsys, SAMPLE, "SELECT duration_us FROM iterations ORDER BY index")["rows"]
    assert [r[0] for r in got] == pytest.approx(want, abs=1e-3)
    assert len(want) >= 3
    # "top 10 kernels in iteration 3" is a one-liner, and it agrees with `stats --iteration 3`
    top = _json(capsys, "stats", SAMPLE, "--kind", "kernel", "--iteration", "3", "--top", "3",
                "--json")["rows"]
    rows = _sql(capsys, SAMPLE, "SELECT short_name(name), sum(dur_us) AS t FROM kernels "
                "WHERE iteration = 3 GROUP BY 1 ORDER BY t DESC LIMIT 3")["rows"]
    assert [r[0] for r in rows] == [r["name"] for r in top]
    findings = _sql(capsys, SAMPLE, "SELECT id, share FROM findings")["rows"]
    assert [f[0] for f in findings] == [f["id"] for f in doc["findings"]]


REFUSED = [
    "COPY slices TO 'out.csv'",
    "COPY (SELECT 1) TO 'out.parquet' (FORMAT parquet)",
    "ATTACH 'other.db' AS o",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "PRAGMA version",
    "CREATE TABLE t AS SELECT 1",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('x.parquet')",
    "SELECT * FROM '/etc/passwd'",
    "WITH x AS (SELECT * FROM read_text('/etc/hostname')) SELECT * FROM x",
    "SELECT 1; SELECT 2",
]


@pytest.mark.parametrize("query", REFUSED)
def test_refused_statements_give_one_line_and_exit_2(capsys, query):
    assert main(["sql", SAMPLE, query]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ")
    assert "refused" in err or "one statement" in err


def test_sql_errors_are_duckdbs_message_on_one_line(capsys):
    assert main(["sql", SAMPLE, "SELECT nosuch FROM slices"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nosuch" in err and "Binder Error" in err
    assert main(["sql", SAMPLE]) == 2 and "QUERY" in capsys.readouterr().err


def test_csv_text_max_rows_and_schema(capsys):
    assert main(["sql", SAMPLE, "SELECT id, name FROM ops ORDER BY id", "--csv",
                 "--max-rows", "5"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["id", "name"] and len(rows) == 6
    doc = _sql(capsys, SAMPLE, "SELECT id FROM slices", "--max-rows", "3")
    assert doc["truncated"] and len(doc["rows"]) == 3
    assert main(["sql", SAMPLE, "SELECT name, count(*) AS n FROM lanes GROUP BY 1"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == ["name", "n"] and text[-1].endswith("rows)")
    assert main(["sql", SAMPLE, "--schema"]) == 0
    schema = capsys.readouterr().out
    for word in ("slices:", "rel_start_us", "iterations:", "findings:", "kernels", "short_name"):
        assert word in schema


def _main_thread_top_level_us(capsys, iteration: int) -> tuple[str, float]:
    from sofa_gui.core.analysis.calltree import main_lane
    from sofa_gui.core.importers import load_trace

    lane = main_lane(load_trace(SAMPLE))
    q = ("SELECT l.name, sum(s.dur_us) FROM slices s JOIN lanes l ON l.id = s.lane "
         f"WHERE s.parent IS NULL AND s.iteration = {iteration} AND s.lane = {lane} GROUP BY 1")
    (name, total), = _sql(capsys, SAMPLE, q)["rows"]
    return name, total


def test_calltree_json_root_equals_the_main_threads_top_level_time(capsys):
    doc = _json(capsys, "calltree", SAMPLE, "--iteration", "2", "--json")
    name, total = _main_thread_top_level_us(capsys, 2)
    assert doc["lane"] == name and doc["scope"].startswith("iteration 2")
    root = doc["root"]
    assert root["total_us"] == pytest.approx(total, abs=1e-3)
    assert set(root) == {"name", "total_us", "self_us", "count", "share", "children"}
    assert sum(c["total_us"] for c in root["children"]) == pytest.approx(total, abs=1e-3)
    up = _json(capsys, "calltree", SAMPLE, "--iteration", "2", "--bottom-up", "--depth", "1",
               "--json")
    assert up["bottom_up"] and up["root"]["total_us"] == pytest.approx(total, abs=1e-3)
    # bottom-up: the functions' self times split the same top-level time
    assert sum(c["self_us"] for c in up["root"]["children"]) == pytest.approx(total, rel=1e-6)
    assert all(c["children"] == [] for c in up["root"]["children"])


def test_calltree_text_and_bad_arguments(capsys):
    assert main(["calltree", SAMPLE, "--steady", "--depth", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Call tree (top-down), steady state")
    assert main(["calltree", SAMPLE, "--lane", "no such thread"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matches no CPU thread" in err
    assert main(["calltree", SAMPLE, "--iteration", "999"]) == 2
    assert "out of range" in capsys.readouterr().err
    assert main(["calltree", SAMPLE, "--range", "5:1"]) == 2


def test_sql_and_calltree_load_no_qt(tmp_path):
    code = ("import sys; from sofa_gui.cli import main; "
            f"a = main(['sql', {SAMPLE!r}, 'SELECT count(*) FROM kernels']); "
            f"b = main(['calltree', {SAMPLE!r}, '--depth', '1']); "
            "bad = [m for m in ('PySide6', 'pyqtgraph', 'shiboken6') if m in sys.modules]; "
            "print('QT', a, b, bad)")
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "QT 0 0 []"
