"""One warm-up marking on every surface: the advisor's.

The iteration detector marks leading warm-up itself; the advisor's steady set
(``findings.steady.phases``) starts from those marks and adds what the detector does
not see: leading outliers, the loader's waits. On these real captures of the
diagnosis corpus the two part, and the iterations every surface reads (JSON, CLI
text, SQL, the steady-state scope) must carry the advisor's, the one the verdict and
the findings use, while the advisor keeps reading the detector's own marks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.analysis import stats
from sofa_gui.core.analysis.findings.steady import loader_waits, phases
from sofa_gui.core.analysis.iterations.text import iterations_text
from sofa_gui.core.analysis.pipeline import advisor_warmup, analyze, verdict_of
from sofa_gui.core.importers import load_trace
from sofa_gui.core.units import fmt_ns_exact

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"

#: capture -> (the detector's steady-state start, the advisor's)
CASES = {
    # a first step slow by its wait for DataLoader workers that are behind in every
    # step: one of the loader's slow steps, steady for the advisor
    "pt_train_pt_files_nw2/capture-2.json.gz": (1, 0),
    # a first step far slower than the rest, which the detector keeps as steady
    "pt_train_tokenize_collate_nw1/capture-1.json.gz": (0, 1),
    # a Keras fit over a CSV dataset: the advisor leaves its second step out too
    "tf_fit_csv_dataset/capture-1": (1, 2),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def analyzed(request):
    path = CORPUS / request.param
    if not path.exists():
        pytest.skip("no diagnosis corpus")
    trace = load_trace(path, use_cache=False)
    return request.param, trace, analyze(trace)


def _advisor_rows(a) -> np.ndarray:
    bd = a.breakdown
    return phases(a.iterations, bd.durations, False, loader_waits(bd, a.run)).warmup


def test_the_iterations_carry_the_advisors_warmup(analyzed):
    name, _trace, a = analyzed
    detected, advised = CASES[name]
    it = a.iterations
    assert it.detected_from == detected and it.detector_from == detected
    assert np.flatnonzero(it.warmup).tolist() == list(range(advised))
    assert _advisor_rows(a).tolist() == list(range(advised))
    assert a.warmup.tolist() == list(range(advised))  # the part that says so
    assert it.steady_state_from == advised and int(it.steady[0]) == advised


def test_the_json_marks_the_advisors_warmup(analyzed):
    name, trace, a = analyzed
    advised = CASES[name][1]
    doc = a.to_dict(trace)
    items = doc["iterations"]["items"]
    assert [i for i, x in enumerate(items) if x["warmup"]] == list(range(advised))
    assert doc["iterations"]["steady_state_from"] == advised
    assert "warmup" not in doc  # the iterations carry it


def test_the_text_and_the_steady_scope_use_the_advisors_steady_state(analyzed):
    name, trace, a = analyzed
    advised = CASES[name][1]
    it = a.iterations
    text = "\n".join(iterations_text(trace, it))
    assert ("  warm-up: #0..#" in text) == bool(advised)
    steady = it.durations[advised:].astype(float)
    assert f"mean {fmt_ns_exact(steady.mean())}" in text
    assert f"min {fmt_ns_exact(steady.min())}" in text
    scope = stats.steady_scope(it)
    assert scope.label == f"steady state (iterations {advised}-{len(it) - 1})"
    assert scope.start_ns == int(it.starts[advised])


def test_the_sql_iterations_table_marks_the_advisors_warmup(analyzed):
    from sofa_gui.core.query.db import TraceDB

    name, trace, a = analyzed
    advised = CASES[name][1]
    res = TraceDB(trace, a).run("SELECT index, warmup FROM iterations ORDER BY index")
    assert [int(i) for i, warm in res.rows if warm] == list(range(advised))


def test_marking_again_reads_the_detectors_marks_and_changes_nothing(analyzed):
    """The advisor's rule reads the detector's start, not the marking shown: the verdict
    computed again, and the marking made again, are the same."""
    name, _trace, a = analyzed
    detected, advised = CASES[name]
    it = a.iterations
    assert verdict_of(it, a.breakdown, a.findings, a.run).to_dict() == a.verdict.to_dict()
    it.mark_warmup(len(it))  # whatever is shown, the advisor reads the detector's marks
    assert advisor_warmup(it, a.breakdown, a.run).tolist() == list(range(advised))
    it.mark_warmup(advised)
    assert it.detected_from == detected and it.steady_state_from == advised
    assert verdict_of(it, a.breakdown, a.findings, a.run).to_dict() == a.verdict.to_dict()


@pytest.mark.parametrize("command", ["stats", "calltree"])
def test_the_cli_steady_scope_starts_after_the_advisors_warmup(capsys, command):
    from sofa_gui.cli import main

    path = CORPUS / "tf_fit_csv_dataset" / "capture-1"
    if not path.exists():
        pytest.skip("no diagnosis corpus")
    assert main([command, str(path), "--steady", "--no-cache"]) == 0
    assert "steady state (iterations 2-7)" in capsys.readouterr().out
