"""Iterations found without annotations on real torch.profiler training loops.

Each capture in ``tests/data/torch-loops`` had its ProfilerStep annotations
removed; the true windows are in its sidecar. Every true step must be found
(count exact) and matched by an iteration holding >= 90% of its work (see
``loop_truth.busy_overlap``: idle time between steps belongs to either side).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from loop_truth import LOOP_NAMES, LOOPS_DIR, busy_overlap, true_windows_ns, truth

from sofa_gui.core.analysis.iterations import detect_iterations, structure_iterations
from sofa_gui.core.analysis.iterations.landmarks import Landmarks
from sofa_gui.core.importers import load_trace


@cache
def _load(name: str):
    t = load_trace(LOOPS_DIR / f"{name}.json.gz", use_cache=False)
    return t, detect_iterations(t)


def test_all_loops_are_here():
    assert len(LOOP_NAMES) == 10


@pytest.mark.parametrize("name", LOOP_NAMES)
def test_every_step_is_found_with_its_work(name):
    t, it = _load(name)
    ts, te = true_windows_ns(truth(name))
    assert it.method == "pattern"  # no annotations left in the capture
    assert len(it) == len(ts), (len(it), len(ts), it.reason)
    work = busy_overlap(t, Landmarks.of(t).main_lane, ts, te, it.starts, it.ends)
    assert work.min() >= 0.9, work.round(2)
    assert not it.uncertain and not any(it.labels)


@pytest.mark.parametrize("name", ["grad_accum", "item_loop", "rnn_unrolled", "periodic_eval",
                                  "warmup_steps", "checkpoint", "epoch_validation"])
def test_training_loops_are_cut_at_their_optimizer_updates(name):
    _, it = _load(name)
    assert it.pattern["evidence"] == "landmarks" or it.pattern.get("landmarks")
    assert "optimizer" in it.reason or it.pattern.get("landmarks") == "optimizer step"


def test_gradient_accumulation_reports_four_micro_batches():
    _, it = _load("grad_accum")
    assert it.micro_batches.tolist() == [4] * 8
    assert [x["micro_batches"] for x in it.to_dict()["items"]] == [4] * 8


def test_rnn_time_steps_and_item_calls_do_not_become_iterations():
    for name, n in (("rnn_unrolled", 16), ("item_loop", 12)):
        _, it = _load(name)
        assert len(it) == n and set(it.micro_batches.tolist()) == {1}


@pytest.mark.parametrize("name", ["item_loop", "grad_accum"])
def test_the_repeat_structure_alone_takes_the_step_not_half_of_it(name):
    # per-sample .item() calls or micro-batches repeat inside each step; a shift of half a
    # step lands on them, and two of it are a whole step: the period is still the step
    t, _ = _load(name)
    it = structure_iterations(t)
    assert abs(len(it) - len(true_windows_ns(truth(name))[0])) <= 1, it.reason


@pytest.mark.parametrize("name", ["periodic_eval", "epoch_validation", "checkpoint"])
def test_periodic_extras_are_named_with_their_cost(name):
    _, it = _load(name)
    want = truth(name)["extras"]
    assert len(it.periodic_extras) == 1
    x = it.periodic_extras[0]
    assert (x.every, x.phase) == (want["every"], want["phase"])
    assert x.iterations == list(range(want["phase"], len(it), want["every"]))
    kind = ("forward without backward" if want["kind"] == "evaluation"
            else "host time outside any profiled op")
    assert x.name.startswith(kind)
    assert x.cost_ns_mean > 0 and 0 < x.share_of_time < 1 and x.rests_on


@pytest.mark.parametrize("name", ["grad_accum", "item_loop", "rnn_unrolled", "warmup_steps",
                                  "compile_warmup", "inference_dynamic"])
def test_no_extras_where_the_loop_has_none(name):
    assert _load(name)[1].periodic_extras == []


@pytest.mark.parametrize("name", ["warmup_steps", "compile_warmup"])
def test_warmup_is_marked_and_steady_state_follows(name):
    _, it = _load(name)
    k = truth(name)["warmup"]
    assert it.warmup.tolist() == [True] * k + [False] * (len(it) - k)
    assert it.steady_state_from == k
    assert it.to_dict()["steady_state_from"] == k


@pytest.mark.parametrize("name", ["grad_accum", "item_loop", "rnn_unrolled", "periodic_eval",
                                  "checkpoint", "epoch_validation"])
def test_no_warmup_marked_on_loops_without_one(name):
    _, it = _load(name)
    assert not it.warmup.any() and it.steady_state_from == 0


def test_rnn_steps_vary_several_fold_in_length():
    """Variable-length steps: not forced to equal lengths."""
    _, it = _load("rnn_unrolled")
    d = it.durations.astype(float)
    lengths = np.array(truth("rnn_unrolled")["lengths"])
    assert lengths.max() / lengths.min() >= 4
    assert np.corrcoef(d, lengths)[0, 1] > 0.5  # longer sequences, longer steps


def test_analyze_json_carries_the_iteration_contract():
    import json
    import subprocess
    import sys

    path = LOOPS_DIR / "periodic_eval.json.gz"
    r = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", "--json", "--no-cache",
                        str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    it = json.loads(r.stdout)["iterations"]
    assert it["steady_state_from"] == 0 and it["uncertain"] is False
    (x,) = it["periodic_extras"]
    assert (x["every"], x["phase"], x["iterations"]) == (4, 3, [3, 7, 11, 15])
    assert x["cost_us_mean"] > 0 and 0 < x["share_of_time"] < 1
    for item in it["items"]:
        assert item["label"] is None and item["warmup"] is False
        assert item["micro_batches"] == 1
        assert item["device_start_us"] is None and item["device_end_us"] is None


def test_text_report_says_uncertain_below_half_confidence():
    from sofa_gui.core.analysis.iterations import iterations_text

    t, it = _load("warmup_steps")
    lines = iterations_text(t, it)
    assert "warm-up: #0..#2; steady state from #3" in "\n".join(lines)
    assert "uncertain" not in lines[0]
    it.confidence = 0.4
    try:
        assert "iterations uncertain" in iterations_text(t, it)[0]
    finally:
        it.confidence = 0.9
