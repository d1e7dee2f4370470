"""Iteration detection on synthetic traces: symbols, suffix structure, pattern, cut, modes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from iterations_synth import LOADER, device_trace, random_stream, training_stream, zipf_word

from sofa_gui.core.analysis.iterations import detect_iterations, iterations_text
from sofa_gui.core.analysis.iterations.annotations import step_slices
from sofa_gui.core.analysis.iterations.pattern import choose_period, find_anchors
from sofa_gui.core.analysis.iterations.suffix import context_classes, dense_ids, suffix_array
from sofa_gui.core.analysis.iterations.symbols import normalize_name, reduce_symbols
from sofa_gui.core.builder import TraceBuilder
from sofa_gui.core.importers import load_trace
from sofa_gui.core.progress import Cancelled, CancelToken
from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.trace import Kind, LaneKind


def device_starts(trace, steps):
    """Start (ns) of each true step's first device event."""
    s = trace.slices
    dev = np.flatnonzero(np.isin(s.kind, [int(Kind.KERNEL), int(Kind.MEMCPY)]))
    return s.start[dev[steps]]


def assert_matches(found, truth, tol_ns):
    assert len(found) == len(truth), (len(found), len(truth))
    assert np.all(np.abs(np.sort(found) - np.sort(truth)) <= tol_ns)


# -- symbols -------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, norm", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
     "(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)",
     "void at::native::vectorized_elementwise_kernel"),
    ("ProfilerStep#12", "ProfilerStep#"),
    ("aten::add_", "aten::add_"),
    ("cudaLaunchKernel", "cudaLaunchKernel"),
    ("kernel 17", "kernel 17"),  # numeric kernel ids (old SOFA traces) are identities
    ("nn.Module: Linear_3", "nn.Module: Linear_3"),
    ("copy 4096 bytes to 0x7f3a2c000000", "copy <size> to 0x"),
    ("train step 41", "train step"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
])
def test_normalize_name(raw, norm):
    assert normalize_name(raw) == norm


def test_reduce_symbols_folds_singletons_and_runs():
    sym = reduce_symbols(np.array([5, 5, 5, 7, 9, 5, 7, 7, 3]))
    # 9 and 3 occur once -> OTHER (0); runs of 5 and of 7 collapse
    assert sym.seq.tolist() == [1, 2, 0, 1, 2, 0]
    assert sym.first.tolist() == [0, 3, 4, 5, 6, 8]


def test_memcpy_symbols_by_direction_not_size():
    b = TraceBuilder("t")
    lane = b.lane("g", "s", LaneKind.GPU, device=0)
    names = ["Memcpy HtoD (Pageable -> Device) 1024 bytes", "Memcpy HtoD 8 bytes",
             "Memcpy DtoH (Device -> Pageable)"]
    b.add_slices([0, 10, 20], 5, lane, names, kind=Kind.MEMCPY, copy_kind=[1, 1, 2], device=0)
    from sofa_gui.core.analysis.iterations.symbols import stream_keys
    t = b.finish()
    keys, labels = stream_keys(t.names, t.slices.name, t.slices.kind, t.slices.copy_kind)
    assert keys[0] == keys[1] != keys[2]
    assert labels[keys[0]] == "memcpy H2D"


# -- suffix structure -----------------------------------------------------------------------

def test_suffix_array_over_integers_not_characters():
    rng = np.random.default_rng(3)
    for alphabet in (3, 300, 70_000):
        seq = rng.integers(0, alphabet, 60)
        seq[30:50] = seq[5:25]
        sa = suffix_array(dense_ids(seq))
        ref = sorted(range(len(seq)), key=lambda i: seq[i:].tolist())
        assert sa.tolist() == ref
    # "12,31" must not match "2,3": ids 12 and 31 are single symbols
    cls = context_classes(np.array([12, 31, 2, 3, 12, 31, 5]), 2)
    assert cls[0] == cls[4] >= 0 and cls[2] == -1


def _partition(cls: np.ndarray) -> list[int]:
    """Each position's class as the first position holding it (-1 stays -1)."""
    first: dict[int, int] = {}
    return [first.setdefault(c, i) if c >= 0 else -1 for i, c in enumerate(cls.tolist())]


def test_hashed_contexts_equal_the_suffix_array_grouping():
    from sofa_gui.core.analysis.iterations.suffix import context_groups, exact_context_classes

    rng = np.random.default_rng(11)
    thue_morse = np.array([bin(i).count("1") % 2 for i in range(1 << 12)])  # breaks mod-2^64
    cases = [(thue_morse, k) for k in (3, 8, 17, 32)]  # polynomial hashes; not this one
    for _ in range(120):
        n, a, k = int(rng.integers(1, 500)), int(rng.integers(1, 6)), int(rng.integers(1, 40))
        seq = rng.integers(0, a, n)
        if rng.random() < 0.5:
            seq = np.tile(seq[: max(1, n // 7)], 8)[:n]
        cases.append((seq, k))
    for seq, k in cases:
        cls, key = context_groups(seq, k)
        assert _partition(cls) == _partition(exact_context_classes(seq, k))
        pos = np.flatnonzero(cls >= 0)
        assert key.tolist() == sorted((cls[pos] * (len(seq) + 1) + pos).tolist())


def test_contexts_sharing_the_short_sort_key_are_split_by_the_full_hash(monkeypatch):
    """Force every context into one shortened key (hashes below 2^(position bits)):
    the runs are re-ordered by the full hash and the classes stay exact."""
    from sofa_gui.core.analysis.iterations import suffix

    rng = np.random.default_rng(4)
    seq = np.tile(rng.integers(0, 5, 37), 30)
    seq[rng.random(len(seq)) < 0.05] = 7
    exact = suffix.exact_context_classes(seq, 6)
    m = len(seq) - 6 + 1
    ids = np.where(exact >= 0, exact, len(seq) + np.arange(len(seq)))[:m]
    monkeypatch.setattr(suffix, "context_hashes", lambda s, k: ids.astype(np.uint64))
    cls, key = suffix.context_groups(seq, 6)
    assert _partition(cls) == _partition(exact)
    pos = np.flatnonzero(cls >= 0)
    assert key.tolist() == sorted((cls[pos] * (len(seq) + 1) + pos).tolist())


def test_context_neighbours_answer_like_the_binary_search():
    """The sampled recurrence test (neighbour offsets first) equals the plain search."""
    from sofa_gui.core.analysis.iterations.pattern import Contexts

    rng = np.random.default_rng(5)
    for _ in range(60):
        n, a = int(rng.integers(1, 3000)), int(rng.integers(1, 8))
        base = rng.integers(0, a, int(rng.integers(1, 60)))
        seq = np.tile(base, n // len(base) + 1)[:n]
        flip = rng.random(n) < rng.choice([0.0, 0.01, 0.2])
        seq[flip] = rng.integers(0, a, int(flip.sum()))
        ctx = Contexts(seq, int(rng.integers(1, 8)))
        for d in rng.integers(1, 200, 4).tolist():
            for tol in (0, 1, 5):
                for shift in (d, -d, 2 * d, -2 * d):
                    assert np.array_equal(ctx._sample_recurs(shift, tol),
                                          ctx.recurs(ctx.sample, shift, tol))


def test_context_classes_group_equal_contexts():
    seq = np.array([1, 2, 3, 1, 2, 3, 1, 2, 4])
    cls = context_classes(seq, 3)
    assert cls[0] == cls[3] >= 0
    assert cls[1] == cls[4] >= 0
    assert cls[6] == -1  # 1,2,4 occurs once


# -- period and occurrences -----------------------------------------------------------------

def test_period_is_primitive_not_a_multiple():
    rng = np.random.default_rng(1)
    st = training_stream(rng, 80, 40, noise=0.01)
    p = choose_period(reduce_symbols(st.seq).seq)
    assert p.accepted and 70 <= p.length <= 85


def test_period_is_the_step_not_the_layer():
    rng = np.random.default_rng(2)
    layer = zipf_word(rng, 12, 100)
    bwd = zipf_word(rng, 15, 100) + 100
    word = np.r_[1, zipf_word(rng, 6, 100) + 300, np.tile(layer, 24), np.tile(bwd, 24),
                 zipf_word(rng, 10, 100) + 400]
    st = training_stream(rng, len(word), 6, word=word)
    sym = reduce_symbols(st.seq)
    p = choose_period(sym.seq)
    assert p.accepted
    assert abs(p.length - len(sym.seq) / 6) <= 3


@pytest.mark.parametrize("head, read, reads, steps", [
    (4, 7, 32, 3), (6, 7, 32, 4), (10, 6, 64, 3), (3, 5, 40, 3), (8, 7, 32, 5)])
def test_period_is_the_step_not_half_of_it_when_short_reads_repeat_inside(head, read, reads,
                                                                          steps):
    # a step = a few ops, then one short read repeated many times (a per-sample read-back):
    # a shift of half a step lands on the same read within its tolerance, and two of it
    # are a whole step, which must not make half a step the period
    step = list(range(100, 100 + head)) + list(range(200, 200 + read)) * reads
    p = choose_period(np.array(step * steps))
    assert p.accepted and p.length == len(step), p.candidates


def test_anchors_place_every_occurrence_despite_edits():
    rng = np.random.default_rng(4)
    st = training_stream(rng, 300, 25, warmup=70, noise=0.02)
    sym = reduce_symbols(st.seq)
    p = choose_period(sym.seq)
    anchors = find_anchors(sym.seq, p.length)
    starts = anchors.starts(0.0)
    assert 24 <= len(starts[(starts >= 0) & (starts < len(sym.seq))]) <= 26
    assert len(anchors) >= 5


# -- whole detector on device-only traces ---------------------------------------------------

def test_clean_repeats_found_exactly():
    rng = np.random.default_rng(5)
    st = training_stream(rng, 60, 12)
    t = device_trace(st.seq, st.steps)
    it = detect_iterations(t, "pattern")
    assert it.method == "pattern" and it.confidence > 0.9
    assert_matches(it.starts, device_starts(t, st.steps), 0)
    assert it.pattern["occurrences"] == 12


def test_warmup_noise_and_periodic_extra():
    rng = np.random.default_rng(6)
    st = training_stream(rng, 250, 30, warmup=90, noise=0.01, extra_every=5, extra_len=12)
    t = device_trace(st.seq, st.steps, rng=rng)
    it = detect_iterations(t, "pattern")
    assert_matches(it.starts, device_starts(t, st.steps), 0)
    assert it.confidence > 0.8


@pytest.mark.parametrize("k", [2, 3])
def test_short_repeats(k):
    rng = np.random.default_rng(7 + k)
    st = training_stream(rng, 150, k, noise=0.005)
    t = device_trace(st.seq, st.steps)
    it = detect_iterations(t, "pattern")
    assert_matches(it.starts, device_starts(t, st.steps), 0)


def test_last_iteration_ends_with_its_last_event():
    rng = np.random.default_rng(8)
    st = training_stream(rng, 40, 5)
    t = device_trace(st.seq, st.steps)
    it = detect_iterations(t, "pattern")
    assert it.ends[-1] == int(t.slices.end.max())
    assert np.all(it.ends[:-1] == it.starts[1:])  # contiguous


@pytest.mark.parametrize("alphabet", [8, 30, 500])
def test_random_stream_has_no_iterations(alphabet):
    rng = np.random.default_rng(alphabet)
    t = device_trace(random_stream(rng, 3000, alphabet))
    it = detect_iterations(t, "pattern")
    assert it.method == "none" and len(it) == 0
    assert "no repeated pattern" in it.reason


def test_too_short_stream_says_so():
    t = device_trace(np.array([2, 3, 2]))
    it = detect_iterations(t, "pattern")
    assert it.method == "none" and "too short" in it.reason


def test_empty_trace():
    it = detect_iterations(TraceBuilder("e").finish(), "auto")
    assert it.method == "none" and it.reason


# -- cut placement with host information ----------------------------------------------------

def host_truth(t, name):
    s = t.slices
    return np.sort(s.start[np.isin(s.name, t.name_ids(lambda n: n.startswith(name)))])


def test_cut_after_data_loader_includes_input_loading():
    rng = np.random.default_rng(9)
    st = training_stream(rng, 120, 8, noise=0.005)
    seq = np.r_[st.seq[40:], st.seq[:0]]  # the trace starts mid-step: rotation is ambiguous
    t = device_trace(seq, st.steps[1:] - 40, host=True, loader=True)
    it = detect_iterations(t, "pattern")
    assert it.pattern["cut"] == "after the data-loader call"
    loaders = host_truth(t, LOADER)
    assert_matches(it.starts, loaders[-len(it):], 0)
    assert len(it) >= len(loaders) - 1


def test_cut_after_optimizer_step():
    rng = np.random.default_rng(10)
    st = training_stream(rng, 100, 8, noise=0.005)
    t = device_trace(st.seq, st.steps, host=True, optimizer_tail=6)
    it = detect_iterations(t, "pattern")
    assert it.pattern["cut"] == "after the optimizer step"
    s = t.slices
    ops = np.flatnonzero(s.kind == int(Kind.CPU_OP))
    first_ops = ops[np.searchsorted(s.start[ops], device_host_launch(t, st.steps)) - 0]
    assert_matches(it.starts, s.start[first_ops], 0)


def device_host_launch(t, steps):
    s = t.slices
    rt = np.flatnonzero(s.kind == int(Kind.RUNTIME))
    return s.start[rt[steps]] - 500  # the aten op around each launch starts 500 ns earlier


# -- annotations and modes ------------------------------------------------------------------

def annotated_trace(seed=11, steps=6):
    rng = np.random.default_rng(seed)
    st = training_stream(rng, 90, steps, noise=0.005)
    return device_trace(st.seq, st.steps, host=True, loader=True, annotate=True), st


def test_auto_uses_annotations_and_reports_agreement():
    t, _ = annotated_trace()
    it = detect_iterations(t)
    assert it.method == "annotations" and it.confidence == 1.0
    assert it.labels == [f"ProfilerStep#{k}" for k in range(5, 11)]
    a = it.agreement
    assert a["annotated"] == 6 and a["detected"] == 6 and a["matched"] == 6
    ann = step_slices(t)  # every step, the last too, is exactly its annotation
    assert it.starts.tolist() == t.slices.start[ann].tolist()
    assert it.ends.tolist() == t.slices.end[ann].tolist()


def test_pattern_mode_ignores_annotations():
    t, st = annotated_trace()
    it = detect_iterations(t, "pattern")
    assert it.method == "pattern" and not it.labels and it.agreement is None
    # the same trace without annotations gives the same iterations
    t2 = device_trace(st.seq, st.steps, host=True, loader=True)
    it2 = detect_iterations(t2, "pattern")
    assert np.array_equal(it.starts, it2.starts) and np.array_equal(it.ends, it2.ends)


def test_annotations_mode_without_annotations():
    rng = np.random.default_rng(12)
    st = training_stream(rng, 50, 5)
    it = detect_iterations(device_trace(st.seq, st.steps), "annotations")
    assert it.method == "none" and "no step annotations" in it.reason


def test_bad_mode():
    with pytest.raises(ValueError, match="auto, annotations, pattern"):
        detect_iterations(TraceBuilder("e").finish(), "count")


def test_progress_and_cancel():
    t, _ = annotated_trace()
    seen = []
    tok = CancelToken(lambda f, m: seen.append(f))
    detect_iterations(t, "auto", tok)
    assert seen and all(0.0 <= f <= 1.0 for f in seen)
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        detect_iterations(t, "pattern", tok)


# -- output --------------------------------------------------------------------------------

def test_to_dict_and_text():
    t, _ = annotated_trace()
    it = detect_iterations(t)
    d = json.loads(json.dumps(it.to_dict()))
    assert d["method"] == "annotations" and len(d["items"]) == 6
    assert d["items"][0]["label"] == "ProfilerStep#5"
    assert d["agreement_with_annotations"]["matched"] == 6
    lines = iterations_text(t, it)
    assert lines[0].startswith("Iterations: 6 by annotations")
    assert any("ProfilerStep#7" in line for line in lines)
    assert "median" in lines[-1] and "CV" in lines[-1]
    none = iterations_text(t, detect_iterations(TraceBuilder("e").finish()))
    assert none[0].startswith("Iterations: none found")


# -- activity fallback ----------------------------------------------------------------------

def scrambled_bursts(rng, bursts=30, per=60, period_ns=10_000_000):
    """Bursts of events once per period whose names never repeat in order."""
    starts = np.concatenate([k * period_ns + np.sort(rng.integers(0, period_ns // 3, per))
                             for k in range(bursts)])
    b = TraceBuilder("bursts")
    lane = b.lane("g", "stream", LaneKind.GPU, device=0)
    names = [f"kernel {x}" for x in rng.integers(0, 5_000, len(starts))]
    b.add_slices(starts, 1_000, lane, names, kind=Kind.KERNEL, device=0)
    return b.finish()


def test_activity_rhythm_when_order_does_not_repeat():
    it = detect_iterations(scrambled_bursts(np.random.default_rng(13)), "pattern")
    assert it.method == "pattern" and it.pattern["evidence"] == "activity"
    assert len(it) >= 27
    med = np.median(it.durations)
    assert 9.5e6 <= med <= 10.5e6
    assert "rhythm" in it.reason


def test_steady_random_events_have_no_rhythm():
    rng = np.random.default_rng(14)
    starts = np.sort(rng.integers(0, 10**9, 5000))
    b = TraceBuilder("poisson")
    lane = b.lane("g", "stream", LaneKind.GPU, device=0)
    b.add_slices(starts, 1_000, lane, [f"k{x}" for x in rng.integers(0, 3000, 5000)],
                 kind=Kind.KERNEL, device=0)
    it = detect_iterations(b.finish(), "pattern")
    assert it.method == "none"


# -- other streams and step ranges ----------------------------------------------------------

def host_only_trace(seed=15, steps=8):
    """A CPU-only program: top-level ops (with nested children) repeat once per step."""
    rng = np.random.default_rng(seed)
    st = training_stream(rng, 40, steps, 60)
    b = TraceBuilder("host")
    lane = b.lane("t", "thread 7", LaneKind.CPU, "process 7", pid=7, tid=7)
    n = len(st.seq)
    start = np.arange(n, dtype=np.int64) * 10_000 + np.repeat(np.arange(steps), 40) * 50_000
    b.add_slices(start, 8_000, lane, [f"aten::op{x}" for x in st.seq], kind=Kind.CPU_OP)
    b.add_slices(start + 1_000, 2_000, lane, ["aten::empty"] * n, kind=Kind.CPU_OP)
    b.add_slices(start[::40] - 1_000, 40 * 10_000 + 1_000, lane,
                 [f"train step {k}" for k in range(steps)], kind=Kind.ANNOTATION)
    return b.finish(), start[::40]


def test_host_only_trace_uses_top_level_cpu_ops():
    t, firsts = host_only_trace()
    it = detect_iterations(t, "pattern")
    assert it.stream.startswith("top-level CPU ops of") and "thread 7 (" in it.stream
    assert_matches(it.starts, firsts, 0)


def test_user_step_ranges_are_annotations():
    t, firsts = host_only_trace()
    it = detect_iterations(t)
    assert it.method == "annotations" and it.labels[0] == "train step 0"
    assert_matches(it.starts, firsts - 1_000, 0)
    assert it.agreement["matched"] == len(firsts)


def test_other_slices_as_a_last_resort():
    rng = np.random.default_rng(16)
    st = training_stream(rng, 30, 6, 50)
    b = TraceBuilder("other")
    lane = b.lane("x", "syscalls", LaneKind.CPU)
    start = np.arange(len(st.seq), dtype=np.int64) * 1_000 + np.repeat(np.arange(6), 30) * 9_000
    b.add_slices(start, 500, lane, [f"sys_{x}" for x in st.seq], kind=Kind.OTHER)
    b.add_slices(start[::30], 100, lane, [f"ProfilerStep#{k}" for k in range(6)],
                 kind=Kind.ANNOTATION)
    it = detect_iterations(b.finish(), "pattern")
    assert it.stream.startswith("all top-level slices (180 events)")
    assert_matches(it.starts, start[::30], 0)


def epoch_steps_trace(nested: bool = False, per_epoch: int = 5):
    """A Keras-like loop: 2 epochs of 5 steps numbered ``k % per_epoch`` (0-4 within each
    epoch by default), with 8 ms of validation after each epoch's last step (outside any
    marker); ``nested``: every step marked twice, the second marker inside the first (the
    same step, not another)."""
    b = TraceBuilder("epochs")
    lane = b.lane("py", "python", LaneKind.CPU)
    starts, t = [], 0
    for _ in range(2):
        for _ in range(5):
            starts.append(t)
            t += 1_000_000
        t += 8_000_000
    starts = np.array(starts, np.int64)
    names = [f"Profiled batch step {k % per_epoch}" for k in range(10)]
    b.add_slices(starts, 990_000, lane, names, kind=Kind.ANNOTATION)
    if nested:
        b.add_slices(starts + 10_000, 900_000, lane, names, kind=Kind.ANNOTATION)
    b.add_slices(starts + 20_000, 800_000, lane, ["train_function"] * 10, kind=Kind.CPU_OP)
    b.add_slices(starts[[4, 9]] + 2_000_000, 6_000_000, lane, ["test_function"] * 2,
                 kind=Kind.CPU_OP)
    return b.finish(), starts


@pytest.mark.parametrize("nested", [False, True])
def test_step_numbers_that_restart_every_epoch_are_steps_of_their_own(nested):
    t, starts = epoch_steps_trace(nested)
    it = detect_iterations(t, "annotations")
    assert it.starts.tolist() == starts.tolist()  # 10 steps, not the 5 distinct numbers
    assert it.labels[:6] == [f"Profiled batch step {k}" for k in range(5)] + [
        "Profiled batch step 0 (2)"]  # a repeated number is told apart, ranks align by it
    # the validation after an epoch's last step stays in that step; the empty gaps between
    # other steps stay out, as the last step ends with its marker
    assert it.ends[4] == starts[5] and it.ends[-1] == starts[-1] + 990_000
    assert (it.ends[:4] == starts[:4] + 990_000).all()


def test_a_step_number_that_every_step_reuses_still_marks_every_step():
    # a loop that marks each step with the same number (a fit or a Trace(step_num=0)
    # per step): one step per marker, told apart by their occurrence
    t, starts = epoch_steps_trace(per_epoch=1)
    it = detect_iterations(t, "annotations")
    assert it.starts.tolist() == starts.tolist()
    assert it.labels[:3] == ["Profiled batch step 0", "Profiled batch step 0 (2)",
                             "Profiled batch step 0 (3)"]


def test_profiler_step_ranges_end_where_they_end_whatever_lies_between_them():
    # the PyTorch profiler's step() records its own ops (aten::zeros) between two
    # ProfilerStep ranges: its bookkeeping, not the loop's work
    t = load_trace(demo_trace_path())
    it = detect_iterations(t, "annotations")
    ann = step_slices(t)
    s = t.slices
    between = [t.names[s.name[i]] for i in t.lane_slices(int(s.lane[ann[0]]))
               if s.end[ann[0]] <= s.start[i] < s.start[ann[1]]]
    assert "aten::zeros" in between
    assert it.ends.tolist() == s.end[ann].tolist()
