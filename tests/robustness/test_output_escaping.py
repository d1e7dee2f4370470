"""Names from a trace cannot forge lines or formulas: every text output escapes control
characters (line breaks included) inside a line, and ``stats --csv`` writes a cell that
starts like a formula as text."""
from __future__ import annotations

import csv
import io
import json

import pytest
from hostile import run_cli

FORGED = "error: forged line"
THREAD = f"loader\n{FORGED}\r\x1b[2K"
OPS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2", "@SUM(A1)", f"op\n{FORGED}", "aten::mm"]


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("names")
    evs = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": THREAD}}]
    for step in range(8):
        t = step * 1000.0
        evs.append({"ph": "X", "name": f"ProfilerStep#{step}", "cat": "user_annotation",
                    "ts": t, "dur": 900.0, "pid": 1, "tid": 1})
        evs += [{"ph": "X", "name": op, "cat": "cpu_op", "ts": t + 10 + k * 100, "dur": 80.0,
                 "pid": 1, "tid": 1} for k, op in enumerate(OPS)]
    path = folder / f"run\n{FORGED}.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    return path


def _no_forged_line(text: str):
    for line in text.splitlines():
        assert not line.startswith(FORGED[:6]), line
        assert "\x1b" not in line and "\r" not in line


@pytest.mark.parametrize("args", [["analyze"], ["stats", "--kind", "op"], ["diff"]])
def test_text_outputs_escape_line_breaks_in_names(hostile_trace, args):
    paths = [str(hostile_trace)] * (2 if args == ["diff"] else 1)
    proc = run_cli([args[0], "--no-cache", *paths, *args[1:]])
    assert proc.returncode == 0, proc.stderr[-1500:]
    _no_forged_line(proc.stdout)
    _no_forged_line(proc.stderr)
    if args == ["analyze"]:
        assert "loader\\x0aerror: forged line\\x0d\\x1b[2K" in proc.stdout


def test_csv_cells_that_look_like_formulas_are_text(hostile_trace):
    proc = run_cli(["stats", "--no-cache", str(hostile_trace), "--kind", "op", "--csv"])
    assert proc.returncode == 0, proc.stderr[-1500:]
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    cells = {r[c] for r in rows for c in ("name", "full_name")}
    assert "'=HYPERLINK" in cells and "'+1+1" in cells and "'-2" in cells
    assert "'@SUM" in cells and "aten::mm" in cells
    assert not [c for c in cells if c.startswith(("=", "+", "-", "@"))]
    assert any("op\\x0aerror: forged line" in c for c in cells)
    assert len(proc.stdout.splitlines()) == len(rows) + 1  # no cell spans two lines


def test_csv_cell_rules():
    from sofa_gui.core.analysis.stats import csv_cell

    assert csv_cell(-1.5) == -1.5 and csv_cell(None) == "" and csv_cell(3) == 3
    assert csv_cell("=1+2") == "'=1+2" and csv_cell("\t=1") == "'\t=1"
    assert csv_cell("a\nb") == "a\\x0ab" and csv_cell("plain") == "plain"


def test_markdown_report_breakdown_lines_are_escaped(hostile_trace, tmp_path):
    out = tmp_path / "report.md"
    proc = run_cli(["report", "--no-cache", str(hostile_trace), "-o", str(out)])
    assert proc.returncode == 0, proc.stderr[-1500:]
    _no_forged_line(out.read_text())
