"""The general diagnosis patterns, each on a real capture of its kind: waits counted for what
the thread waits for (gloo collectives, Keras' input fetch on another thread, XLA's compute
thread), CPU collectives in stats and fleet, periodic extras only from recurring extra
work, run facts from op input types and training names, small-batch inference, the
verdict, and findings that do not contradict the run.

Cases of the diagnosis corpus (``tests/data/corpus``, see its ``truth.json`` files) are
used where the corpus has them; the test is skipped when the corpus is not checked out.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tracedata import corpus_capture as capture

from sofa_gui.core.analysis import roles as R
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = DATA / "corpus"


def analyzed(path: Path):
    t = load_trace(path, use_cache=False)
    return t, analyze(t)


# -- waits counted for what the thread waits for ----------------------------------------------
def test_gloo_wait_is_communication_and_the_straggler_has_a_cause():
    t, a = analyzed(capture("pt_ddp_gloo_straggler"))
    hosts = {h.rank: h for h in a.breakdown.hosts}
    fast = max(hosts.values(), key=lambda h: h.column("communication").sum())
    share = fast.column("communication").sum() / (fast.ends - fast.starts).sum()
    assert share > 0.3  # was "other": no op on the main thread covers the wait
    comm = next(f for f in a.findings if f.id == "communication_bound")
    slow = next(r for r in hosts if r != fast.rank)
    assert f"Rank {slow} is the slowest" in comm.summary and "mostly" in comm.summary
    assert a.verdict.bound == "communication"  # the job's step waits for the slow rank
    assert f"rank {slow} is the slowest" in a.verdict.basis


def test_a_waiting_rank_slower_at_the_same_calls_waits_for_the_straggler():
    """Two CPU ranks share the host's cores: in one capture of the straggler case the
    waiting rank's ops run slower than the same calls on the slow rank (its compute
    fills time the wait would hold).  Read at the faster rank's pace, both captures are
    communication-bound, as the loop measured without DDP says; where the ranks make
    different calls (rank 0 alone evaluates) nothing is moved."""
    case = "pt_ddp_gloo_straggler"
    truth = json.loads((CORPUS / case / "truth.json").read_text())["shares"]
    moved = 0
    for k in (0, 1):
        _, a = analyzed(capture(case, k))
        hosts = sorted(a.breakdown.hosts, key=lambda h: h.rank)
        assert np.array_equal(hosts[0].calls, hosts[1].calls) and hosts[0].calls.sum() > 0
        assert a.verdict.bound == "communication"
        assert abs(a.verdict.shares["communication"] - truth["communication"]) < 0.1
        moved += "same calls on the fastest rank" in a.verdict.basis
    assert moved == 1  # only the capture whose waiting rank ran its ops slower
    _, a = analyzed(capture("pt_ddp_gloo_rank0_eval"))
    hosts = sorted(a.breakdown.hosts, key=lambda h: h.rank)
    assert hosts[0].calls.sum() > hosts[1].calls.sum()  # rank 0's evaluation steps
    assert "same calls" not in a.verdict.basis


def test_ddp_bucket_copies_count_as_communication_on_every_rank():
    """DDP copies each gradient into the flat bucket its all-reduce sends and the reduced
    bucket back: a loop without DDP runs neither, so both are communication on every rank,
    and the verdict's communication share, waits and copies, follows what the same loop
    without DDP saves (a 21 M-parameter MLP whose all-reduce is about half the step)."""
    case = "pt_ddp_gloo_large_allreduce"
    truth = json.loads((CORPUS / case / "truth.json").read_text())["shares"]
    for k in (0, 1):
        t, a = analyzed(capture(case, k))
        for h in a.breakdown.hosts:
            idx = t.lane_slices(h.lane)
            bucket = idx[["reducer::" in t.name_of(int(i)) for i in idx]]
            assert len(bucket) and set(R.host_roles(t, bucket)) == {R.COMMUNICATION}
            steps = (h.ends - h.starts).sum()
            assert h.column("communication").sum() / steps > 0.38  # waits alone: 0.28-0.35
        assert abs(a.verdict.shares["communication"] - truth["communication"]) < 0.1


def test_cpu_collectives_are_in_stats_and_fleet():
    from sofa_gui.core.analysis.stats import compute_table
    from sofa_gui.core.fleet.cross import cross_rank
    from sofa_gui.core.fleet.summary import summarize

    folder = capture("pt_ddp_gloo_straggler")
    rank0 = sorted(folder.glob("rank*.json*"))[0]
    t = load_trace(rank0, use_cache=False)
    table = compute_table(t, "collective")
    assert table.instances > 0 and any("gloo" in r.name for r in table.rows)
    sums = []
    for r, p in enumerate(sorted(folder.glob("rank*.json*"))):
        tr = load_trace(p, use_cache=False)
        sums.append(summarize(r, str(p), tr, analyze(tr)))
    res = cross_rank(sums)
    assert res.stragglers, "two CPU ranks: the slower one is a straggler"
    st = res.stragglers[0]
    assert st.cause not in ("communication", "unknown")
    assert res.findings[0].id.startswith("straggler") and res.findings[0].ranks == [st.rank]


def test_keras_fit_waits_for_its_input_fetch_on_a_tf_data_thread():
    t, a = analyzed(DATA / "keras-fit-python-map")
    assert a.iterations.method == "annotations"  # Keras 3's "Profiled batch step N"
    assert a.iterations.labels[0].startswith("Profiled batch step")
    host = a.breakdown.host
    assert t.lanes.name[host.lane] == "python"
    share = host.column("data_loading").sum() / (host.ends - host.starts).sum()
    assert share > 0.1  # IteratorGetNextOp::DoCompute runs on another thread
    assert a.findings[0].id == "input_pipeline_bound"
    assert a.input_pipeline.wait_share == pytest.approx(share, abs=0.05)


def test_a_blocking_read_of_a_jitted_result_waits_for_xla_compute():
    t, a = analyzed(capture("jax_infer_jit"))
    host = a.breakdown.host
    fwd = host.column("forward").sum() / (host.ends - host.starts).sum()
    assert fwd > 0.5  # `$numpy asarray` waits while the PjRt client thread computes
    assert a.verdict.bound == "compute"


# -- periodic extras ------------------------------------------------------------------------
def test_periodic_extra_needs_calls_the_other_iterations_do_not_make():
    from sofa_gui.core.analysis.iterations.recurring import recurs

    t, a = analyzed(DATA / "torch-loops" / "checkpoint.json.gz")
    it = a.iterations
    lane = a.breakdown.host.lane
    holders = [4, 9, 14]  # torch.save after every 5th step
    regular = [i for i in range(len(it)) if i not in holders and i > 0]
    assert recurs(t, lane, it.starts, it.ends, it.durations, holders, regular)[0]
    # the same number of ordinary steps, alternate ones: no extra work, whatever their times
    fake = [1, 3, 5]
    rest = [i for i in regular if i not in fake]
    ok, why = recurs(t, lane, it.starts, it.ends, it.durations, fake, rest)
    assert not ok and "no call the others lack" in why


def test_no_periodic_extra_on_steps_that_only_wait_longer():
    t, a = analyzed(capture("pt_train_input_nw2_alternate"))
    assert "periodic_extra" not in [f.id for f in a.findings]
    assert a.verdict.bound == "input"


# -- run facts ------------------------------------------------------------------------------
def test_cpu_autocast_is_low_precision_and_gets_no_autocast_advice():
    """Not told to autocast what already is; told to leave bf16 only on the condition
    the trace cannot prove (a CPU without bf16 instructions), with no speed-up claimed."""
    t, a = analyzed(capture("pt_train_autocast_bf16"))
    prec = a.run.get("precision")
    assert prec.value == "low" and "bf16" in prec.detail
    for f in a.findings:
        assert not any("torch.autocast" in x.text for x in f.fixes), f.id
        assert all(x.conditional and x.estimate is None for x in f.fixes
                   if "fp32" in x.text), f.id


def test_training_mode_from_tf_gradient_ops_and_xla_step_names():
    tape = run_facts(load_trace(capture("tf_gradient_tape"), use_cache=False))
    assert tape.value("mode") == "training"
    jax = run_facts(load_trace(DATA / "tf" / "jax_train", use_cache=False))
    assert jax.value("mode") == "training"


def test_plain_python_gets_no_framework_fixes():
    t, a = analyzed(DATA / "recording-plain-python")
    assert a.run.value("framework") == "python"
    for f in a.findings:
        assert all(x.framework == "any" for x in f.fixes), f.id


def test_reads_inside_the_optimizer_step_are_not_a_host_read_loop():
    t, a = analyzed(capture("pt_train_adamw_foreach"))
    assert "host_reads_in_loop" not in [f.id for f in a.findings]
    assert a.run.value("optimizer") == "foreach"


# -- small-batch inference and the verdict ---------------------------------------------------
def test_batch_one_inference_is_op_overhead_with_batching_advice():
    truth = json.loads((CORPUS / "pt_infer_batch1_convnet" / "truth.json").read_text()) \
        if (CORPUS / "pt_infer_batch1_convnet").exists() else None
    t, a = analyzed(capture("pt_infer_batch1_convnet"))
    top = a.findings[0]
    assert top.id == "op_overhead_bound" and "batches of 1" in top.summary
    assert any("Batch the requests" in x.text for x in top.fixes)
    assert a.verdict.bound == "host_overhead"
    measured = truth["fix"]["speedup"]
    assert abs(top.estimated_speedup / measured - 1) <= 0.5


def test_verdict_names_compute_on_a_batched_convnet_and_small_findings_say_so():
    from sofa_gui.core.analysis.verdict import note_small_findings

    t, a = analyzed(capture("pt_infer_batched_convnet"))
    assert a.verdict.bound == "compute" and a.verdict.share > 0.5
    d = a.verdict.to_dict()
    assert set(d) >= {"bound", "share", "basis"}
    small = [f for f in a.findings if f.share < 0.10]
    if small and a.findings[0] in small:
        assert a.findings[0].summary.startswith("Smaller than what limits the run")
    fake = type(a.findings[0]) if a.findings else None
    if fake is not None:  # a 6% finding ranked first says it is smaller than the bound
        f = fake("input_pipeline_bound", "Input", "medium", 0.06, 1.06, "x", [], [])
        note_small_findings([f], a.verdict)
        assert f.summary.startswith("Smaller than what limits the run")


def test_verdict_is_in_json_text_report_first():
    from sofa_gui.core.analysis.report import markdown_report
    from sofa_gui.core.analysis.text import verdict_text

    t, a = analyzed(DATA / "keras-fit-python-map")
    doc = a.to_dict(t)
    assert doc["verdict"]["bound"] in ("compute", "input")
    assert verdict_text(a.verdict)[0].startswith("Verdict: ")
    md = markdown_report(t, a).splitlines()
    assert md[2].startswith(f"**{a.verdict.headline}**")


# -- findings that do not contradict themselves ----------------------------------------------
def test_counter_findings_from_a_few_samples_say_so():
    from sofa_gui.core.analysis.findings.counter_rules import (
        FEW_SAMPLES_CONFIDENCE,
        HANDFUL,
    )
    from sofa_gui.core.analysis.findings.counter_rules import few_samples as few

    a, notes = few(HANDFUL - 3, 0.8)
    assert a <= FEW_SAMPLES_CONFIDENCE and "only 2 counter samples" in notes[0]
    assert few(HANDFUL, 0.8)[0] == 0.8


def test_cpu_bound_states_how_busy_the_other_core_is():
    t, a = analyzed(DATA / "recording-plain-python")
    for f in a.findings:
        if f.id == "cpu_bound":
            assert "mostly idle" not in f.summary and "% busy on average" in f.summary
        if f.id in ("cpu_bound", "cpu_contention"):
            others = [g.id for g in a.findings if g.id in ("cpu_bound", "cpu_contention")
                      and g.id != f.id]
            assert f.disjoint_with == others


def test_each_rule_quotes_its_own_thresholds():
    from sofa_gui.core.analysis.findings import RULES

    spec = RULES["input_pipeline_bound"]
    assert spec.grading("input-bound") == (
        f"Thresholds: >= {100 * spec.moderate:g}% moderately, >= {100 * spec.high:g}% "
        "highly input-bound.")
    assert "{" not in "".join(r.grounded for r in RULES.values())
    assert np.all([0 < v <= 1 for r in RULES.values() for v in r.factors.values()])


def test_quantized_ops_are_int8_precision_and_get_no_mixed_precision_advice():
    """A dynamically quantized model runs ``quantized::linear_dynamic``: it computes in
    int8 already, so no advice to move it to bf16/fp16."""
    t, a = analyzed(capture("pt_infer_dynamic_int8"))
    fact = run_facts(t).get("precision")
    assert fact.value == "int8" and "quantized::" in fact.proof
    for f in a.findings:
        assert not any("autocast" in x.text or "mixed precision" in x.text.lower()
                       for x in f.fixes), f.id
