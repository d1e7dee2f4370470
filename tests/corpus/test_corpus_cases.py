"""The diagnosis corpus (``tests/data/corpus``) is well-formed, and the run facts its
small captures prove are read right.

Each case folder holds ``truth.json`` (measured without the profiler) and at least two
captures of the same loop; ``benchmarks/diagnosis.py`` scores the advisor on all of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tracedata import DATA

from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace

CORPUS = DATA / "corpus"
BOUNDS = {"compute", "input", "communication", "host_overhead", "sync", "startup",
          "memory_copies"}
TRUTH_KEYS = ("case", "split", "framework", "mode", "description", "facts", "bound",
              "bound_share", "shares", "step_ms", "phases_ms", "noise", "fix", "captures",
              "generator", "machine")
CASES = sorted(p.parent.name for p in CORPUS.glob("*/truth.json"))


def truth_of(name: str) -> dict:
    return json.loads((CORPUS / name / "truth.json").read_text())


def size_of(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(
        p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_the_corpus_spans_frameworks_modes_and_bounds_with_a_third_or_more_held_out():
    truths = [truth_of(n) for n in CASES]
    assert len(truths) >= 30
    assert {t["framework"] for t in truths} == {"pytorch", "tensorflow", "jax"}
    assert {t["mode"] for t in truths} == {"training", "inference"}
    assert {t["bound"] for t in truths} >= {"compute", "input", "communication",
                                            "host_overhead", "sync", "startup",
                                            "memory_copies"}
    held = sum(t["split"] == "holdout" for t in truths)
    # enough tuned cases to write rules on, enough held out to judge them
    assert 0.3 <= held / len(truths) <= 0.7
    # about 118 MB with the TensorFlow / JAX captures stored gzip-compressed (0.41 MB a
    # case on average); new cases aim at 0.15 MB a capture so the corpus keeps growing in
    # programs, not in bytes, in a clone that stays small
    assert sum(size_of(CORPUS / n) for n in CASES) < 128e6


@pytest.mark.parametrize("name", CASES)
def test_truth_is_complete_and_consistent(name):
    t = truth_of(name)
    assert [k for k in TRUTH_KEYS if k not in t] == []
    assert t["case"] == name and t["split"] in ("tuned", "holdout")
    assert t["bound"] in BOUNDS
    assert t["shares"][t["bound"]] == t["bound_share"]
    assert t["bound_share"] == max(v for k, v in t["shares"].items() if k in BOUNDS)
    # a sampler that fits nothing (an Ising model's Metropolis sweeps) states no mode
    assert t["facts"]["framework"] == t["framework"]
    assert t["facts"].get("mode", t["mode"]) == t["mode"]
    assert 0 < t["step_ms"]["median"] and t["noise"]["round_spread"] >= 0
    if t["fix"] is not None:
        assert t["fix"]["speedup"] > 0 and len(t["fix"]["speedup_rounds"]) >= 2
        variants = t["fix"].get("variants")
        if variants:  # every setting measured in the same rounds, the fix's own among them
            assert variants[t["fix"]["what"]]["speedup"] == t["fix"]["speedup"]
            assert {len(v["speedup_rounds"]) for v in variants.values()} == \
                {len(t["fix"]["speedup_rounds"])}
    busy = t["noise"].get("others_cores")
    if busy is not None:  # the rounds kept were measured with other processes quiet
        assert set(busy) >= {"run"} and all(
            x is None or x <= 0.2 for xs in busy.values() for x in xs), busy
    assert len(t["captures"]) >= 2


@pytest.mark.parametrize("name", CASES)
def test_every_capture_opens(name):
    for cap in truth_of(name)["captures"]:
        path = CORPUS / name / cap
        assert size_of(path) < 1.5e6, f"{path} is over 1.5 MB"
        trace = load_trace(path, use_cache=False)
        assert len(trace.slices) > 100, path


#: Facts today's analyzer proves on these small captures (truth key -> run fact value).
FACTS = {
    "pt_infer_batched_convnet": {"framework": "pytorch", "mode": "inference", "device": "cpu"},
    "pt_train_compute_cnn": {"framework": "pytorch", "mode": "training",
                             "dataloader": "single_process"},
    "pt_train_adamw_foreach": {"mode": "training", "optimizer": "foreach"},
    "pt_ddp_gloo_straggler": {"framework": "pytorch", "ranks": 2, "collectives": "gloo"},
    "tf_keras_fit_slow_map": {"framework": "tensorflow", "mode": "training",
                              "tf_data_parallel": "serial"},
}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_run_facts_of_small_captures_match_the_truth(name):
    t = truth_of(name)
    cap = CORPUS / name / t["captures"][0]
    path = cap / "rank0.json.gz" if (cap / "rank0.json.gz").exists() else cap
    run = run_facts(load_trace(path, use_cache=False))
    got = {k: run.value(k) for k in FACTS[name]}
    assert got == FACTS[name]


def _generator_splits() -> dict[str, str]:
    """Each case's ``split`` as its generator registers it, read from the call's own text
    (the generators import the frameworks, which the tests do not need)."""
    splits = {}
    for path in sorted((Path(__file__).parents[2] / "benchmarks" / "corpus").glob("*.py")):
        text = path.read_text()
        for m in re.finditer(r'\b\w*case\(\s*"([a-z0-9_]+)"', text):
            end, depth = m.end(), 1
            while depth:
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            held = 'split="holdout"' in text[m.start():end]
            splits[m.group(1)] = "holdout" if held else "tuned"
    return splits


def test_generators_register_each_case_with_the_split_its_truth_records():
    """A regenerated truth keeps the case's split: a case moved to tuned stays tuned."""
    splits = _generator_splits()
    assert [n for n in CASES if n not in splits] == []
    assert {n: splits[n] for n in CASES if splits[n] != truth_of(n)["split"]} == {}
