"""The whole diagnosis corpus, scored as ``benchmarks/diagnosis.py`` scores it: every
capture analyses, names no bottleneck its truth lacks with confidence (0 confident false
positives), reads the same bound on both captures, and names the measured bound, but for
the cases whose truth the trace cannot decide and the held-out misses no rule has
been studied against yet (strict xfails, with why: a mended reading fails them, and its
case's entry goes)."""

from __future__ import annotations

import json

import pytest
from tracedata import CORPUS

CASES = sorted(p.parent.name for p in CORPUS.glob("*/truth.json"))

#: Verdicts the trace cannot get right, and why (docs/diagnosis.md, "The misses").
UNDECIDED = {
    "tf_tape_serial_map": "a near tie (compute 0.51, input 0.49 on an idle machine, its "
                          "rounds straddling 0.5); the main thread waits for the loader in "
                          "every steady step",
    "pt_ddp_gloo_large_allreduce": "the trace shows rank 0 in or waiting for its all-reduce "
                                   "at most 0.50 of the step against 0.51 measured; the rest "
                                   "is backward slowed beside gloo's threads, shown as compute",
    "pt_ddp_gloo_small_buckets": "communication 0.60 measured (what the loop without DDP "
                                 "saves); the trace shows rank 0 in or waiting for its "
                                 "all-reduces 0.46 and 0.43 of the step, the rest is compute "
                                 "slowed beside gloo's threads on two cores, shown as compute",
    "pt_ddp_gloo_fp16_compress_hook": "communication 0.56 measured (what the loop without DDP "
                                      "saves); the trace shows rank 0 in or waiting for its "
                                      "all-reduces 0.39 and 0.45 of the step, the rest is "
                                      "compute slowed beside gloo's threads on two cores, "
                                      "shown as compute",
    "pt_ddp_gloo_sparse_embedding": "communication 0.66 measured (what the loop without DDP "
                                    "saves); the trace shows rank 0 waiting for the sparse "
                                    "all-reduce 0.35 of the step (rank 1 0.39-0.43: 9-12 ms, "
                                    "the all-reduce alone 11.7 ms), the rest is SparseAdam "
                                    "updating every rank's rows of the reduced gradient "
                                    "(0.44-0.54), of whose rows 0.45 are the other "
                                    "rank's (gloo:sparse_all_reduce records each rank's "
                                    "rows and the sum's), which no rule weighs yet",
    "pt_ddp_gloo_moe_all_to_all": "a near tie (communication 0.50 by what the loop with "
                                  "both experts local and no collective saves, its rounds "
                                  "0.43-0.54); the trace shows the ranks in or waiting for "
                                  "the all_to_all and all-reduces 0.39-0.41 of the step, "
                                  "the rest their own work, 2-3 ms a step over that loop's",
    "jax_train_mf_scatter_no_donate": "memory copies 0.81 measured (donate_argnums, "
                                      "5.23x); the trace names XLA's copy thunks, 0.36 "
                                      "and 0.15 of the step, not the fresh 41 MB output "
                                      "buffer first touched every call (in the thunk "
                                      "executor's own time), which donation removes too: "
                                      "read compute, the copies named beside it",
}
#: Of those, the cases whose captures read the tie apart (one reading per case fails too).
SPLIT: tuple[str, ...] = ()


#: Findings of a fix the truth does not measure, so their bound is not among its shares,
#: and why they hold: case -> why (a strict xfail of the false-positive test).
UNMEASURED: dict[str, str] = {
    "pt_infer_float64_weights_cast_per_call": "small-batch op overhead (0.08 of the first "
                                              "capture's step, confidence 0.7): one-row "
                                              "requests, whose batching the truth does not "
                                              "measure; it measures the weights cast once "
                                              "(memory copies 0.58), which the verdict reads",
}


#: Held-out cases read wrong before any rule looked at them (docs/diagnosis.md, "First
#: looks"): test -> {case: what the advisor says instead}.
HELD_OUT_MISSES: dict[str, dict[str, str]] = {
    "false_positive": {
    },
    "verdict": {
        "pt_infer_reload_checkpoint_per_request": "start-up 0.87 measured (the model built "
                                                  "and loaded once, 16.4x); the rebuild's "
                                                  "uniform_ and copy_ ops and the gaps of "
                                                  "torch.load around them read as compute 1.0",
        "pt_infer_json_pixel_lists": "input 0.96 measured (base64 bytes, 26.1x); the "
                                     "json.loads and torch.tensor(lists) gaps, no op, 85% "
                                     "of the step, read as compute",
        "tf_fit_string_lookup_in_model": "compute 0.90 measured (cached batches 1.12x, "
                                         "the lookups in tf.data 1.14x); both captures "
                                         "read input 0.33, the per-row TensorSlice stage "
                                         "paced under the profiler",
        "tf_infer_tflite_invoke_loop": "host overhead 0.64 measured (one invoke per batch, "
                                       "2.81x); the profiler records only the tf.data "
                                       "iterator, read as compute on both captures",
        "pt_infer_gpt_no_kv_cache": "compute 0.65 measured (8 prompts batched without a "
                                    "cache, per prompt, 1.55-1.65x: per-op overhead "
                                    "0.35); both captures read host overhead 0.54, a "
                                    "share of the captured step, the profiler's cost "
                                    "of its 3,500 events a step (a quarter) in it",
        "pt_infer_sklearn_metrics_per_batch": "host overhead 0.64 measured (the metrics once "
                                              "a pass, 2.62x); the per-batch scikit-learn "
                                              "calls record no op, a 4.1-7.8 ms gap (about half "
                                              "the captured step) at each step's end, read "
                                              "as compute 0.78",
    },
}


def _param(name: str, test: str):
    """``name`` as a parameter of ``test``, a strict xfail where the case is a known miss."""
    why = (UNDECIDED.get(name) if test == "verdict" or name in SPLIT
           else UNMEASURED.get(name))
    why = why or HELD_OUT_MISSES[test].get(name)
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(name, marks=marks, id=name)


@pytest.fixture(scope="module")
def scored(diag):
    kept: dict[str, dict] = {}

    def score(name: str) -> dict:
        if name not in kept:
            truth = json.loads((CORPUS / name / "truth.json").read_text())
            kept[name] = diag.score_case(CORPUS / name, truth)
        return kept[name]
    return score


@pytest.mark.parametrize("name", [_param(n, "false_positive") for n in CASES])
def test_no_confident_false_positive_and_one_reading_per_case(name, scored):
    result = scored(name)
    rows = result["captures"]
    assert [r.get("error") for r in rows if "error" in r] == []
    assert [r["false_positives"] for r in rows if r["false_positives"]] == []
    assert result["stable"], [r["predicted"] for r in rows]


@pytest.mark.parametrize("name", [_param(n, "verdict") for n in CASES])
def test_the_verdict_names_the_measured_bound(name, scored):
    result = scored(name)
    assert [r["predicted"] for r in result["captures"]] == [result["truth"]] * len(
        result["captures"])
