"""A long first step is start-up only when its extra work is one-off: a jitted Adam step
whose whole state is fetched and pickled every 4th step, the first profiled step being
one of those, holds the checkpoint's first run, not warm-up; and two such steps among
eight, each slower than every other and making calls no other step makes, are periodic
extra work on every capture, however much the other steps vary."""

from __future__ import annotations

import numpy as np
import pytest
from tracedata import corpus_analysis, findings_by_id

from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.iterations.recurring import recurs

CASE = "jax_train_pickle_checkpoint"


@pytest.mark.parametrize("k", [0, 1])
def test_a_checkpoint_on_the_first_step_is_the_periodic_extras_first_run(k):
    _, a = corpus_analysis(CASE, k)
    found = findings_by_id(a)
    assert "periodic_extra" in found and found["periodic_extra"].confidence >= 0.5
    assert "startup_cost" not in found or found["startup_cost"].confidence < 0.5
    assert not a.iterations.warmup[0]
    # every 4th step from the first: the checkpoint's share (measured without the
    # profiler: 0.43 of the time)
    assert 0.2 <= found["periodic_extra"].share <= 0.5
    assert a.verdict.bound == "compute"


@pytest.mark.parametrize("k", [0, 1])
def test_the_first_and_fifth_steps_are_the_extras(k):
    t, a = corpus_analysis(CASE, k)
    ctx = make_context(t, a.iterations, a.breakdown, a.run)
    assert ctx.ph.extras.tolist() == [0, 4]
    assert not len(ctx.ph.warmup)


def test_two_slowest_steps_with_calls_of_their_own_recur_within_noisy_steps():
    # capture-2's other steps vary from 7.7 to 15.4 ms: the two checkpoint steps do not
    # stand 5 robust deviations out, but each is slower than every other step and both
    # fetch the state (device_get), which no other step does
    t, a = corpus_analysis(CASE, 1)
    bd = a.breakdown
    regular = np.setdiff1d(np.arange(len(bd.durations)), [0, 4])
    ok, why = recurs(t, bd.host.lane, bd.starts, bd.ends, bd.durations, [0, 4], regular)
    assert ok and "no other iteration makes" in why
    ok, _ = recurs(t, bd.host.lane, bd.starts, bd.ends, bd.durations, [0, 7],
                   np.setdiff1d(np.arange(len(bd.durations)), [0, 7]))
    assert not ok  # step 7 is slow without the checkpoint's calls


@pytest.mark.parametrize("case", ["jax_compile_startup", "pt_train_compile_startup"])
def test_a_first_step_that_compiles_stays_warm_up(case):
    _, a = corpus_analysis(case)
    assert a.iterations.warmup[0]
    assert "startup_cost" in findings_by_id(a)
