"""``diff`` of runs whose iterations last 0 ns (a profiler step annotation of zero
duration): every pair gives its text and JSON, no division by a zero median, no warning."""
from __future__ import annotations

import itertools
import json
import warnings

import pytest

from sofa_gui.core.analysis.diff import diff_analyses, diff_text
from sofa_gui.core.analysis.diff_repeated import diff_repeated, repeated_text
from sofa_gui.core.analysis.pipeline import Options, analyze
from sofa_gui.core.importers import load_trace
from sofa_gui.core.json_out import dumps

#: name -> (steps, zero-length steps, with a kernel per step)
SHAPES = {"all zero": (6, set(range(6)), False), "some zero": (6, {1, 3}, False),
          "first and last zero, kernels": (6, {0, 5}, True), "none zero": (6, set(), True),
          "one zero step": (1, {0}, False)}


def _trace(folder, name):
    steps, zero, kernel = SHAPES[name]
    evs, t = [], 0.0
    for i in range(steps):
        d = 0.0 if i in zero else 100.0
        evs.append({"ph": "X", "name": f"ProfilerStep#{i}", "cat": "user_annotation",
                    "ts": t, "dur": d, "pid": 1, "tid": 1})
        if d:
            evs.append({"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": t + 1,
                        "dur": 50.0, "pid": 1, "tid": 1})
            if kernel:
                evs.append({"ph": "X", "name": "gemm", "cat": "kernel", "ts": t + 10,
                            "dur": 30.0, "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}})
        t += d
    path = folder / (name.replace(" ", "-").replace(",", "") + ".json")
    path.write_text(json.dumps({"traceEvents": evs}))
    trace = load_trace(path, use_cache=False)
    return trace, analyze(trace, Options())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zero-length")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return {name: _trace(folder, name) for name in SHAPES}


@pytest.mark.parametrize("before, after", list(itertools.product(SHAPES, SHAPES)))
def test_every_pair_diffs_without_error(runs, before, after):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a 0/0 or x/0 in numpy warns
        result = diff_analyses(runs[before], runs[after])
        lines = diff_text(result)
    assert lines
    out = json.loads(dumps(result))
    assert out["speedup"] is None or out["speedup"] > 0
    assert "inf" not in "\n".join(lines).lower().replace("info", "")


def test_repeated_pairs_with_zero_length_runs(runs):
    names = list(SHAPES)
    pairs = [(runs[a], runs[b]) for a, b in zip(names, names[1:] + names[:1])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = diff_repeated(pairs)
        assert repeated_text(result)
    json.loads(dumps(result))
