"""A repeated, uncached tf.data pipeline starts a new pass over its data every records-per-
pass / batch steps: the step in which the source's iterator is made again beneath the
repeat waits for the whole pass's parsing.  That step recurs, so it is no warm-up, and a
cache that serves later passes removes it: the cache's estimate counts it once per pass."""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, findings_by_id

from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.findings.input_estimate import pass_rows

CASE = "tf_fit_csv_dataset"


def _cache_estimate(a) -> float:
    f = findings_by_id(a)["input_pipeline_bound"]
    return next(x for x in f.fixes if x.name == "cache").estimate


@pytest.mark.parametrize("k", [0, 1])
def test_a_csv_files_new_pass_is_read_as_a_recurring_wait_for_input(k):
    t, a = corpus_analysis(CASE, k)
    ctx = make_context(t, a.iterations, a.breakdown, a.run)
    assert pass_rows(ctx).tolist() == [0]  # "Profiled batch step 8": not the program's first
    assert a.verdict.bound == "input"
    # the cache after one pass: 6.1x measured without the profiler; the steady steps'
    # wait alone gave 1.35x and 1.67x
    assert 3.0 <= _cache_estimate(a) <= 7.0
    assert "new pass over the data" in findings_by_id(a)["startup_cost"].summary


@pytest.mark.parametrize("case", ["tf_keras_fit_cached", "tf_fit_validation_epochs",
                                  "tf_fit_jpeg_directory"])
def test_iterators_made_over_a_cache_or_a_whole_pipeline_are_no_new_pass(case):
    # a cache serves the later passes; an iterator made for the pipeline's root is a new
    # iter() over the dataset (an epoch of its own), not a repeat's next pass
    t, a = corpus_analysis(case)
    ctx = make_context(t, a.iterations, a.breakdown, a.run)
    assert not len(pass_rows(ctx))
