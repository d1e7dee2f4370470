"""A JAX batch made by the loop's own ``jnp.array`` from a Python list of samples before the
jitted step is input (the list walked in Python), offered ``np.stack`` and one conversion,
estimated from the walk's time without the profiler; one numpy batch converted with
``jnp.asarray`` is a copy into a device buffer, not input.  Conversions inside a library
call (JAX's indexing converting an index) are not the loop's.

Cases of the diagnosis corpus (``tests/data/corpus``); a test is skipped when the corpus is
not checked out.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tracedata import DATA
from tracedata import corpus_context as analyzed

from sofa_gui.core.analysis.findings.list_conversion import walked_conversions
from sofa_gui.core.analysis.host_side import JAX_CONVERSION, MIN_WALK_EVENTS

CORPUS = DATA / "corpus"
WITHIN = 0.25
FIX = "one conversion per batch"


def _input_finding(a):
    return next((f for f in a.findings if f.id == "input_pipeline_bound"), None)


def _loop_conversions(t, ctx) -> np.ndarray:
    """The main thread's conversions the breakdown counts as input."""
    dl = ctx.bd.host.role_slices["data_loading"]
    return dl[np.isin(t.slices.name[dl], t.name_ids(JAX_CONVERSION.match))]


@pytest.mark.parametrize("k", [0, 1])
def test_a_batch_converted_from_a_list_each_step_is_input(k):
    t, a, ctx = analyzed("jax_train_list_batches", k)
    assert a.verdict.bound == "input"
    conv, events = walked_conversions(ctx, ctx.bd.host)
    assert len(conv) == 2 * len(ctx.rows)  # images and labels, every steady step
    assert events.min() >= MIN_WALK_EVENTS
    f = _input_finding(a)
    fix = next(x for x in f.fixes if x.name == FIX)
    measured = json.loads((CORPUS / "jax_train_list_batches" / "truth.json").read_text())
    assert abs(fix.estimate / measured["fix"]["speedup"] - 1.0) <= WITHIN


def _copied(t, ctx) -> np.ndarray:
    """The main thread's conversions the breakdown counts as host-to-device copies."""
    mc = ctx.bd.host.role_slices["memcpy"]
    return mc[np.isin(t.slices.name[mc], t.name_ids(JAX_CONVERSION.match))]


@pytest.mark.parametrize("case", ["jax_train_input_numpy", "jax_train_jit",
                                  "jax_train_asarray_log_every10"])
def test_one_numpy_batch_converted_is_a_copy_with_no_walk_to_remove(case):
    """``jnp.asarray`` of one numpy batch, called beside the jitted step, flattens no list:
    a copy of the batch already made into a device buffer, not its making, and no list is
    walked, so the one-conversion fix is not offered."""
    t, a, ctx = analyzed(case, 0)
    assert not len(_loop_conversions(t, ctx))
    assert len(_copied(t, ctx)) >= 2 * len(ctx.rows)  # the batch's two arrays each step
    assert not len(walked_conversions(ctx, ctx.bd.host)[0])
    f = _input_finding(a)
    assert f is None or all(x.name != FIX for x in f.fixes)


@pytest.mark.parametrize("k", [0, 1])
def test_copies_of_numpy_batches_beside_queued_steps_are_no_input_bound(k):
    """Batches gathered with numpy fancy indexing and converted with ``jnp.asarray`` each
    step, the loss read every 10th: the conversions read as copies (0.04-0.05 of the
    steady steps, 0.04 measured), the gather as input (0.01-0.02, 0.03 measured), and no
    confident input finding is left where both together once read 0.06-0.07."""
    t, a, ctx = analyzed("jax_train_asarray_log_every10", k)
    assert a.verdict.bound == "compute"
    assert a.verdict.shares["memory_copies"] == pytest.approx(0.045, abs=0.015)
    assert a.verdict.shares["input"] < 0.03
    f = _input_finding(a)
    assert f is None or f.confidence < 0.5


@pytest.mark.parametrize("case", ["jax_train_input_numpy", "jax_train_text_generator"])
def test_numpy_batches_made_in_the_loop_stay_input(case):
    """Where the loop's own numpy work makes the batch (per-sample preprocessing, a
    tokenizing generator) the input reading stays, its conversion a copy beside it."""
    _, a, _ = analyzed(case, 0)
    assert a.verdict.bound == "input"
    f = _input_finding(a)
    assert f is not None and f.confidence >= 0.5


def test_a_conversion_inside_a_library_call_is_not_the_batch():
    """The diffusion loop's ``jnp.asarray`` calls run inside JAX's indexing (an index
    converted), not in the loop's code beside the jitted step."""
    t, a, ctx = analyzed("jax_train_diffusion_noise_loop", 0)
    s = t.slices
    assert np.isin(s.name, t.name_ids(JAX_CONVERSION.match)).any()
    assert not len(_loop_conversions(t, ctx))


@pytest.mark.parametrize("k", [0, 1])
def test_removing_a_batch_made_in_traced_python_is_read_without_the_tracer(k):
    """The conversions' walk records some 22,800 tracer frames a step, the rest of the step
    about 60: the cache's Amdahl reads both without the tracer's cost per event, near
    what the measured input share (0.65) gives, not the captured share's 5.5x."""
    _, a, _ = analyzed("jax_train_list_batches", k)
    fix = next(x for x in _input_finding(a).fixes if x.name == "cache pre-processed data")
    truth = json.loads((CORPUS / "jax_train_list_batches" / "truth.json").read_text())
    removed = 1.0 / (1.0 - truth["shares"]["input"])
    assert abs(fix.estimate / removed - 1.0) <= WITHIN


def test_a_numpy_batch_converted_with_a_dtype_is_a_copy_not_the_batchs_making():
    """``jnp.array(x, dtype=jnp.float32)`` of a float64 numpy batch beside the jitted step
    leaves JAX's no-copy fast path and flattens its one array as a tree of one leaf (a
    ``tree_flatten`` inside, 127-129 frames in all): no list walked, so a host-to-device
    copy, as without the dtype; the list walks of the test above stay input."""
    from sofa_gui.core.analysis.findings import make_context
    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.importers import load_trace

    t = load_trace(next((DATA / "jax-typed-conversion").rglob("*.xplane.pb.gz")),
                   use_cache=False)
    a = analyze(t)
    ctx = make_context(t, a.iterations, a.breakdown, a.run)
    s = t.slices
    conv = np.flatnonzero(np.isin(s.name, t.name_ids(JAX_CONVERSION.match)))
    walk = t.name_ids(lambda n: n.endswith(" tree_flatten"))
    assert len(conv) == 2 * len(a.iterations) and np.isin(s.name, walk).any()
    assert not len(_loop_conversions(t, ctx)) and len(_copied(t, ctx)) == len(conv)
    assert a.verdict.shares["input"] == 0 and a.verdict.shares["memory_copies"] > 0
