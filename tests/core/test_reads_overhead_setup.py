"""Host read-back loops, per-call overhead and framework set-up told apart, on real captures
of each kind: tensors formatted into text (``str(tensor)`` reads every value it prints),
TensorFlow rows read one at a time (the trace records the eager pick, not the read), a
tiny model decoding one unbatched request at a time, and Keras ``fit`` called once per
batch (its tf.data pipeline and iterator built on every call are set-up, not input).

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from tracedata import DATA, corpus_capture

from sofa_gui.core.analysis.findings import batching, make_context, read_rules, small_batch
from sofa_gui.core.analysis.findings.index_reads import element_op_reads, indexing_reads
from sofa_gui.core.analysis.findings.read_calls import PY_READ, TORCH_READ
from sofa_gui.core.analysis.findings.read_rules import PICK_OP, in_read_loops
from sofa_gui.core.analysis.findings.registry import RULES
from sofa_gui.core.analysis.findings.work import op_kind
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

CORPUS = DATA / "corpus"
CONFIDENT = 0.5


@functools.cache
def analyzed(case: str, k: int = 0):
    t = load_trace(corpus_capture(case, k), use_cache=False)
    return t, analyze(t)


def finding(a, fid: str):
    return next((f for f in a.findings if f.id == fid), None)


def confident(a, fid: str) -> bool:
    f = finding(a, fid)
    return f is not None and f.confidence >= CONFIDENT


# -- what a read is -------------------------------------------------------------------------
@pytest.mark.parametrize("name, read", [
    ("aten::is_nonzero", True), ("aten::item", True), ("aten::select", False),
    ("<built-in method item of Tensor object at 0x7fdc681f2030>", True),
    ("<built-in method numpy of Tensor object at 0x7fdc681f1c70>", True),
    ("<built-in method size of Tensor object at 0x7fdc681f1c70>", False),
    ("torch/_tensor.py(1052): __format__", True), ("torch/_tensor_str.py(702): _str", True),
    ("torch/nn/modules/module.py(1779): _call_impl", False),
    ("$array.py:298 __float__", True), ("$ops.py:410 _numpy", True)])
def test_reads_of_every_framework_and_tracer_are_named(name, read):
    assert bool(TORCH_READ.match(name) or PY_READ.match(name)) is read


@pytest.mark.parametrize("names, pick", [
    (("aten::squeeze", "EagerLocalExecute: Squeeze", "PjitFunction(squeeze)"), True),
    (("aten::reshape", "EagerLocalExecute: Reshape", "PjitFunction(reshape)"), True),
    (("aten::slice", "EagerLocalExecute: Slice"), True),
    (("EagerLocalExecute: StridedSlice", "EagerLocalExecute: GatherV2"), True),
    (("aten::unsqueeze", "EagerLocalExecute: ExpandDims", "PjitFunction(expand_dims)"), True),
    (("aten::_local_scalar_dense", "PjitFunction(dynamic_slice)"), True),
    (("aten::mm", "EagerLocalExecute: MatMul", "aten::gather", "EagerLocalExecute: AddV2",
      "PjitFunction(dot_general)", "Squeeze", "StridedSlice"), False)])
def test_the_ops_that_pick_an_element_are_one_table_for_every_frameworks_spelling(names, pick):
    # TensorFlow spells its eager ops in CamelCase; the kinds are the same ops
    assert all((op_kind(n) in PICK_OP) is pick for n in names)


@pytest.mark.parametrize("name, kind", [
    ("aten::squeeze", "squeeze"), ("EagerLocalExecute: Squeeze", "squeeze"),
    ("PjitFunction(_squeeze)", "squeeze"), ("EagerLocalExecute: StridedSlice", "strided_slice"),
    ("EagerLocalExecute: GatherV2", "gather_v2"), ("aten::_local_scalar_dense",
                                                    "local_scalar_dense"),
    ("Squeeze", ""), ("autograd::engine::evaluate_function: SelectBackward0", "")])
def test_an_ops_kind_is_spelt_one_way(name, kind):
    assert op_kind(name) == kind


# -- tensors formatted into text: a loop of reads ----------------------------------------------
@pytest.mark.parametrize("k", [0, 1])
def test_tensors_formatted_into_a_report_are_a_read_loop_with_their_statistics(k):
    t, a = analyzed("pt_infer_report_tensors", k)
    f = finding(a, "host_reads_in_loop")
    assert f is not None and f.share > 0.5
    assert a.verdict.bound == "sync"
    assert not confident(a, "op_overhead_bound")
    # the statistics str(tensor) computes before it prints the values are the reading's
    ctx = make_context(t, a.iterations, a.breakdown)
    s = t.slices
    stats = np.flatnonzero(np.isin(s.name, t.name_ids(lambda n: n in (
        "aten::isfinite", "aten::masked_select"))))
    stats = stats[ctx.in_steady(s.start[stats], a.breakdown.host.starts,
                                a.breakdown.host.ends)]
    assert len(stats) and in_read_loops(ctx, s.start[stats]).all()


@pytest.mark.parametrize("model, read", [
    (("aten::linear", "aten::addmm"), "aten::item"),
    (("TFE_Py_ExecuteCancelable", "EagerLocalExecute: __inference_decode_step_12"),
     "EagerLocalExecute: StridedSlice")])
def test_a_model_pass_between_two_reads_ends_the_loop(model, read):
    """A decode loop reading one token per pass: the same calls recur between every two
    reads, but a matmul (or a compiled function's call) among them makes each read one per
    pass of the model."""
    from test_findings import Synth

    def decode(with_model: bool):
        s = Synth()
        for i in range(4):
            t0 = i * 2000
            s.step(t0, 2000)
            for k in range(24):
                t = t0 + 10 + 80 * k
                if with_model:
                    s.host(t, 40, model[0])
                    s.host(t + 2, 35, model[1])
                s.host(t + 45, 5, "aten::select")
                s.host(t + 55, 3, read)
        return {f.id for f in s.analyze()[2]}

    assert "host_reads_in_loop" in decode(with_model=False)
    assert "host_reads_in_loop" not in decode(with_model=True)


def test_a_loop_of_ops_that_reads_along_is_no_read_loop():
    """Per element, a read beside four computing ops (a loss per box, its matched cell read
    to index with it): the loop is the ops' fixed cost, which batching the work removes;
    the same reads with only their pick between them stay a read loop."""
    from test_findings import Synth

    def loop(ops: tuple[str, ...]):
        s = Synth()
        for i in range(4):
            t0 = i * 4000
            s.step(t0, 4000)
            for k in range(24):
                t = t0 + 10 + 150 * k
                for m, name in enumerate(ops):
                    s.host(t + 20 * m, 15, name)
                s.host(t + 100, 5, "aten::select")
                s.host(t + 110, 3, "aten::item")
        return {f.id for f in s.analyze()[2]}

    assert "host_reads_in_loop" in loop(())
    assert "host_reads_in_loop" not in loop(("aten::sub", "aten::prod", "aten::maximum",
                                              "aten::smooth_l1_loss"))


@pytest.mark.parametrize("k", [0, 1])
def test_a_per_box_loss_reading_its_index_tensors_is_op_overhead_not_reads(k):
    """A detection loss looping over each image's boxes reads each matched cell (a 0-d
    index tensor) to Python, about 0.5 µs a read among the per-box ops: the loop is the
    ops' per-op overhead, batching the loss is the fix, and its estimate promises a gain."""
    t, a = analyzed("pt_train_box_loss_loop", k)
    assert not confident(a, "host_reads_in_loop")
    f = finding(a, "op_overhead_bound")
    assert f is not None and f.confidence >= CONFIDENT and f.share > 0.5
    assert f.estimated_speedup > 1.5
    assert a.verdict.bound == "host_overhead"
    ctx = make_context(t, a.iterations, a.breakdown)
    s = t.slices
    items = np.flatnonzero(s.name == t.name_ids(lambda n: n == "aten::item")[0])
    assert len(items) and not in_read_loops(ctx, s.start[items]).any()


@pytest.mark.parametrize("k", [0, 1])
def test_a_confusion_matrix_counted_sample_by_sample_is_op_overhead_not_reads(k):
    """A hand-written confusion matrix adds one to ``mat[t, p]`` per sample: indexing with
    the 0-d tensors reads each index into Python (four reads a sample) between an in-place
    add and the copy back.  On a CPU the reads wait on nothing; the loop is the updates'
    per-op overhead, which one bincount a batch removes (2.30x measured)."""
    t, a = analyzed("pt_infer_metric_objects_eval", k)
    assert not confident(a, "host_reads_in_loop")
    f = finding(a, "op_overhead_bound")
    assert f is not None and f.confidence >= CONFIDENT and f.share > 0.5
    assert 2.30 * 0.75 <= f.estimated_speedup <= 2.30 * 1.25
    assert a.verdict.bound == "host_overhead"
    ctx = make_context(t, a.iterations, a.breakdown)
    s = t.slices
    items = np.flatnonzero(s.name == t.name_ids(lambda n: n == "aten::item")[0])
    assert len(items) > 1000 and not in_read_loops(ctx, s.start[items]).any()


def _reads_out_of_read_loops(case: str, k: int, read: str, kind):
    """(analysis, how many ``read`` calls, the share of them ``kind`` counts) for a capture
    whose reads of that name fall in no read loop and raise no read-loop finding."""
    t, a = analyzed(case, k)
    assert finding(a, "host_reads_in_loop") is None
    ctx = make_context(t, a.iterations, a.breakdown)
    s = t.slices
    reads = np.flatnonzero(s.name == t.name_ids(lambda n: n == read)[0])
    assert not in_read_loops(ctx, s.start[reads]).any()
    mine = t.lane_slices(ctx.bd.host.lane)
    mine = mine[np.argsort(s.start[mine], kind="stable")]
    return a, len(reads), kind(ctx, mine, reads).mean()


@pytest.mark.parametrize("k", [0, 1])
def test_a_gold_path_indexed_with_0d_tensors_is_op_overhead_not_reads(k):
    """The BiLSTM-CRF tutorial scores the gold path position by position,
    ``transitions[tags[i + 1], tags[i]] + feat[tags[i + 1]]``: each 0-d index is read into
    Python (``aten::item`` of a ``long int``) and picks from another tensor at once.  On a
    CPU the reads wait on nothing; the loop is the indexed ops' fixed cost, which a
    batch gathering the gold scores removes: no read loop, op overhead."""
    a, n, share = _reads_out_of_read_loops("pt_train_bilstm_crf_tagger", k, "aten::item",
                                           indexing_reads)
    assert a.verdict.bound == "host_overhead"
    assert n > 300 and share > 0.5


@pytest.mark.parametrize("k", [0, 1])
def test_a_decode_comparing_path_elements_is_op_overhead_not_reads(k):
    """A greedy CTC decode walks each best path position by position, ``bool(t[i] !=
    0)``: a pick, a comparison on 0-d operands, and a read of its 0-d result.  On a CPU
    the comparison ran on the same thread just before: the read waits on nothing, the
    loop is the element ops' fixed cost (one ``.tolist()`` removes them all), so it is
    no read loop, and the model's math keeps the verdict."""
    a, n, share = _reads_out_of_read_loops("pt_infer_crnn_ctc_decode_loop", k,
                                           "aten::is_nonzero", element_op_reads)
    assert a.verdict.bound == "compute"
    assert n > 1000 and share > 0.9


@pytest.mark.parametrize("case", ["pt_infer_readback", "pt_infer_report_tensors",
                                  "pt_train_log_tensors"])
def test_reads_of_elements_handed_to_python_are_no_indexing_reads(case):
    """Reads whose next call picks the next element of the tensor read (or no pick at
    all) hand values to Python, and reads of a row's result (a row's max) read what an
    op on a row computed, no element op's; the formatting compares a few elements (under
    a fifth of its reads): they stay a read loop."""
    t, a = analyzed(case, 0)
    ctx = make_context(t, a.iterations, a.breakdown)
    loops = read_rules.read_loops(ctx)
    s = t.slices
    mine = t.lane_slices(ctx.bd.host.lane)
    mine = mine[np.argsort(s.start[mine], kind="stable")]
    assert len(loops.reads) and indexing_reads(ctx, mine, loops.reads).mean() < 0.1
    assert element_op_reads(ctx, mine, loops.reads).mean() < 0.2
    assert confident(a, "host_reads_in_loop")


@pytest.mark.parametrize("case", ["pt_infer_readback", "pt_infer_report_tensors"])
def test_a_read_loop_that_computes_but_writes_nothing_stays_reads(case):
    """An op or so per read (a row's max, the formatting's checks) and no in-place write
    between the reads: the values go to Python, a loop of reads (sync), not of updates."""
    _, a = analyzed(case, 0)
    assert confident(a, "host_reads_in_loop")
    assert a.verdict.bound == "sync"


@pytest.mark.parametrize("name, writes", [
    ("aten::add_", True), ("aten::copy_", True), ("aten::index_put_", True),
    ("EagerLocalExecute: AssignAddVariableOp", True),
    ("EagerLocalExecute: ResourceScatterAdd", True), ("aten::add", False),
    ("aten::_local_scalar_dense", False), ("aten::max", False)])
def test_in_place_writes_are_named(name, writes):
    assert read_rules._writes_in_place(name) is writes


@pytest.mark.parametrize("k", [0, 1])
def test_per_input_forwards_whose_batching_gains_nothing_are_not_confident(k):
    """Point clouds of different sizes run one forward each: the calls' time is large
    matmuls, and the small-batch estimate of packing them promises no gain, so the
    finding is no confident reading (packing them measured slower)."""
    _, a = analyzed("pt_infer_pointcloud_loop", k)
    f = finding(a, "op_overhead_bound")
    assert f is not None and f.estimated_speedup < 1.0
    assert f.confidence < CONFIDENT and "saves under" in f.confidence_why
    assert a.verdict.bound == "compute"


# -- TensorFlow: the eager pick stands for the read --------------------------------------------
@pytest.mark.parametrize("k", [0, 1])
def test_tensorflow_rows_read_one_at_a_time_are_sync_from_their_picks(k):
    _, a = analyzed("tf_infer_labels_readback", k)
    f = finding(a, "host_reads_in_loop")
    assert f is not None and f.share > 0.5
    assert "eager StridedSlice" in f.summary and "does not record" in f.summary
    assert "inferred" in f.confidence_why
    assert f.confidence <= 0.9 * RULES["host_reads_in_loop"].factor("reads_inferred")
    assert any(".numpy()" in x.text for x in f.fixes)
    assert a.verdict.bound == "sync"
    assert finding(a, "op_overhead_bound") is None


@pytest.mark.parametrize("k", [0, 1])
def test_per_image_nms_whose_picks_feed_its_ops_is_op_overhead_not_reads(k):
    """A Python loop over 16 images slices each image's boxes and scores, runs
    ``non_max_suppression`` on them and gathers the kept ones (six picks and one op of
    real size per image): the picks feed the ops, nothing waits on a CPU, the loop is
    the per-image ops' fixed cost, which one batched NMS removes: no read loop."""
    t, a = analyzed("tf_infer_nms_per_image_loop", k)
    assert finding(a, "host_reads_in_loop") is None
    assert not len(read_rules.read_loops(make_context(t, a.iterations, a.breakdown)).reads)
    assert a.verdict.bound == "host_overhead"
    f = finding(a, "op_overhead_bound")
    assert f is not None and 0.75 * 3.41 <= f.estimated_speedup <= 1.25 * 3.41


@pytest.mark.parametrize("case", ["tf_tape_per_sample_readback", "tf_infer_labels_readback"])
def test_a_small_op_per_tensorflow_read_stays_a_read_loop(case):
    """``tf.argmax(logits[k]).numpy()`` per sample runs one tiny op per read: the read's
    own preparation, the loop stays reads (sync)."""
    _, a = analyzed(case, 0)
    assert confident(a, "host_reads_in_loop")
    assert a.verdict.bound == "sync"


# -- per-call overhead of tiny calls in inference --------------------------------------------
@pytest.mark.parametrize("k", [0, 1])
def test_decoding_one_request_at_a_time_is_op_overhead_with_batching_advice(k):
    _, a = analyzed("pt_infer_decode_unbatched", k)
    f = finding(a, "op_overhead_bound")
    assert f is not None and f.share > 0.5 and f.confidence >= CONFIDENT
    assert any("Batch the requests" in x.text for x in f.fixes)
    assert a.verdict.bound == "host_overhead"


def small_batch_check(case: str, monkeypatch, shapes: bool):
    t, a = analyzed(case)
    if not shapes:  # as a capture without recorded input shapes reads
        monkeypatch.setattr(batching, "_batch", lambda ctx, math: None)
    ctx = make_context(t, a.iterations, a.breakdown)
    return small_batch.small_batch_inference(ctx, RULES["op_overhead_bound"])


def test_thousands_of_tiny_calls_are_per_call_overhead_without_a_visible_batch(monkeypatch):
    f = small_batch_check("pt_infer_decode_unbatched", monkeypatch, shapes=False)
    assert f is not None and f.share > 0.5
    assert f.summary.startswith("Inference made of tiny calls")


@pytest.mark.parametrize("case", ["pt_infer_batched_convnet", "pt_infer_no_dataloader",
                                  "pt_infer_bf16"])
def test_batched_inference_is_no_small_batch_even_without_shapes(case, monkeypatch):
    assert small_batch_check(case, monkeypatch, shapes=False) is None


def test_the_batch_is_read_from_the_matmul_input_not_its_bias(monkeypatch):
    f = small_batch_check("pt_infer_decode_unbatched", monkeypatch, shapes=True)
    assert f is not None and f.summary.startswith("Inference on batches of 1")


# -- framework set-up on every call ----------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1])
def test_keras_fit_called_per_batch_is_set_up_overhead_not_input(k):
    t, a = analyzed("tf_fit_per_batch", k)
    f = finding(a, "setup_overhead_bound")
    assert f is not None and f.share > 0.5 and f.confidence >= CONFIDENT
    assert "iterators made" in f.summary and "tf.data" in f.summary
    assert any("once on many samples" in x.text for x in f.fixes)
    assert not confident(a, "input_pipeline_bound")
    assert a.verdict.bound == "host_overhead"
    # the iterator's creation is framework set-up in the breakdown, not data loading
    s = t.slices
    loading = a.breakdown.host.role_slices["data_loading"]
    assert not any(t.names[int(n)].startswith("MakeIterator") for n in s.name[loading])


def test_a_pipeline_built_once_is_no_set_up_overhead():
    _, a = analyzed("tf_keras_fit_slow_map")
    assert finding(a, "setup_overhead_bound") is None
    assert a.verdict.bound == "input"


# -- the held-out cases of these kinds ---------------------------------------------------------
@pytest.mark.parametrize("case", ["pt_train_log_tensors", "tf_tape_per_sample_readback",
                                  "pt_infer_greedy_decode", "tf_predict_per_sample"])
def test_held_out_reads_decoding_and_per_call_set_up_get_their_bound(case):
    corpus_capture(case)  # skips when the corpus lacks the case
    truth = json.loads((CORPUS / case / "truth.json").read_text())
    for k in (0, 1):
        _, a = analyzed(case, k)
        assert a.verdict.bound == truth["bound"]
        wrong = [f.id for f in a.findings if f.confidence >= CONFIDENT and f.id in (
            "input_pipeline_bound", "op_overhead_bound") and f.id != {
            "host_overhead": "op_overhead_bound"}.get(truth["bound"])]
        assert wrong == []
