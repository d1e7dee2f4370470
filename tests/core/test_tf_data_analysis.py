"""tf.data input-pipeline analysis and the TF/JAX advice, on the real captures in
tests/data/tf (ground truth in ground_truth.json, measured when they were recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.analysis.tfdata import analyze_input_pipeline
from sofa_gui.core.importers import load_trace

TF = Path(__file__).resolve().parents[1] / "data" / "tf"
TRUTH = json.loads((TF / "ground_truth.json").read_text())

# case -> (bottleneck stage, parallel, prefetch, cache, python source)
PIPELINES = {
    "generator": ("Generator", False, True, False, "from_generator"),
    "serial_map": ("MapAndBatch", False, False, False, ""),
    "step_markers": ("MapAndBatch", False, False, False, ""),
    "parallel_prefetch": ("MapAndBatch", True, True, False, ""),
    "cached": (None, False, True, True, ""),
    "cached_xla": (None, False, True, True, ""),
}
#: Fix texts that must (+) or must not (-) be shown, by their opening words.
MOVE_TO_OPS, PARALLELISE = "Move the Python preprocessing", "Parallelise the slow stage"
PREFETCH, CACHE = "End the pipeline with .prefetch", "If the preprocessed elements fit"
MORE_CPU, XLA = "The pipeline already runs in parallel", "Compile the step with XLA"
JAX_JIT = "jax.jit the whole train step"
INPUT_FIXES = {
    "generator": ({MOVE_TO_OPS, CACHE}, {PARALLELISE, PREFETCH, MORE_CPU}),
    "serial_map": ({PARALLELISE, PREFETCH, CACHE}, {MOVE_TO_OPS, MORE_CPU}),
    "step_markers": ({PARALLELISE, PREFETCH, CACHE}, {MOVE_TO_OPS, MORE_CPU}),
    "parallel_prefetch": ({MORE_CPU, CACHE}, {MOVE_TO_OPS, PARALLELISE, PREFETCH}),
}


@pytest.fixture(scope="module")
def analyzed():
    out = {}

    def get(case):
        if case not in out:
            t = load_trace(TF / case, use_cache=False)
            out[case] = (t, analyze(t))
        return out[case]
    return get


def _shown(finding) -> list[str]:
    return [f.text for f in finding.fixes]


def _has(texts: list[str], opening: str) -> bool:
    return any(t.startswith(opening) for t in texts)


@pytest.mark.parametrize("case", sorted(PIPELINES))
def test_stage_tree_and_bottleneck(case, analyzed):
    t, a = analyzed(case)
    host = a.breakdown.host
    p = analyze_input_pipeline(t, host.starts, host.ends, host.lane)
    stage, parallel, prefetch, cache, python = PIPELINES[case]
    assert (p.parallel, p.prefetch, p.cache, p.python) == (parallel, prefetch, cache, python)
    kinds = [st.kind for st in p.ordered()]
    assert kinds[0] == "Root" and p.stages[p.roots[0]].depth == 0
    # repeat() makes a new input iterator each epoch: still one stage in the tree
    assert len(kinds) == len(set(kinds)) or "MemoryCache" in kinds
    if stage is not None:
        b = p.bottleneck_stage
        assert b.kind == stage and b.own_ns == max(st.own_ns for st in p.stages.values()
                                                   if st.depth >= b.depth)
    # per-iteration input wait: the main thread's IteratorGetNext time, as measured in Python
    truth = TRUTH[case]
    assert p.wait_share == pytest.approx(truth["input_share"], abs=0.15)
    assert len(p.wait_ns) == len(a.iterations)


def test_generator_input_is_named_python(analyzed):
    t, a = analyzed("generator")
    p = analyze_input_pipeline(t, a.breakdown.host.starts, a.breakdown.host.ends,
                               a.breakdown.host.lane)
    assert p.bottleneck_stage.python and "from_generator" in p.bottleneck_stage.label
    assert p.injected_prefetch  # tf.data inserted it; the user did not write one
    assert "Python input (from_generator)" in p.sentence()
    facts = run_facts(t)
    assert facts.value("tf_data") == "python" and facts.value("tf_data_parallel") == "python"
    assert facts.get("tf_data").slice >= 0  # clickable proof: the Generator GetNext


@pytest.mark.parametrize("case", sorted(INPUT_FIXES))
def test_input_bound_runs_get_the_input_finding_with_the_stage_and_fitting_fixes(case,
                                                                                analyzed):
    t, a = analyzed(case)
    assert TRUTH[case]["input_bound"]
    top = a.findings[0]  # the top finding itself, not the first per-step one
    assert top.id == "input_pipeline_bound" and top.severity == "high"
    stage = PIPELINES[case][0]
    assert top.causes[0].label.startswith(f"bottleneck stage {stage}")
    assert f"Bottleneck stage: {stage}" in top.summary
    assert top.share == pytest.approx(TRUTH[case]["input_share"], abs=0.15)
    must, never = INPUT_FIXES[case]
    shown = _shown(top)
    assert all(_has(shown, m) for m in must), shown
    assert not any(_has(shown, n) for n in never), shown
    # the hidden ones say why (the pipeline already does it / does not apply)
    hidden = [f.text for f, _ in top.hidden_fixes]
    assert all(_has(hidden, n) for n in never if n != MORE_CPU or case != "serial_map")


@pytest.mark.parametrize("case,xla", [("cached", False), ("cached_xla", True),
                                      ("jax_train", True)])
def test_compute_bound_runs_get_xla_advice_only_without_xla(case, xla, analyzed):
    t, a = analyzed(case)
    assert not TRUTH[case]["input_bound"]
    ids = [f.id for f in a.findings]
    assert "input_pipeline_bound" not in ids
    top = a.findings[0]  # the top finding itself: no jitter or slow start above it
    assert top.id == "compute_bound"
    assert (run_facts(t).value("compiled") == "xla") == xla
    shown = _shown(top)
    assert _has(shown, XLA) == (not xla and case != "jax_train")
    assert not _has(shown, JAX_JIT)
    if xla:
        hidden = [f.text for f, why in top.hidden_fixes if "already done" in why]
        assert any(h.startswith(XLA if case != "jax_train" else JAX_JIT) for h in hidden) \
            or case == "jax_train"
    # the causes are the ops the step's thread pools run, not Python-side wrappers
    names = [c.label for c in top.causes]
    assert names and not any(n.startswith(("train_step", "TFE_", "np.asarray", "Eager"))
                             for n in names)


def test_jax_and_tf_runs_have_their_frameworks(analyzed):
    assert run_facts(analyzed("jax_train")[0]).value("framework") == "jax"
    facts = run_facts(analyzed("cached")[0])
    assert facts.value("framework") == "tensorflow" and facts.value("mode") == "training"
    assert facts.value("cpu_cores") == 2  # tf.data's CPU budget on the 2-core machine


def test_no_tf_data_no_pipeline(analyzed):
    t, a = analyzed("jax_train")
    assert analyze_input_pipeline(t) is None
    assert run_facts(t).value("tf_data") is None


def test_stage_own_times_add_up_to_the_events(analyzed):
    t, _ = analyzed("parallel_prefetch")
    p = analyze_input_pipeline(t)
    s = t.slices
    ids = t.name_ids(lambda n: n.startswith("Iterator::"))
    total = int(s.dur[np.isin(s.name, ids)].sum())
    assert sum(st.total_ns for st in p.stages.values()) == total
    assert all(0 <= st.own_ns <= st.total_ns for st in p.stages.values())


#: The top finding of every capture, and what may follow it (ids in rank order).
TOP = {"generator": "input_pipeline_bound", "serial_map": "input_pipeline_bound",
       "step_markers": "input_pipeline_bound", "parallel_prefetch": "input_pipeline_bound",
       "cached": "compute_bound", "cached_xla": "compute_bound", "jax_train": "compute_bound"}


@pytest.mark.parametrize("case", sorted(TOP))
def test_every_capture_reads_its_bottleneck_first(case, analyzed):
    _, a = analyzed(case)
    assert len(TOP) == len(list(p for p in TF.iterdir() if p.is_dir()))
    assert a.findings[0].id == TOP[case], [(f.id, f.rank_key) for f in a.findings]


@pytest.mark.parametrize("case", ["cached", "cached_xla", "parallel_prefetch"])
def test_jitter_of_same_calls_slower_is_tentative_and_ranks_after(case, analyzed):
    """These runs' slow steps make the same calls as the others, each slower (the shared
    machine): the jitter says so, is marked tentative and never leads."""
    from sofa_gui.core.analysis.findings import MINOR, TENTATIVE, rank_tier
    _, a = analyzed(case)
    jit = next(f for f in a.findings if f.id == "iteration_jitter")
    assert jit.tentative and "same calls as the others" in jit.summary
    assert rank_tier(jit) in (TENTATIVE, MINOR)
    assert a.findings.index(jit) > 0
    if rank_tier(jit) == MINOR:
        assert "noise floor" in jit.confidence_why


def test_slow_start_without_one_off_calls_is_tentative(analyzed):
    """jax_train's first 4 profiled steps (warm-up ran before the profile) make the same
    calls as later ones, slower: not sold as first-use compilation."""
    _, a = analyzed("jax_train")
    st = next(f for f in a.findings if f.id == "startup_cost")
    assert st.tentative and "same calls as later ones" in st.summary
    assert st.confidence <= 0.45 and a.findings.index(st) > 0
