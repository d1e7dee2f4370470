"""The loader plan: how many DataLoader workers and main-process threads the cores allow,
and the step they leave (the advisor's loader-workers estimate and what ``try`` applies)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sofa_gui.core.analysis.findings.loader_plan import plan, step_with
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

BEFORE = Path(__file__).resolve().parents[1] / "data" / "try" / "loader-before-2cores"


def test_with_cores_to_spare_workers_are_added_until_the_main_s_own_work_sets_the_step():
    p = plan(load=0.7, rest=0.3, paced=0.3, hand=0.0, slow=1.0, cores=8)
    assert p.workers == 3 and p.limit == "the main process's own work"
    assert p.speedup == pytest.approx(1 / 0.3)
    assert p.main_threads == 6  # the cores the three workers' mean use leaves


def test_one_worker_is_bound_by_its_batch_and_the_hand_over_is_paid_on_both_sides():
    step, limit = step_with(1, load=0.6, rest=0.4, paced=0.4, hand=0.2, slow=1.1, cores=4)
    assert limit == "the workers' loading" and step == pytest.approx(1.1 * 0.6 + 0.2)
    step, limit = step_with(4, load=0.6, rest=0.4, paced=0.4, hand=0.2, slow=1.1, cores=1.5)
    assert limit == "the free cores"
    assert step == pytest.approx((1.1 * 0.4 + 0.2 + 1.1 * 0.6 + 0.2) / 1.5)


def test_on_two_busy_cores_the_plan_says_how_little_workers_give():
    p = plan(load=0.5, rest=0.5, paced=0.5, hand=0.3, slow=1.15, cores=1.9)
    assert p.speedup < 1.1 and p.main_threads == 1
    assert plan(load=0.5, rest=0.5, paced=0.5, hand=0.0, slow=1.0, cores=1.9).speedup > 1.5


def test_fewer_workers_are_kept_when_more_do_not_help():
    p = plan(load=0.9, rest=0.1, paced=0.1, hand=0.0, slow=1.0, cores=2)
    assert p.workers == 2 and p.limit == "the free cores"
    assert plan(load=0.2, rest=0.8, paced=0.8, hand=0.0, slow=1.0, cores=16).workers == 1


def test_the_advisor_plans_the_try_s_workers_from_a_real_calibrated_before_run():
    """A BEFORE run of a try on an idle 2-core machine: the estimate is that of the plan
    (2 workers, the main process at 1 thread), with the calibration it was measured with."""
    analysis = analyze(load_trace(BEFORE, use_cache=False))
    finding = next(f for f in analysis.findings if f.id == "input_pipeline_bound")
    fix = next(f for f in finding.fixes if f.name == "loader workers")
    assert fix.settings == {"num_workers": 2, "main_threads": 1}
    assert 1.0 <= fix.estimate < 1.25  # measured without the profiler: 1.15x
    assert "num_workers=2 with the main process at 1 intra-op thread" in fix.estimate_why
    assert "host.batch_handover" in fix.estimate_why
    assert fix.to_dict()["settings"] == {"num_workers": 2, "main_threads": 1}
