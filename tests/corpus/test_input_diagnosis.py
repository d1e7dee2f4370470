"""Input-bound diagnosis on corpus captures of each kind: a loader that paces the run from
beside the step (Keras ``fit`` on a serial ``tf.data`` map, one starved DataLoader worker),
Python's ``next()`` on the loop's thread (numpy batches before a jitted JAX step), a
tf.data wait the pipeline's work does not explain (machine noise on a jitted TF step), a
parallel map whose Python holds the GIL the loop's thread needs, and the estimates of the
fixes that overlap or parallelise the input."""

from __future__ import annotations

import functools
import json

import pytest
from tracedata import DATA
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis.findings import input_pacing, make_context
from sofa_gui.core.analysis.findings.input_estimate import map_contention
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.tfdata import analyze_input_pipeline
from sofa_gui.core.importers import load_trace

CORPUS = DATA / "corpus"


@functools.cache
def analyzed(case: str, k: int = 0):
    t = load_trace(capture(case, k), use_cache=False)
    return t, analyze(t)


def input_finding(a):
    return next((f for f in a.findings if f.id == "input_pipeline_bound"), None)


def fix_named(f, name: str):
    return next(x for x in f.fixes if x.name == name)


@pytest.mark.parametrize("k", [0, 1])
def test_keras_fit_on_a_serial_map_is_input_bound_because_the_loader_paces_it(k):
    _, a = analyzed("tf_keras_fit_slow_map", k)
    f = input_finding(a)
    assert "The loader paces the run" in f.paced and "tf.data" in f.paced
    assert a.verdict.bound == "input"


def test_a_prefetch_of_a_busy_python_pipeline_is_estimated_at_about_no_gain():
    _, a = analyzed("tf_keras_fit_slow_map")
    pre = fix_named(input_finding(a), "prefetch")
    # the pipeline's threads are busy nearly all the time and its map runs Python:
    # overlapping it more gains little (measured without the profiler: 0.91x)
    assert pre.estimate <= 1.25
    assert "cannot get shorter than" in pre.estimate_why and "GIL" in pre.estimate_why


@pytest.mark.parametrize("k", [0, 1])
def test_a_parallel_map_of_python_is_input_bound_on_every_capture(k):
    # the map's py_function holds the GIL on tf.data's threads (measured without the
    # profiler: input 60.4% of the step; the augmentation in tf.image ops 2.67x faster)
    _, a = analyzed("tf_fit_pyfunc_parallel_map", k)
    assert a.verdict.bound == "input" and 0.45 <= a.verdict.share <= 0.75
    assert "The loader paces the run" in input_finding(a).paced


def test_the_loop_thread_waits_on_the_inputs_python_even_with_batches_buffered():
    # the capture's first 3 steps take batches the prefetch made before it: they fetch
    # them at once, yet the loop's thread cannot run its own Python while the map's does
    _, a = analyzed("tf_fit_pyfunc_parallel_map", 0)
    h, fetch = a.breakdown.host, a.input_pipeline.wait_ns
    gil = h.column("data_loading")[:3] - fetch[:3]
    assert (fetch[:3] < 0.01 * (h.ends - h.starts)[:3]).all()
    assert (gil > 0.1 * (h.ends - h.starts)[:3]).all()


@pytest.mark.parametrize("k", [0, 1])
def test_a_starved_loader_worker_paces_the_run_on_every_capture(k):
    _, a = analyzed("pt_train_input_nw1_starved", k)
    assert "DataLoader worker processes" in input_finding(a).paced
    assert a.verdict.bound == "input"


#: Keras ``fit`` on the FeatureSpace map (``tf_fit_featurespace_map``) captured beside a
#: busy-looping process on the two cores (``benchmarks/corpus/loaded.py``).
LOADED = DATA / "loaded" / "tf_fit_featurespace_map" / "capture-1"


def test_a_loader_that_paces_the_run_still_paces_it_on_a_loaded_machine():
    # measured on a quiet machine, without the profiler: input 0.80. Beside the busy
    # process, steps 4 and 5 of 8 find batches the loader had made ahead (compute 0.50 by
    # the shares); every 3 steps in a row wait at least 31% of their time
    a = analyze(load_trace(LOADED, use_cache=False))
    f = input_finding(a)
    assert "in 6 of the 8 steady steps and in every 3 steps in a row" in f.paced
    assert a.verdict.bound == "input" and "The loader paces" in a.verdict.basis


def test_more_steps_without_a_wait_than_the_loader_keeps_ready_do_not_pace_the_run(
        monkeypatch):
    # the same trace, read as if a loader kept one batch ready: two steps in a row
    # without a wait are more than it can serve, and the shares decide (compute 0.50)
    monkeypatch.setattr(input_pacing, "AHEAD", 1)
    a = analyze(load_trace(LOADED, use_cache=False))
    assert input_finding(a).paced == "" and a.verdict.bound == "compute"


def test_a_loader_worker_that_keeps_up_does_not_pace_the_run():
    # one worker tokenizes beside the step and keeps up (measured: compute 0.85): its
    # steps rarely wait, so nothing paces the run
    _, a = analyzed("pt_train_tokenize_collate_nw1")
    f = input_finding(a)
    assert f is None or f.paced == ""
    assert a.verdict.bound == "compute" and "The loader paces" not in a.verdict.basis


def test_a_loader_in_the_main_process_does_not_pace_it_the_shares_add_up():
    _, a = analyzed("pt_train_input_nw0")
    f = input_finding(a)
    assert f.paced == "" and a.verdict.bound == "input"
    assert "The loader paces" not in a.verdict.basis
    workers = fix_named(f, "loader workers")
    # the trace does not say how many cores: two are assumed, not one per worker
    assert "2 assumed" in workers.estimate_why and workers.estimate < 1.6


def test_python_next_on_the_loop_thread_is_an_input_fetch():
    _, a = analyzed("jax_train_input_numpy")
    host = a.breakdown.host
    share = host.column("data_loading").sum() / (host.ends - host.starts).sum()
    assert share > 0.4  # `$builtins next` into the numpy generator: was host overhead
    assert a.verdict.bound == "input"
    _, fast = analyzed("jax_train_jit")  # the same loop on cheap batches stays compute
    assert fast.verdict.bound == "compute"


def test_a_wait_the_pipeline_did_no_work_for_is_not_input():
    t, a = analyzed("tf_jit_step_noise")
    host = a.breakdown.host
    p = analyze_input_pipeline(t, host.starts, host.ends, host.lane)
    assert p.asynchronous and p.explained < 0.5  # batches held in memory, a prefetch
    f = input_finding(a)
    assert f is None or f.confidence < 0.5
    assert a.verdict.bound == "compute"


def test_a_first_wait_for_workers_that_pace_every_step_is_no_start_up():
    """Two persistent workers ``torch.load`` one file per sample (measured without the
    profiler: input 0.59). Capture-2's first step waits 14 ms longer for its batch than a
    steady one, but every steady step waits for the workers too (30% of the step): they
    are never ahead, no prefetch queue fills, so the longer first wait is no proven
    filling of one (at most a tentative first pass) and the verdict stays input."""
    _, a = analyzed("pt_train_pt_files_nw2", 1)
    assert a.verdict.bound == "input"
    start = next((f for f in a.findings if f.id == "startup_cost"), None)
    assert start is None or start.confidence < 0.5
    assert start is None or "DataLoader workers' first batches" not in start.summary


def test_a_leading_step_slow_by_its_wait_for_workers_that_are_behind_stays_steady():
    """The same capture's 24 ms first step (steps of 2.5-12 ms after it; the other capture
    has a 26 ms last one) waits 17 ms in the fetch: with the workers behind in every
    steady step it is one of the loader's slow steps, counted with the rest, so no
    start-up is read and the input share is the six steps' (0.49 over the five after it)."""
    t, a = analyzed("pt_train_pt_files_nw2", 1)
    ctx = make_context(t, a.iterations, a.breakdown, a.run)
    assert ctx.ph.warmup.tolist() == [] and ctx.ph.n_steady == 6
    assert all(f.id != "startup_cost" for f in a.findings)
    assert input_finding(a).share > 0.55
    assert a.verdict.bound == "input" and a.verdict.share > 0.55


def test_a_slow_first_step_beside_workers_that_keep_up_stays_warm_up():
    """One worker tokenizing beside a compute-bound step keeps up (the steady steps wait
    for it 8% of the time): the slow first step is no loader's slow step."""
    t, a = analyzed("pt_train_tokenize_collate_nw1")
    ctx = make_context(t, a.iterations, a.breakdown, a.run)
    assert ctx.ph.warmup.tolist() == [0]


@pytest.mark.parametrize("k", [0, 1])
def test_loader_workers_started_again_every_epoch_are_input_and_kept_by_persistent_workers(k):
    # short epochs of a DataLoader(num_workers=2) with the default persistent_workers=False:
    # each epoch's first step shuts the workers down, starts new ones in iter(loader) and
    # waits for their first batches (measured without the profiler: input 0.625; keeping
    # the workers 2.42x)
    _, a = analyzed("pt_train_workers_respawn_epochs", k)
    assert a.verdict.bound == "input"
    assert all(f.id != "periodic_extra" for f in a.findings)  # not checkpoint or eval work
    f = input_finding(a)
    assert f is a.findings[0] and f.estimated_by == "persistent workers"
    assert "started again inside the loop" in f.summary
    keep = fix_named(f, "persistent workers")
    assert "persistent_workers=True" in keep.text
    assert 2.42 / 1.25 <= keep.estimate <= 2.42 * 1.25
    # the other fixes act on the steady fetches only, which keep up
    assert fix_named(f, "more loader workers").estimate < 1.2
    jitter = next((x for x in a.findings if x.id == "iteration_jitter"), None)
    if jitter is not None:  # the slow steps are the restarts: not blamed on the machine
        assert "start the loader again" in jitter.summary
        assert "outside the program" not in jitter.summary


def test_a_loader_that_is_never_started_again_is_offered_no_persistent_workers():
    _, a = analyzed("pt_train_input_nw2_alternate")
    f = input_finding(a)
    assert all(x.name != "persistent workers" for x in f.fixes)
    assert any(x.name == "persistent workers" and "no restart" in why
               for x, why in f.hidden_fixes)


@pytest.mark.parametrize("k", [0, 1])
def test_a_cache_takes_the_starved_workers_off_the_machine_with_the_wait(k):
    # two loader workers hashing features in Python pace the run; hashed once into a tensor
    # cache the step ran 10.9x faster without the profiler: its own work no longer beside
    # busy workers (which take its core in some steps), nor cold after a long wait, nor
    # hidden behind the wait with the profiler's cost in it; Amdahl on the captured
    # shares said 3.2-4.2x
    _, a = analyzed("pt_train_getitem_nw2_starved", k)
    cache = fix_named(input_finding(a), "cache pre-processed data")
    assert abs(cache.estimate / 10.879 - 1.0) <= 0.25
    assert "go with the loading" in cache.estimate_why


@pytest.mark.parametrize("case", ["pt_train_csv_stream_nw0", "pt_train_sampler_choices"])
def test_a_cache_of_loading_done_in_the_main_process_is_amdahl_on_the_shares(case):
    # rows parsed by a single-process loader; a sampler drawing the next indices in the
    # main process after each batch arrived: the loading and the step's own work add up
    _, a = analyzed(case)
    f = input_finding(a)
    cache = fix_named(f, "cache pre-processed data")
    assert cache.estimate == pytest.approx(1.0 / (1.0 - f.share), rel=1e-3)
    assert "go with the loading" not in cache.estimate_why


@pytest.mark.parametrize("k", [0, 1])
def test_tf_ops_instead_of_a_parallel_pythons_map_are_estimated_as_its_python_gone(k):
    # a GIL-bound py_function run in parallel gains nothing from the parallelism, but
    # written in tf.image ops it holds no GIL: measured 2.67x.  The fix's own estimate
    # reads the map's Python (and the threads' waits for the GIL) as gone, not the threads'
    # time in it as work the cores still owe; the cache, which also takes the ops' work
    # off the cores, gains at least as much
    _, a = analyzed("tf_fit_pyfunc_parallel_map", k)
    f = input_finding(a)
    ops = fix_named(f, "tf.data ops in parallel")
    assert ops.estimate <= fix_named(f, "cache").estimate
    assert ops.estimate >= 2.0 and "less the map's Python" in ops.estimate_why


@pytest.mark.parametrize("k", [0, 1])
def test_a_parallel_map_of_a_serial_pipeline_counts_no_more_work_than_the_cores_do(k):
    # a serial map of image ops beside a GradientTape step on two cores: the map's two
    # pool threads and the step's two compute threads are often busy at once, and a
    # thread beyond the cores waits for one inside its event.  Counting at most the cores
    # at any instant, the parallel map's estimate lies within 25% of the parallel map +
    # prefetch measured without the profiler (1.35x); the threads' busy time summed read
    # 1.06x on the first capture
    truth = 1.347
    _, a = analyzed("tf_tape_serial_map", k)
    par = fix_named(input_finding(a), "parallel map")
    assert abs(par.estimate / truth - 1) <= 0.25, par.estimate
    assert "the pipeline's and the compute's work over the cores" in par.estimate_why


def test_work_over_the_cores_counts_at_most_the_cores_at_once():
    import numpy as np

    from sofa_gui.core.analysis.findings.input_estimate import _at_most

    def lane(*spans):
        return (np.array([a for a, _ in spans], np.int64), np.array([b for _, b in spans],
                                                                       np.int64))
    lanes = [lane((0, 10)), lane((0, 10)), lane((5, 10)), lane((20, 30))]
    ws, we = np.array([0]), np.array([100])
    assert _at_most(lanes, None, ws, we) == 35.0  # every lane's busy time
    assert _at_most(lanes, 2.0, ws, we) == 30.0  # the third lane's 5 ns waited for a core
    assert _at_most(lanes, 1.5, ws, we) == 25.0  # 10 at one core + 5 at the half core
    assert _at_most(lanes, 2.0, np.array([5]), np.array([25])) == 15.0  # inside the window
    assert _at_most([], 2.0, ws, we) == 0.0


@pytest.mark.parametrize("k", [0, 1])
def test_a_cache_gives_the_step_back_the_cores_a_parallel_maps_threads_take(k):
    # the step waits little for its prefetched batch (1-6% of it), but the map's decoding
    # threads keep most of the two cores busy beside the compute's threads (measured
    # without the profiler: cache() + prefetch 1.57x); the finding is raised for the
    # cores taken even where the wait alone is under what counts
    _, a = analyzed("tf_fit_jpeg_directory", k)
    f = input_finding(a)
    cache = fix_named(f, "cache")
    assert f.share < 0.1 and 1.25 <= cache.estimate <= 1.8
    assert "from the compute's threads" in cache.estimate_why
    assert "from the compute's threads on the shared cores" in f.summary
    assert a.verdict.bound == "compute"


@pytest.mark.parametrize("case", ["tf_keras_fit_cached", "tf_tape_tfrecord_cache"])
def test_a_pipeline_already_cached_takes_next_to_no_cores_from_the_compute(case):
    # after the first epoch the pipeline's threads only read cached elements (None: the
    # trace shows no pipeline or compute threads busy beside the step)
    t, a = analyzed(case, 0)
    c = map_contention(make_context(t, a.iterations, a.breakdown))
    assert c is None or (c[0] < 0.05 and c[1] < 0.5)


def test_a_parallel_maps_threads_beside_the_compute_take_a_share_of_its_cores():
    t, a = analyzed("tf_fit_jpeg_directory", 1)
    lost, busy, _ = map_contention(make_context(t, a.iterations, a.breakdown))
    # about 1.2 of the 2 cores busy decoding: the compute loses a fifth of the step
    assert busy > 1.0 and 0.1 <= lost <= 0.35


@pytest.mark.parametrize("k", [0, 1])
def test_a_maps_python_threads_take_the_compute_one_core_together(k):
    """Two workers in a ``py_function`` keep 1.7-1.8 cores busy as the trace counts them,
    but one runs Python while the other waits for the GIL off the cores: what the compute
    loses beside them is that of one thread, and both captures put a cache's gain near
    what the same ``fit`` on batches made once measured (the run's median step over
    that one's, 3.0x), where counting both threads read 2.9x and 4.0x."""
    t, a = analyzed("tf_fit_pyfunc_parallel_map", k)
    lost, busy, _ = map_contention(make_context(t, a.iterations, a.breakdown))
    assert busy > 1.5 and lost < 0.09
    truth = json.loads((CORPUS / "tf_fit_pyfunc_parallel_map" / "truth.json").read_text())
    measured = truth["step_ms"]["median"] / truth["bare_step_ms_median"]
    cache = fix_named(input_finding(a), "cache")
    assert abs(cache.estimate / measured - 1) <= 0.25
