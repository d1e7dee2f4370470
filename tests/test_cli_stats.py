"""``sofa-gui stats`` checked against counts made directly from the trace's JSON."""

from __future__ import annotations

import gzip
import json
import statistics
from collections import defaultdict
from functools import cache

import pytest

from sofa_gui.cli import main
from sofa_gui.core.samples import demo_trace_path

KEYS = {"name", "count", "total_us", "self_us", "mean_us", "median_us", "p95_us", "max_us",
        "share"}


@cache
def _events() -> tuple:
    with gzip.open(demo_trace_path()) as f:
        return tuple(json.load(f)["traceEvents"])


def _run(capsys, *args) -> dict:
    assert main(["stats", str(demo_trace_path()), *args]) == 0
    return json.loads(capsys.readouterr().out)


def _kernels(lo=None, hi=None) -> list[dict]:
    return [e for e in _events() if e.get("ph") == "X" and e.get("cat") == "Kernel"
            and "nccl" not in e["name"].lower()
            and (lo is None or lo <= e["ts"] < hi)]


def test_kernel_table_matches_the_json(capsys):
    doc = _run(capsys, "--kind", "kernel", "--top", "0", "--json")
    assert doc["kind"] == "kernel" and doc["scope"] == "whole trace"
    rows = doc["rows"]
    assert all(KEYS <= set(r) for r in rows)
    totals = [r["total_us"] for r in rows]
    assert totals == sorted(totals, reverse=True)
    kernels = _kernels()
    assert sum(r["count"] for r in rows) == len(kernels) == doc["instances"] == 8772
    assert sum(totals) == pytest.approx(sum(e["dur"] for e in kernels))
    assert sum(r["share"] for r in rows) == pytest.approx(1.0, abs=1e-4)
    by_name = defaultdict(list)
    for e in kernels:
        by_name[e["name"]].append(e["dur"])
    single = [r for r in rows if len([n for n in by_name if n == r["full_name"]]) == 1
              and r["count"] == len(by_name[r["full_name"]])]
    assert len(single) >= 10  # rows that hold exactly one raw name: compare every statistic
    for r in single:
        d = sorted(by_name[r["full_name"]])
        assert r["total_us"] == pytest.approx(sum(d))
        assert r["max_us"] == max(d)
        assert r["median_us"] == pytest.approx(statistics.median(d), abs=1e-3)
        assert r["mean_us"] == pytest.approx(sum(d) / len(d), abs=1e-3)
        assert r["p95_us"] == pytest.approx(statistics.quantiles(d, n=20, method="inclusive")[-1]
                                            if len(d) > 1 else d[0], abs=1e-3)


def test_template_arguments_are_folded_and_the_full_name_kept(capsys):
    rows = _run(capsys, "--kind", "kernel", "--json")["rows"]
    add = next(r for r in rows if r["name"] == "void at::native::vectorized_elementwise_kernel")
    assert "<" not in add["name"] and add["full_name"].startswith(add["name"] + "<4, ")
    raw = {e["name"] for e in _kernels()
           if e["name"].startswith("void at::native::vectorized_elementwise_kernel<")}
    assert len(raw) > 1  # several instantiations folded into one row
    assert add["count"] == sum(1 for e in _kernels() if e["name"] in raw)


def test_op_self_time_matches_a_stack_walk_of_the_json(capsys):
    rows = _run(capsys, "--kind", "op", "--top", "0", "--json")["rows"]
    # independent self time: per thread, each X event minus its direct children (any category)
    threads = defaultdict(list)
    for e in _events():
        if e.get("ph") == "X" and e.get("cat") in ("Operator", "Runtime", "python_function"):
            threads[(e["pid"], e["tid"])].append(e)
    self_us = defaultdict(float)
    for evs in threads.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        own: dict[int, float] = {}
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                p = stack[-1]
                own[id(p)] -= min(e["ts"] + e["dur"], p["ts"] + p["dur"]) - e["ts"]
            own[id(e)] = e["dur"]
            stack.append(e)
        for e in evs:
            if e["cat"] == "Operator" and e["name"] == "aten::add_":
                self_us["aten::add_"] += max(own[id(e)], 0)
    add = next(r for r in rows if r["name"] == "aten::add_")
    assert add["self_us"] == pytest.approx(self_us["aten::add_"])
    assert add["self_us"] < add["total_us"]


def test_iteration_scope_is_the_profiler_step_window(capsys):
    step = next(e for e in _events() if e.get("name") == "ProfilerStep#7")
    lo, hi = step["ts"], step["ts"] + step["dur"]
    by_range = _run(capsys, "--range", f"abs:{lo}:{hi}", "--top", "0", "--json")
    assert sum(r["count"] for r in by_range["rows"]) == len(_kernels(lo, hi)) > 100
    by_iter = _run(capsys, "--iteration", "2", "--top", "0", "--json")
    assert by_iter["scope"] == "iteration 2 (ProfilerStep#7), 177 ms"


def _trace_start_us() -> int:
    return min(e["ts"] for e in _events() if e.get("ph") in ("X", "B", "i", "C", "b"))


@pytest.mark.parametrize("typed, lo_us, hi_us", [
    ("0:100000", 0, 100_000),  # bare numbers: µs from the trace start
    ("120ms:250ms", 120_000, 250_000),
    ("0.12s:250000us", 120_000, 250_000),
])
def test_range_counts_from_the_trace_start_with_units(capsys, typed, lo_us, hi_us):
    t0 = _trace_start_us()
    doc = _run(capsys, "--range", typed, "--top", "0", "--json")
    expect = len(_kernels(t0 + lo_us, t0 + hi_us))
    assert sum(r["count"] for r in doc["rows"]) == expect > 50
    assert doc["scope"].startswith("range +") and "from the trace start" in doc["scope"]


def test_a_range_outside_the_trace_says_so_in_one_line(capsys):
    assert main(["stats", str(demo_trace_path()), "--range", "5s:6s"]) == 2
    err = capsys.readouterr().err
    assert "lies outside the trace" in err and "+1.17" in err and err.count("\n") == 1


def test_copies_have_bytes_and_the_rate_of_the_same_copies(capsys):
    rows = _run(capsys, "--kind", "copy", "--json")["rows"]
    copies = [e for e in _events() if e.get("cat") == "Memcpy" and e.get("ph") == "X"]
    assert sum(r["count"] for r in rows) == len(copies)
    r = rows[0]
    same = [e for e in copies if e["name"] == r["full_name"]]
    nbytes = sum(e["args"]["bytes"] for e in same)
    assert r["copy_kind"] == "host to device" and r["bytes"] == nbytes
    assert r["gbps"] == pytest.approx(nbytes / (sum(e["dur"] for e in same) * 1e3), rel=1e-3)


def test_text_and_csv_use_the_app_units(capsys):
    assert main(["stats", str(demo_trace_path()), "--kind", "copy", "--steady"]) == 0
    out = capsys.readouterr().out
    assert "steady state (iterations " in out and "GB/s" in out and "Median" in out
    assert main(["stats", str(demo_trace_path()), "--top", "2", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("name,count,total_us,self_us") and len(lines) == 3


@pytest.mark.parametrize("args, msg", [
    (["--iteration", "99"], "iteration 99 out of range (the trace has 6)"),
    (["--range", "5:1"], "--range wants START:END"),
    (["--range", "0:inf"], "--range wants START:END"),  # was an OverflowError
    (["--range=-inf:5"], "--range wants START:END"),
    (["--range", "0:1e300"], "--range wants START:END"),  # past int64 ns
    (["--range", "nan:5"], "--range wants START:END"),
    (["--top", "-1"], "--top must be >= 0"),
])
def test_bad_scope_is_one_line_and_exit_2(capsys, args, msg):
    assert main(["stats", str(demo_trace_path()), *args]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_collectives_of_a_rank_folder_match_the_json(capsys, data_dir):
    assert main(["stats", str(data_dir / "ranks"), "--kind", "collective", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    nccl = 0
    for rank in ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz"):
        with gzip.open(data_dir / "ranks" / rank) as f:
            nccl += sum(1 for e in json.load(f)["traceEvents"]
                        if e.get("cat") == "kernel" and "nccl" in e["name"].lower())
    assert doc["instances"] == nccl == sum(r["count"] for r in doc["rows"]) == 20


def test_range_scope_limits_lanes():
    from sofa_gui.core.analysis.stats import compute_table, range_scope
    from sofa_gui.core.importers import load_trace

    trace = load_trace(demo_trace_path())
    full = compute_table(trace, "kernel")
    lane = int(trace.slices.lane[full.rows[0].longest])
    t0, t1 = trace.start_ns, trace.end_ns + 1
    one = compute_table(trace, "kernel", range_scope(t0, t1, [lane]))
    assert one.scope.label == "range over 1 lanes"
    assert one.instances == int(((trace.slices.lane == lane)
                                 & (trace.slices.kind == 3)).sum()) <= full.instances
    none = compute_table(trace, "kernel", range_scope(t0, t0 + 1, [lane]))
    assert none.rows == [] and none.instances == 0
