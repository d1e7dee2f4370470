"""Per-iteration marks on real torch.profiler captures, given the true step windows.

The captures (``tests/data/torch-loops``) are small CPU training loops; their
true step windows come from the ProfilerStep annotations recorded before they
were removed. Marks must hold whatever found the windows.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from loop_truth import LOOPS_DIR, true_windows_ns, truth

from sofa_gui.core.analysis.iterations.marks import mark_iterations
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.importers import load_trace


@cache
def _trace(name: str):
    return load_trace(LOOPS_DIR / f"{name}.json.gz", use_cache=False)


def marked(name: str) -> Iterations:
    ts, te = true_windows_ns(truth(name))
    return mark_iterations(_trace(name), Iterations("annotations", "truth", ts, te, 1.0))


def test_micro_batches_count_backward_passes_per_optimizer_step():
    assert marked("grad_accum").micro_batches.tolist() == [4] * 8
    assert set(marked("periodic_eval").micro_batches.tolist()) == {1}
    assert marked("rnn_unrolled").micro_batches.tolist() == [1] * 16


def test_inference_has_no_backward_so_micro_batches_are_unknown():
    d = marked("inference_dynamic").to_dict()
    assert all(item["micro_batches"] == 0 or item["micro_batches"] is None
               for item in d["items"])


@pytest.mark.parametrize("name", ["periodic_eval", "epoch_validation", "checkpoint"])
def test_periodic_extras_follow_the_loop_schedule(name):
    t = truth(name)["extras"]
    it = marked(name)
    assert len(it.periodic_extras) == 1
    x = it.periodic_extras[0]
    n = len(it)
    assert (x.every, x.phase) == (t["every"], t["phase"])
    assert x.iterations == [i for i in range(n) if i % t["every"] == t["phase"]]
    assert x.cost_ns_mean > 0 and 0 < x.share_of_time < 1
    if t["kind"] == "evaluation":
        assert x.name.startswith("forward without backward (evaluation?)")
    else:
        assert x.name.startswith("host time outside any profiled op")


@pytest.mark.parametrize("name", ["grad_accum", "item_loop", "rnn_unrolled", "warmup_steps",
                                  "compile_warmup", "inference_dynamic"])
def test_no_periodic_extras_where_the_loop_has_none(name):
    assert marked(name).periodic_extras == []


def test_warmup_steps_are_marked_and_the_steady_state_starts_after_them():
    it = marked("warmup_steps")
    assert it.warmup.tolist() == [True] * 3 + [False] * 9
    assert it.steady_state_from == 3
    assert it.steady.tolist() == list(range(3, 12))


def test_compile_warmup_marks_the_compiling_step():
    it = marked("compile_warmup")
    assert it.warmup[0] and not it.warmup[1:].any() and it.steady_state_from == 1


def test_json_contract_of_marked_iterations():
    d = marked("periodic_eval").to_dict()
    assert d["steady_state_from"] == 1 or d["steady_state_from"] == 0
    x = d["periodic_extras"][0]
    assert set(x) >= {"every", "phase", "name", "cost_us_mean", "share_of_time", "iterations"}
    for item in d["items"]:
        assert set(item) >= {"label", "warmup", "micro_batches", "device_start_us",
                             "device_end_us"}
        assert item["device_start_us"] is None  # a CPU-only capture launches no device work
    assert d["uncertain"] is False


def test_uncertain_below_half_confidence():
    z = np.array([0, 10], np.int64)
    assert Iterations("pattern", "", z, z + 5, 0.49).uncertain
    assert not Iterations("pattern", "", z, z + 5, 0.5).uncertain
    assert not Iterations.none("", "nothing").uncertain
