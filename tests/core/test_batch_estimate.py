"""What batching many small calls into one gains, estimated from the trace: the requests a
step answers one at a time found as repeats of its calls, the batched call's cost (one
call's fixed cost, every input's math), Keras calls merged, and a JAX step dispatched op
by op.

Cases of the diagnosis corpus (``tests/data/corpus``) are used; a test is skipped when the
corpus is not checked out.  Estimates are held to the measured fix on tuned cases only.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from tracedata import DATA
from tracedata import corpus_context as analyzed

from sofa_gui.core.analysis.breakdown import compute_breakdown
from sofa_gui.core.analysis.findings import batch_estimate as B
from sofa_gui.core.analysis.findings import element_work as E
from sofa_gui.core.analysis.findings import make_context
from sofa_gui.core.analysis.findings import shared_data as SD
from sofa_gui.core.analysis.findings.batching import model_requests, small_batch
from sofa_gui.core.analysis.findings.call_setup import direct_call_speedup, merged_calls_speedup
from sofa_gui.core.analysis.findings.eager_dispatch import eager_dispatch
from sofa_gui.core.analysis.findings.registry import RULES
from sofa_gui.core.analysis.findings.run_rules import _outer_ops, op_overhead_bound
from sofa_gui.core.analysis.findings.work import TINY_NS, input_dims, name_medians
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.results import Iterations
from sofa_gui.core.analysis.roles import SETUP
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import Kind, LaneKind

CORPUS = DATA / "corpus"
WITHIN = 0.25
US = 1000


def finding(case: str, fid: str, k: int = 0):
    return next((f for f in analyzed(case, k)[1].findings if f.id == fid), None)


def measured(case: str) -> float:
    return json.loads((CORPUS / case / "truth.json").read_text())["fix"]["speedup"]


def blocks(case: str, k: int = 0) -> list[B.Block]:
    _, _, ctx = analyzed(case, k)
    host = ctx.bd.host
    return B.repeated_blocks(ctx, host, B.median_row(ctx, host))


# -- what the trace says of the calls --------------------------------------------------------
def test_a_matmul_is_read_from_its_operands_not_its_bias():
    assert B.matmul_work([[96], [1, 48], [48, 96], [], []]) == (2 * 48 * 96, 1)
    assert B.matmul_work([[400, 8, 16], [400, 16, 16]]) == (2 * 400 * 8 * 16 * 16, 3200)
    assert B.matmul_work([[8, 16], [8, 16]]) is None  # inner dimensions disagree
    assert B.matmul_work([[96]]) is None


def test_a_batched_matmul_runs_faster_per_row_the_more_rows_it_has():
    rates = [B.MATMUL_FLOPS * m / (m + B.MATMUL_HALF_ROWS) for m in (1, 4, 64)]
    assert rates == sorted(rates) and rates[-1] < B.MATMUL_FLOPS


def test_the_profiler_cost_is_taken_per_event_and_never_takes_all():
    assert B.unprofiled_ns(10_000, 3) == 10_000 - 3 * B.PROFILER_NS_PER_EVENT
    assert B.unprofiled_ns(10_000, 100) == B.UNPROFILED_FLOOR * 10_000


@pytest.mark.parametrize("case, requests", [("pt_infer_decode_unbatched", 3),
                                            ("pt_infer_greedy_decode", 4),
                                            ("pt_infer_online_requests", 64)])
def test_the_requests_a_step_answers_one_at_a_time_are_its_repeats(case, requests):
    """A request is the shortest unit that repeats over the step: one forward pass, or a
    request's whole token-by-token decode (its tokens alone do not cover the step)."""
    found = blocks(case)
    assert [b.count for b in found][:1] == [requests]
    assert found[0].period > 1


@pytest.mark.parametrize("case", ["pt_train_item_sync", "pt_train_variable_length",
                                  "pt_infer_report_tensors"])
def test_runs_of_repeats_shorter_than_a_tenth_of_the_step_end_the_search(case, monkeypatch):
    """The runs are taken longest first, so the first one under :data:`MIN_BLOCK` of the
    step ends the search: no run kept is shorter, and the step's many short runs (two
    alike calls in a row) are not searched one by one."""
    _, _, ctx = analyzed(case)
    host = ctx.bd.host
    row = B.median_row(ctx, host)
    searches = []
    largest = B._largest_run
    monkeypatch.setattr(B, "_largest_run", lambda *a: searches.append(1) or largest(*a))
    found = B.repeated_blocks(ctx, host, row)
    a, b = B.step_window(ctx, host, row, B.step_slices(ctx, host, row))
    assert all(x.span >= B.MIN_BLOCK * (b - a) for x in found)
    assert len(searches) <= len(found) + 1


def test_a_models_two_alike_layers_are_not_two_requests():
    assert blocks("pt_infer_batch1_convnet") == []


# -- small-batch inference -------------------------------------------------------------------
@pytest.mark.parametrize("case", ["pt_infer_decode_unbatched", "pt_infer_batch1_convnet",
                                  "pt_infer_vit_batch1", "pt_infer_sliding_window_signal"])
@pytest.mark.parametrize("k", [0, 1])
def test_batching_the_requests_is_estimated_within_a_quarter_of_the_measured_fix(case, k):
    f = finding(case, "op_overhead_bound", k)
    assert f is not None and f.title == "Framework overhead: small-batch inference"
    assert abs(f.estimated_speedup / measured(case) - 1) <= WITHIN, f.estimated_speedup
    assert "Estimate for the" in f.summary and "saves at most" in f.summary


@pytest.mark.parametrize("case", ["pt_infer_decode_unbatched", "pt_infer_greedy_decode",
                                  "pt_infer_online_requests", "pt_infer_batch1_convnet"])
def test_batching_n_requests_saves_at_most_n_times_per_request(case):
    _, _, ctx = analyzed(case)
    fix = B.batch_fix(ctx, ctx.bd.host)
    assert fix is not None and 1.0 < fix.speedup() <= fix.batch
    assert fix.after_ns >= fix.unit_ns  # the batched call costs at least one request


def test_inference_made_of_tiny_calls_is_the_small_batch_checks_not_a_tiny_op_loop():
    """A vision transformer classifying one image at a time: its matmuls see the image's
    17 tokens (no small batch in the shapes), yet each image is a few hundred tiny calls
    and a convolution. Batching the images is the fix; read as a loop of tiny ops, each
    image's convolution would stay whole though one batched call runs it once."""
    _, _, ctx = analyzed("pt_infer_vit_batch1")
    sb = small_batch(ctx)
    assert sb is not None and not sb.small and model_requests(ctx)
    assert op_overhead_bound(ctx, RULES["op_overhead_bound"]) is None
    assert finding("pt_infer_vit_batch1", "op_overhead_bound").title == (
        "Framework overhead: small-batch inference")


@pytest.mark.parametrize("k", [0, 1])
def test_a_loaders_calls_in_the_main_process_are_input_not_small_batch_inference(k):
    """A scoring job whose ``IterableDataset`` parses JSON lines in the main process (no
    loader workers) records 2,600 framework calls a step, all but about 30 of them inside
    the loader's ``__next__`` (each record's ``torch.tensor`` calls, the collate): the
    input's work, not the model's, whose few calls run on 256 rows.  Counted as the
    model's, the second capture read a confident small-batch inference at 99% of it."""
    case = "pt_infer_jsonl_iterable_nw0"
    _, _, ctx = analyzed(case, k)
    assert len(ctx.bd.host.role_slices.get("data_loading", []))
    assert small_batch(ctx) is None
    assert finding(case, "op_overhead_bound", k) is None


@pytest.mark.parametrize("case", ["pt_infer_online_requests", "pt_infer_vit_batch1",
                                  "pt_infer_mc_dropout_passes"])
def test_steps_without_loader_calls_keep_their_small_batch_reading(case):
    _, _, ctx = analyzed(case)
    assert not len(ctx.bd.host.role_slices.get("data_loading", []))
    assert small_batch(ctx) is not None


@pytest.mark.parametrize("k", [0, 1])
def test_training_one_sample_a_step_is_per_op_overhead_with_a_batching_floor(k):
    """The char-RNN tutorial trains on one name a step, a letter at a time through an RNN:
    every matmul works on one row (``[1, 57]`` through a layer, the ``[128, 1] x [1, 57]``
    weight gradient).  Each op's fixed cost is paid per name: the step is per-op overhead,
    and batching names is the fix, its estimate (the steps captured batched) a lower
    bound that holds against the measured batch of 32 names."""
    case = "pt_train_char_rnn_names"
    t, a, ctx = analyzed(case, k)
    sb = small_batch(ctx)
    assert sb is not None and sb.small and sb.batch == 1
    f = finding(case, "op_overhead_bound", k)
    assert f is not None and f.title == "Framework overhead: small-batch training"
    assert f.summary.startswith("Training on batches of 1") and f.share > 0.8
    assert f.estimate_floor and 2.0 < f.estimated_speedup <= measured(case)
    assert a.verdict.bound == "host_overhead" and a.verdict.share > 0.8


@pytest.mark.parametrize("k", [0, 1])
def test_one_sample_a_step_with_an_attention_over_its_own_sequence_is_small_batch(k):
    """The seq2seq tutorial trains on one sentence pair a step, a word a call: its matmuls
    see one row, but its attention projects the encoder's 10 outputs (``[10, 128]``) once
    per target word, a few of its math ops on the sample's own positions, not on several
    samples.  Batching pairs is the fix: each step's calls run once for the batch with every
    pair's rows, while the weights' gradients and SGD updates (elementwise ops on weight-sized
    tensors, 97% of the step's elements) are once a batch, so they add nothing per pair.
    The batch is the program's choice: 8 pairs, a lower bound that holds against the
    measured batches of 32 (read as a loop of tiny ops, 1.5x)."""
    case = "pt_train_seq2seq_gru_attention"
    _, a, ctx = analyzed(case, k)
    sb = small_batch(ctx)
    assert sb is not None and sb.small and sb.batch == 1
    assert op_overhead_bound(ctx, RULES["op_overhead_bound"]) is None
    f = finding(case, "op_overhead_bound", k)
    assert f.title == "Framework overhead: small-batch training"
    assert f.summary.startswith("Training on batches of 1") and "batches of 8 samples" in f.summary
    assert f.estimate_floor and 4.0 < f.estimated_speedup <= measured(case)
    assert a.verdict.bound == "host_overhead"
    host = ctx.bd.host
    every = B.step_slices(ctx, host, B.median_row(ctx, host))
    ops = every[ctx.trace.slices.kind[every] == int(Kind.CPU_OP)]
    rows, whole = B.added_ns(ctx, ops, 1, 8, rows=True), B.added_ns(ctx, ops, 1, 8)
    assert rows.ns < 0.2 * whole.ns and rows.matmul_ns == whole.matmul_ns


@pytest.mark.parametrize("case", ["pt_train_deep_stack_batch8",
                                  "pt_train_lstmcell_teacher_forcing",
                                  "pt_train_per_sample_loss_loop", "pt_train_tiny_ops",
                                  "pt_train_dpsgd_vmap_cnn"])
def test_training_on_more_than_one_row_is_no_small_batch(case):
    """Training whose matmuls see batches of several samples (eight, a batch's sequence
    step by step, a loss per sample over a batch's outputs) is not one sample a step:
    its per-op readings stay the tiny-ops check's or the math's.  Per-sample gradients
    by ``torch.func.vmap`` record one sample's shape on the outer ops and the batch's
    (64) on the kernels inside them: the kernels' is the batch."""
    assert small_batch(analyzed(case)[2]) is None


@pytest.mark.parametrize("k", [0, 1])
def test_one_sample_training_is_read_whatever_the_machines_pace(k):
    """DP-SGD written by hand: each sample's own forward and backward, its gradients
    clipped and summed one at a time.  The first capture ran on a loaded machine, its step
    twice the second's (37 ms against 18.5), yet both are one-sample training: the math
    ops' own work is a small share of either step (11% and 7%), a ratio the machine's
    pace keeps where a step's length does not.  Batching the samples is the fix on both,
    its estimate within a quarter of the measured ``vmap(grad(...))`` on the first."""
    case = "pt_train_dpsgd_per_sample_loop"
    _, _, ctx = analyzed(case, k)
    sb = small_batch(ctx)
    assert sb is not None and sb.small and sb.batch == 1
    f = finding(case, "op_overhead_bound", k)
    assert f.title == "Framework overhead: small-batch training" and f.estimate_floor
    assert f.estimated_speedup < (1 + WITHIN) * measured(case)
    if k == 0:
        assert sb.step > 30e6 and f.estimated_speedup > (1 - WITHIN) * measured(case)


@pytest.mark.parametrize("k", [0, 1])
def test_batch1_inference_whose_math_is_most_of_the_step_is_no_small_batch(k):
    """Point clouds classified one at a time: the math ops see one cloud, but their own
    work is most of each step (80%): the fixed per-call cost does not lead, so the step is
    not read as a small batch, whatever its length (the loop's own readings keep it)."""
    _, _, ctx = analyzed("pt_infer_pointcloud_loop", k)
    sb = small_batch(ctx)
    assert sb is None or not sb.small


@pytest.mark.parametrize("k", [0, 1])
def test_long_ops_outside_the_math_are_work_not_per_call_cost(k):
    """A U-Net run over 25 overlapping tiles of an image at batch 1: besides its
    convolutions, its poolings and transposed convolutions on 64x64 maps and the
    ``argmax`` over the stitched image take 58 us to 5.6 ms each, work on their data that
    a batch keeps.  The per-call share leaves them to the compute (0.27, not 0.57), and
    the model's math keeps the verdict (tiles batched: 1.13x measured)."""
    _, a, _ = analyzed("pt_infer_tiled_segmentation", k)
    f = finding("pt_infer_tiled_segmentation", "op_overhead_bound", k)
    assert f is not None and 0.15 < f.share < 0.4
    assert a.verdict.bound == "compute"


@pytest.mark.parametrize("k", [0, 1])
def test_long_ops_on_data_every_query_shares_are_per_call_cost(k):
    """64 queries a step, each ``torch.cdist`` of one row against a 4,096 x 128 bank: each
    call squares, sums and copies the whole bank (55-150 us each) for a matrix-vector
    product.  Those ops' inputs have no dimension of one where every matmul multiplies
    one row: data every query shares, read once by one ``cdist`` of the 64 queries, so
    neither work a batch keeps nor what each query adds.  The reading is host overhead
    and its estimate near the 9.0x measured (0.93x read as work)."""
    case = "pt_infer_knn_cdist_per_query"
    _, a, ctx = analyzed(case, k)
    f = finding(case, "op_overhead_bound", k)
    assert a.verdict.bound == "host_overhead"
    assert f is not None and f.share > 0.5
    assert abs(f.estimated_speedup / measured(case) - 1) <= WITHIN, f.estimated_speedup
    b = blocks(case, k)[0]
    s = ctx.trace.slices
    bank = b.ops[np.isin(s.name[b.ops], ctx.trace.name_ids(lambda n: n == "aten::pow"))]
    of_bank = [input_dims(ctx, j)[0] == [4096, 128] for j in bank.tolist()]
    assert any(of_bank) and not all(of_bank)  # each query's own row squared too
    assert SD.shared_data(ctx, bank, b.ops).tolist() == of_bank


def test_a_row_of_a_sequence_is_no_one_row_request():
    """A ViT at batch 1 multiplies a row per patch (``[197, 768] x [768, 768]``): its
    attention's ops on ``[12, 197, 197]`` are its own data, not data every request shares
    (its long ops stay work)."""
    _, _, ctx = analyzed("pt_infer_vit_batch1")
    b = blocks("pt_infer_vit_batch1")[0]
    assert not SD.one_row_requests(ctx, b.ops)
    assert not SD.shared_data(ctx, b.ops).any()


@pytest.mark.parametrize("case", ["pt_infer_batch1_convnet", "pt_infer_vit_batch1",
                                  "pt_infer_tta_flips_loop", "pt_infer_siamese_pairs_loop"])
def test_batch1_models_of_short_ops_keep_their_per_call_share(case):
    """Batch-1 models whose ops outside the math are each short (a small CNN, a ViT's
    norms and activations, flips of a small image) keep them as per-call cost: the
    reading stays host overhead."""
    _, a, _ = analyzed(case)
    f = finding(case, "op_overhead_bound")
    assert f is not None and f.share > 0.5
    assert a.verdict.bound == "host_overhead"


def test_a_loop_of_a_few_tiny_calls_is_no_models_request():
    """1,000 repeats of two row picks and a tiny matmul: a loop the tiny-ops check reads
    (batched as one ``bmm``), not requests of a model."""
    t = load_trace(DATA / "advice" / "tiny_ops.json.gz", use_cache=False)
    a = analyze(t)
    ctx = make_context(t, a.iterations, a.breakdown)
    assert small_batch(ctx) is not None and not model_requests(ctx)
    assert op_overhead_bound(ctx, RULES["op_overhead_bound"]) is not None


def test_where_each_step_answers_one_request_the_steps_captured_are_the_batch():
    _, _, ctx = analyzed("pt_infer_batch1_convnet")
    fix = B.batch_fix(ctx, ctx.bd.host)
    assert fix.per_step == 1 and fix.batch == len(ctx.rows)
    assert "steps captured" in fix.what


def test_a_convolution_adds_its_measured_time_per_input_a_small_matmul_its_flops():
    """A batch-1 convolution is already compute: each further input costs about its own
    time; a batch-1 matmul is its fixed cost: a further row costs its FLOPs."""
    conv = B.batch_fix(*_host("pt_infer_batch1_convnet"))
    decode = B.batch_fix(*_host("pt_infer_decode_unbatched"))
    assert conv.added.ns > 0.15 * conv.unit_ns
    assert decode.added.matmul_ns < 0.1 * decode.unit_ns and not decode.added.measured


def _conv_groups(case: str, k: int = 0):
    """(own ns, calls directly inside, convolutions by name and input shapes, the profiler's
    cost per event, units) of the median step's requests."""
    ctx, host = _host(case, k)
    s, names = ctx.trace.slices, ctx.trace.names
    bl = B.repeated_blocks(ctx, host, B.median_row(ctx, host))
    if bl:
        ops, units = bl[0].ops, bl[0].count
    else:
        every = B.step_slices(ctx, host, B.median_row(ctx, host))
        ops, units = every[s.kind[every] == int(Kind.CPU_OP)], 1
    groups: dict = {}
    for i, j in enumerate(ops.tolist()):
        if B.CONV.match(names[int(s.name[j])]):
            key = (int(s.name[j]), *map(tuple, B.input_dims(ctx, j)))
            groups.setdefault(key, []).append(i)
    return (B.self_times(ctx, ops).astype(float), B._children(ctx, ops), groups,
            B.event_cost(ctx, host.lane), units)


def test_a_convolution_slowed_for_a_while_adds_its_usual_time_per_input():
    """The signal labeller's second convolution (16 to 32 channels, 64 samples) runs at
    15-18 µs a window for its first 19 windows, then mostly at 26-37 µs on the same shapes
    for the rest of the first capture, while its other calls keep their pace: each further
    window adds the convolutions' median own time, not each call's (a batch grows by their
    math, not by the machine's slow spell).  The two captures then read a further window's
    work within 2x of each other (2.8x counted call by call)."""
    own, children, groups, cost, units = _conv_groups("pt_infer_sliding_window_signal")
    summed = sum(B.unprofiled_ns(own[i], 1 + children[i], cost)
                 for at in groups.values() for i in at)
    assert B.conv_ns(own, children, groups, cost) < 0.6 * summed
    fixes = [B.batch_fix(*_host("pt_infer_sliding_window_signal", k)) for k in (0, 1)]
    assert fixes[0].added.ns < 2 * fixes[1].added.ns


@pytest.mark.parametrize("k", [0, 1])
def test_a_convolution_called_once_per_request_adds_its_own_time(k):
    """A batch-1 conv net whose steps each answer one request calls each convolution once
    per request: its median is the call, and a further input adds each call's own time."""
    own, children, groups, cost, _ = _conv_groups("pt_infer_batch1_convnet", k)
    summed = sum(B.unprofiled_ns(own[i], 1 + children[i], cost)
                 for at in groups.values() for i in at)
    assert groups and all(len(at) == 1 for at in groups.values())
    assert B.conv_ns(own, children, groups, cost) == pytest.approx(summed)


@pytest.mark.parametrize("k", [0, 1])
def test_a_random_draw_per_element_adds_its_time_per_input(k, monkeypatch):
    """Monte-Carlo dropout: 50 stochastic passes of an MLP on 4 rows, one after another.
    Each pass's dropout draws its mask with ``bernoulli_``, 8-10 µs for 1,024 elements as
    captured where the pass's other small calls take 1-4 µs: a random draw is work per
    element at any size, and the 50 passes batched into one pass of 200 rows draw 50
    times the numbers.  At half a nanosecond an element they read 4.9x where 3.2x is
    measured."""
    case = "pt_infer_mc_dropout_passes"
    f = finding(case, "op_overhead_bound", k)
    assert abs(f.estimated_speedup / measured(case) - 1) <= WITHIN, f.estimated_speedup
    assert "random draws their time beyond a small call's" in f.summary
    ctx, host = _host(case, k)
    counted = B.batch_fix(ctx, host)
    monkeypatch.setattr(E, "RANDOM", re.compile(r"^$"))
    assert B.batch_fix(ctx, host).speedup() > (1 + WITHIN) * measured(case)
    assert counted.added.ns > 2 * B.batch_fix(ctx, host).added.ns


@pytest.mark.parametrize("case", ["pt_infer_online_requests", "pt_infer_batch1_convnet",
                                  "pt_infer_greedy_decode", "pt_infer_tta_flips_loop"])
def test_long_batch_one_calls_that_draw_nothing_add_their_elements_only(case, monkeypatch):
    """A GELU on 96 elements (13 µs as captured), a max pooling on one image (11 µs) take
    far beyond a small call at batch 1, yet their time does not grow with the batch: no
    random draw, so each further input adds their elements only."""
    ctx, host = _host(case)
    counted = B.batch_fix(ctx, host)
    monkeypatch.setattr(E, "RANDOM", re.compile(r"^$"))
    assert counted.after_ns == pytest.approx(B.batch_fix(ctx, host).after_ns)


@pytest.mark.parametrize("k", [0, 1])
def test_a_batched_input_made_from_python_lists_still_copies_every_requests_numbers(k):
    """A traced scorer answers 128 requests a step, each ``torch.tensor([features])`` of 32
    floats: the copy of the numbers into the tensor (untraced, between its ``aten::empty``
    and ``aten::to``) grows with them, and the batched fix's ``torch.tensor`` of 128 rows
    pays it for every row. Read as a fixed cost paid once it was 57x and 39x against
    7.4x measured."""
    case = "pt_infer_traced_per_request"
    fix = B.batch_fix(*_host(case, k))
    assert fix.batch == 128 and 2 * US < fix.added.fill_ns < 6 * US
    assert fix.added.fill_ns > 0.5 * fix.added.ns
    f = finding(case, "op_overhead_bound", k)
    assert abs(f.estimated_speedup / measured(case) - 1) <= WITHIN, f.estimated_speedup
    assert "copying the Python numbers its tensors are made from" in f.summary


@pytest.mark.parametrize("case", ["pt_infer_online_requests", "pt_infer_server_numpy_outputs",
                                  "pt_infer_vit_batch1"])
def test_requests_whose_tensors_are_not_filled_from_python_lists_add_no_copy(case):
    """Requests whose inputs are slices of a tensor or arrays made into tensors record
    their copies as ops (``aten::copy_``): no untraced fill after an allocation."""
    fix = B.batch_fix(*_host(case))
    assert fix is not None and fix.added.fill_ns == 0.0
    assert "copying the Python numbers" not in fix.basis()


def _host(case: str, k: int = 0):
    _, _, ctx = analyzed(case, k)
    return ctx, ctx.bd.host


# -- a loop of tiny ops in training ------------------------------------------------------------
def _tiny(ctx):
    s = ctx.trace.slices
    ops = _outer_ops(ctx, ctx.bd.host.lane)
    return ops[name_medians(s.name[ops], s.dur[ops]) <= TINY_NS]


def test_a_python_loop_of_tiny_matmuls_batches_with_the_stack_of_its_pieces():
    """400 matmuls forward and their backward repeat 400 times; the backward of the
    ``torch.stack`` of their outputs unbinds them one by one and goes with the loop."""
    _, _, ctx = analyzed("pt_train_tiny_ops")
    lb = B.loop_batch(ctx, ctx.bd.host, _tiny(ctx))
    assert lb is not None and lb.count == 400
    assert 0 < lb.gather < 0.1 and 0 < lb.replacement < 0.05


def test_a_models_repeated_layers_are_no_loop_of_tiny_ops():
    _, _, ctx = analyzed("pt_train_activation_checkpointing")
    assert B.loop_batch(ctx, ctx.bd.host, _tiny(ctx)) is None


# -- Keras calls merged ------------------------------------------------------------------------
def test_merging_calls_pays_their_set_up_once_and_saves_at_most_their_number():
    assert merged_calls_speedup(0.8, 1) == pytest.approx(1.0)
    assert merged_calls_speedup(0.8, 3) == pytest.approx(1 / (1 - 0.8 * 2 / 3))
    assert merged_calls_speedup(1.0, 6) == pytest.approx(6.0)
    assert merged_calls_speedup(0.8, 1000) < 1 / (1 - 0.8)


@pytest.mark.parametrize("k", [0, 1])
def test_keras_fit_per_batch_merged_is_estimated_within_a_quarter_of_the_measured_fix(k):
    f = finding("tf_fit_per_batch", "setup_overhead_bound", k)
    assert f is not None
    assert abs(f.estimated_speedup / measured("tf_fit_per_batch") - 1) <= WITHIN
    assert "calls captured" in f.summary


def steady_setup(case: str, k: int = 0) -> tuple:
    t, _, ctx = analyzed(case, k)
    s, host = t.slices, ctx.bd.host
    mine = t.lane_slices(host.lane)
    mine = mine[np.isin(s.name[mine], t.name_ids(lambda n: bool(SETUP.search(n))))]
    return ctx, mine[ctx.in_steady(s.start[mine], host.starts, host.ends)]


@pytest.mark.parametrize("k", [0, 1])
def test_a_predict_nested_in_keras_fit_batches_is_estimated_as_a_direct_model_call(k):
    # a callback's model.predict after every fit batch: its set-up lies inside Keras' batch
    # markers, after the batch's train step; calling the model directly drops the whole
    # predict, not a number of merged calls (8 batches captured, 18x measured)
    f = finding("tf_fit_predict_callback", "setup_overhead_bound", k)
    assert f is not None
    assert abs(f.estimated_speedup / measured("tf_fit_predict_callback") - 1) <= WITHIN
    assert "calling the model directly" in f.summary


@pytest.mark.parametrize("case", ["tf_fit_per_batch", "tf_predict_per_sample"])
def test_set_up_outside_keras_batch_markers_is_merged_calls_not_a_direct_call(case):
    # the calls are the loop itself (one fit / predict per batch or sample), not nested in
    # a fit batch: merging them is the fix, bounded by their number
    ctx, setup = steady_setup(case)
    assert len(setup) and direct_call_speedup(ctx, setup) is None
    assert "calls captured" in finding(case, "setup_overhead_bound").summary


# -- a JAX step dispatched op by op ------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1])
def test_a_jax_step_run_outside_jit_is_dispatch_overhead_with_a_jit_fix(k):
    t, a, _ = analyzed("jax_train_unjitted", k)
    f = finding("jax_train_unjitted", "op_overhead_bound", k)
    assert f is not None and f.title == "Framework overhead: ops dispatched one at a time"
    assert f.estimated_speedup > 2 and f.confidence >= 0.4
    assert any("jax.jit" in x.text for x in f.fixes)
    assert a.run.value("compiled") == "op by op"


@pytest.mark.parametrize("case", ["jax_train_jit", "jax_infer_jit", "jax_train_loss_readback",
                                  "jax_infer_readback"])
def test_a_jitted_jax_step_is_no_op_by_op_dispatch(case):
    t, a, _ = analyzed(case)
    assert all(f.title != "Framework overhead: ops dispatched one at a time"
               for f in a.findings)
    assert a.run.value("compiled") == "xla"


def _dispatched(name: str, pool_kernels: bool):
    """A CPU run of 5 steps of 30 dispatches from Python each, with or without the runtime
    pool thread's kernels beside them."""
    b = TraceBuilder("synth", "test")
    main = b.lane(("cpu",), "python", LaneKind.CPU, "proc", pid=1, tid=1)
    pool = b.lane(("cpu", 2), "tf_XLACpuCompute", LaneKind.CPU, "proc", pid=1, tid=2)
    starts = [i * 3000 * US for i in range(5)]
    for t0 in starts:
        for k in range(30):
            t = t0 + (10 + 95 * k) * US
            b.add_slices([t], [80 * US], main, [name], kind=Kind.CPU_OP)
            if pool_kernels:
                b.add_slices([t + 40 * US], [30 * US], pool, ["dot.3"], kind=Kind.CPU_OP)
    trace = b.finish()
    iters = Iterations("annotations", "test", np.asarray(starts, np.int64),
                       np.asarray(starts, np.int64) + 3000 * US, 1.0)
    bd = compute_breakdown(trace, iters)
    return make_context(trace, iters, bd)


@pytest.mark.parametrize("name", ["PjitFunction(add)", "EagerLocalExecute: MatMul"])
def test_dispatches_without_kernels_beside_them_are_no_op_by_op_step(name):
    """Where no runtime thread shows the step's kernels (TensorFlow's eager ops run theirs
    inside the dispatch; a capture without the runtime's threads), dispatch and math cannot
    be told apart: the op-by-op reading says nothing rather than call it all dispatch."""
    spec = RULES["op_overhead_bound"]
    assert eager_dispatch(_dispatched(name, pool_kernels=False), spec) is None
    with_kernels = eager_dispatch(_dispatched(name, pool_kernels=True), spec)
    assert (with_kernels is not None) is name.startswith("PjitFunction")


@pytest.mark.parametrize("case", ["pt_train_seq2seq_gru_attention",
                                  "pt_train_dpsgd_per_sample_loop"])
def test_training_on_one_sample_keeps_its_other_ops_in_the_per_call_share(case):
    """Training on one sample a step runs its ops outside the math (the autograd's
    bookkeeping, the update) once a step whatever the batch: they stay in the per-call
    share.  Over 50 us a call they are tiny ops the loaded machine stretched in one
    capture (``view``, ``fill_``, ``add_``: 0.21 and 0.34 of the step), not the other
    (0.01): both captures read alike (0.84-0.93, where they read 0.55-0.92)."""
    shares = [finding(case, "op_overhead_bound", k).share for k in (0, 1)]
    assert min(shares) > 0.8 and abs(shares[0] - shares[1]) < 0.1, shares
