"""Estimates against measured fixes, and variation that is only the run's own noise, on
real captures of the diagnosis corpus (``tests/data/corpus``): a loop of element reads
is estimated on its share, less what one bulk read still converts, within 25% of the fix
measured without the profiler; steps that make the same calls, slower, and do not stand
apart from the other steps are no confident jitter.  A test is skipped when the corpus
is not checked out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sofa_gui.core.analysis.findings.read_rules import BULK_NS_PER_VALUE
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
WITHIN = 0.25


def truth(case: str) -> dict:
    path = CORPUS / case / "truth.json"
    if not path.exists():
        pytest.skip(f"corpus case {case} not in tests/data/corpus")
    return json.loads(path.read_text())


def analyzed(case: str, k: int):
    return analyze(load_trace(CORPUS / case / truth(case)["captures"][k], use_cache=False))


def finding(a, fid: str):
    return next((f for f in a.findings if f.id == fid), None)


def test_a_bulk_read_still_costs_each_value():
    assert 10 <= BULK_NS_PER_VALUE <= 100  # .tolist() and the Python consuming it


@pytest.mark.parametrize("k", [0, 1])
def test_a_per_sample_loss_log_estimate_meets_the_measured_fix(k):
    """Per-sample losses logged one .item() at a time: Amdahl on the loops' share, less
    what the one .tolist() of the fix still converts, is within a quarter of the fix
    measured without the profiler."""
    measured = truth("pt_train_loss_log_item")["fix"]["speedup"]
    f = finding(analyzed("pt_train_loss_log_item", k), "host_reads_in_loop")
    assert f is not None
    assert abs(f.estimated_speedup / measured - 1) <= WITHIN, (f.estimated_speedup, measured)
    assert f.estimated_speedup <= 1 / (1 - f.share) + 1e-6


def test_jitter_within_the_runs_own_noise_is_not_confident():
    """A compute-bound CNN on a loaded machine: its slow steps make the same calls, slower,
    and do not stand apart from the others' spread."""
    f = finding(analyzed("pt_train_compute_cnn", 0), "iteration_jitter")
    assert f is None or f.confidence < 0.5
    if f is not None:
        assert "step-to-step noise" in f.summary

