"""A step whose inner loop runs as many times as its data needs is as long as that count:
k-means fits that stop at a tolerance run 38, 18 and 26 jitted updates in three steps of
14.1, 7.8 and 10.9 ms, and the longest, first, step is a longer step, not start-up (no
new call, no slower call). A first step that compiles stays warm-up, and so does one that
is slower per repetition of a loop that varies."""

from __future__ import annotations

import numpy as np
import pytest
from tracedata import corpus_analysis, corpus_context, findings_by_id

from sofa_gui.core.analysis.findings import steady

CASE = "jax_train_kmeans_tol_check"


def test_repeats_count_the_inner_loop_of_each_step():
    _, a = corpus_analysis(CASE, 1)
    rep = a.iterations.repeats
    # the main thread's most repeated call runs twice per jitted update (38, 18, 26;
    # the buffer waits, with or without the step's one assignment call)
    assert np.abs(rep - 2 * np.array([38, 18, 26])).max() <= 2 and steady._varies(rep)


@pytest.mark.parametrize("k", [0, 1])
def test_a_first_step_with_more_repetitions_is_not_start_up(k):
    _, a, ctx = corpus_context(CASE, k)
    assert not len(ctx.ph.warmup) and ctx.ph.n_steady == 3
    found = findings_by_id(a)
    assert "startup_cost" not in found
    assert a.verdict.bound == "compute" and a.verdict.shares["startup"] == 0.0


@pytest.mark.parametrize("case", ["jax_compile_startup", "pt_train_compile_startup"])
def test_steps_with_a_fixed_loop_count_keep_their_warm_up(case):
    _, a, ctx = corpus_context(case)
    rep = a.iterations.repeats
    assert rep is not None and not steady._varies(rep[1:])
    assert ctx.ph.warmup.tolist() == [0]
    assert found_confident(a, "startup_cost")


def found_confident(a, rule: str) -> bool:
    f = findings_by_id(a).get(rule)
    return f is not None and f.confidence >= 0.5


class _Iters:
    def __init__(self, repeats):
        self.repeats = np.asarray(repeats)


def test_a_leading_step_slower_per_repetition_stays_warm_up():
    d = np.array([14.1, 7.8, 10.9])
    # as k-means: as fast per update as the others
    assert steady._leading_outliers(_Iters([38, 18, 26]), d).warmup.tolist() == []
    # the same step with as many updates as the others: slower per update
    assert steady._leading_outliers(_Iters([20, 18, 26]), d).warmup.tolist() == [0]
    # later steps that run their loop a fixed number of times: the durations decide
    assert steady._leading_outliers(_Iters([38, 20, 20]), d).warmup.tolist() == [0]
    assert steady._leading_outliers(None, d).warmup.tolist() == [0]
