"""A tf.data pipeline that never gets ahead makes a slow step anywhere: where an uncached
pipeline's threads feed the run and the steady steps wait for their batch 20% of the time
or more, a leading step slow by its wait for the next batch is one of the pipeline's slow
steps, not a start, and counts with the steady steps (as for DataLoader workers).

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import pytest
from tracedata import corpus_analysis, corpus_fix_speedup, findings_by_id

from sofa_gui.core.analysis.findings.steady import BEHIND, loader_waits, phases

ROWS_MAPPED = "tf_fit_map_rows_before_batch"


def _phases(a, waits=True):
    bd = a.breakdown
    return phases(a.iterations, bd.durations, bd.whole_trace,
                  loader_waits(bd, a.run) if waits else None)


def test_leading_steps_slow_by_their_wait_for_an_uncached_pipeline_are_steady():
    """Keras ``fit`` on a serial per-row map before ``batch``: the second capture's first
    three steps (9.0-10.9 ms, 6.4-7.7 ms of it waiting for the batch) sit before three of
    3.4-4.8 ms that still wait 0.47 of their time, and the truth's rounds hold steps of
    1.5-8.3 ms anywhere.  Read as warm-up, they left the estimate 2.79x (3.81x measured,
    4.05x on the first capture) and a start-up finding for a pipeline with no first pass."""
    _, a = corpus_analysis(ROWS_MAPPED, 1)
    d, waits = a.breakdown.durations, loader_waits(a.breakdown, a.run)
    assert waits is not None and len(waits) == len(d) == 6
    assert _phases(a, waits=False).warmup.tolist() == [0, 1, 2]  # as warm-up it was
    assert waits[3:].sum() >= BEHIND * d[3:].sum()
    ph = _phases(a)
    assert ph.warmup.tolist() == [] and ph.n_steady == 6
    found = findings_by_id(a)
    assert "startup_cost" not in found
    measured = corpus_fix_speedup(ROWS_MAPPED)
    assert found["input_pipeline_bound"].estimated_speedup == pytest.approx(measured, rel=0.25)


def test_the_other_capture_reads_as_before():
    _, a = corpus_analysis(ROWS_MAPPED, 0)
    assert _phases(a).warmup.tolist() == [] == _phases(a, waits=False).warmup.tolist()
    assert findings_by_id(a)["input_pipeline_bound"].estimated_speedup == pytest.approx(
        corpus_fix_speedup(ROWS_MAPPED), rel=0.25)


def test_a_cached_pipelines_first_pass_stays_warm_up():
    """A pipeline with a cache stage fills it on its first pass: its first steps' wait is
    one-off, and no wait is read for the steady phases (a TFRecord file parsed, cached)."""
    _, a = corpus_analysis("tf_tape_tfrecord_cache", 1)
    assert a.run.value("tf_data_cache") == "cache"
    assert loader_waits(a.breakdown, a.run) is None
    assert _phases(a).warmup.tolist() == [0]
    assert "startup_cost" in findings_by_id(a)


@pytest.mark.parametrize("k", [0, 1])
def test_an_uncached_pipelines_slow_start_stays_warm_up(k):
    """Keras ``fit`` on a CSV file read through ``make_csv_dataset`` (no cache stage): its
    first steps (35-39 ms, then 4.5-5.9 ms, among steps of 1.6-3.5 ms) open and start
    reading the file, and the steady steps do not wait for the pipeline 20% of the time or
    their excess is not wait: they stay warm-up, as without the waits."""
    _, a = corpus_analysis("tf_fit_csv_dataset", k)
    assert a.run.value("tf_data_cache") == "none"
    assert loader_waits(a.breakdown, a.run) is not None
    assert _phases(a).warmup.tolist() == [0, 1] == _phases(a, waits=False).warmup.tolist()
