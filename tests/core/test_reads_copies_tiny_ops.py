"""Host reads, host copies and tiny ops, each on real captures of its kind: loops of
element reads are ``sync`` (PyTorch ``.item()`` per sample, JAX ``float(x[k, j])`` per
element), large re-layout copies on the host are memory copies, and the per-op overhead
rule neither takes a read loop for tiny ops nor counts a loaded machine's preemptions as
dispatch cost.

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sofa_gui.core.analysis.findings.copy_rules import LARGE_BYTES, copy_bytes
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = DATA / "corpus"
CONFIDENT = 0.5


def capture(case: str, k: int = 0) -> Path:
    truth = CORPUS / case / "truth.json"
    if not truth.exists():
        pytest.skip(f"corpus case {case} not in tests/data/corpus")
    return CORPUS / case / json.loads(truth.read_text())["captures"][k]


def analyzed(case: str, k: int = 0):
    return analyze(load_trace(capture(case, k), use_cache=False))


def finding(a, fid: str):
    return next((f for f in a.findings if f.id == fid), None)


def confident(a, fid: str) -> bool:
    f = finding(a, fid)
    return f is not None and f.confidence >= CONFIDENT


# -- loops of element reads ---------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1])
def test_a_per_sample_item_metric_is_sync_not_op_overhead(k):
    a = analyzed("pt_train_item_sync", k)
    reads = finding(a, "host_reads_in_loop")
    assert reads is not None and reads.share > 0.5
    assert reads.summary.startswith("1,536 element reads per steady-state iteration")
    assert "once per batch" in reads.summary
    assert reads.estimated_speedup > 2
    assert not confident(a, "op_overhead_bound")  # the selects picking each element
    assert a.verdict.bound == "sync" and a.verdict.share > 0.5


def test_jax_element_reads_are_sync_and_counted_per_step():
    a = analyzed("jax_infer_readback")
    assert len(a.iterations) == 4  # the steps, not the 256 reads
    reads = finding(a, "host_reads_in_loop")
    assert reads is not None
    assert reads.summary.startswith("64 element reads per steady-state iteration")
    assert "in 4 loops of 64 reads" in reads.summary
    assert 0.5 < reads.share < 1.0
    assert any("jax.device_get" in x.text for x in reads.fixes)
    assert a.verdict.bound == "sync"


def test_a_metric_read_once_per_step_is_no_read_loop():
    a = analyzed("pt_train_adamw_foreach")  # loss.item() once per step, AdamW's own reads
    assert finding(a, "host_reads_in_loop") is None
    assert a.verdict.bound == "compute"


# -- memory-bound copies on the host ------------------------------------------------------
def test_copy_bytes_reads_shapes_types_and_tensor_lists():
    assert copy_bytes({"Input Dims": [[32, 256, 256], []], "Input type": ["float", "Scalar"]}) \
        == 32 * 256 * 256 * 4
    assert copy_bytes({"Input Dims": [[[4, 8], [4, 8]], []],
                       "Input type": ["TensorList", "Scalar"]}) == 2 * 32 * 4
    assert copy_bytes({"Input Dims": [[2, 2]], "Input type": ["c10::BFloat16"]}) == 8
    assert copy_bytes(None) == 0 and copy_bytes({"Input Dims": "x"}) == 0


@pytest.mark.parametrize("k", [0, 1])
def test_a_per_step_relayout_is_memory_copies(k):
    a = analyzed("pt_train_memcopy", k)
    f = finding(a, "memory_copy_bound")
    assert f is not None and f.share > 0.5 and f.confidence >= CONFIDENT
    assert any("aten::contiguous" in e.label for e in f.evidence)
    assert "MB copied per iteration" in f.summary
    assert a.verdict.bound == "memory_copies"


@pytest.mark.parametrize("k", [0, 1])
def test_a_tensor_grown_by_cat_each_step_reads_its_own_cooling(k):
    """An evaluation pass that grows two tensors with ``torch.cat`` every batch: its steps'
    copies run from none to 80 ms, and the model's matmuls take the same time after long
    copies as after none, so the estimate keeps the rest's time instead of assuming it runs
    warmer, and meets the fix (lists, one ``torch.cat`` per pass) measured without the
    profiler."""
    case = "pt_infer_cat_growing_preds"
    a = analyzed(case, k)
    f = finding(a, "memory_copy_bound")
    assert f is not None and f.confidence >= CONFIDENT and a.verdict.bound == "memory_copies"
    assert "as this capture's steps with short copies" in f.summary
    measured = json.loads((CORPUS / case / "truth.json").read_text())["fix"]["speedup"]
    assert abs(f.estimated_speedup / measured - 1) <= 0.25, (f.estimated_speedup, measured)


def test_copies_alike_every_step_leave_the_cooling_assumed():
    """A per-step re-layout copies alike every step: the capture holds no step without
    them, cannot show the cooling, and the estimate assumes the measured one."""
    f = finding(analyzed("pt_train_memcopy"), "memory_copy_bound")
    assert f is not None and "runs warmer" in f.summary
    assert "this capture's steps" not in f.summary


@pytest.mark.parametrize("case", ["pt_train_autocast_bf16", "pt_infer_bf16",
                                  "pt_train_compute_cnn"])
def test_casts_and_small_copies_of_compute_bound_runs_are_no_copy_finding(case):
    a = analyzed(case)
    assert not confident(a, "memory_copy_bound")
    assert a.verdict.bound == "compute"


def test_large_bytes_is_a_mebibyte():
    assert LARGE_BYTES == 1 << 20


# -- tiny ops -----------------------------------------------------------------------------
def test_preempted_instances_of_tiny_ops_are_not_dispatch_cost():
    """A transformer layer on variable-length batches (compute-bound) captured on a machine
    loaded 11 deep: AdamW's per-tensor ops are tiny, and a few of them were held 50-150 ms
    while the thread waited for a core; that wait is not dispatch cost."""
    a = analyze(load_trace(DATA / "advice" / "preempted-tiny-ops.json.gz", use_cache=False))
    assert not confident(a, "op_overhead_bound")
    assert a.verdict.bound == "compute"


def test_a_loop_of_tiny_matmuls_is_op_overhead():
    t = load_trace(DATA / "advice" / "tiny_ops.json.gz", use_cache=False)
    a = analyze(t)
    f = finding(a, "op_overhead_bound")
    assert f is not None and f.share > 0.5
    assert a.verdict.bound == "host_overhead"
