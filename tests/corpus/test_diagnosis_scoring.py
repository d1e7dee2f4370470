"""``benchmarks/diagnosis.py`` scores an ``analyze --json`` answer against a case's truth:
the verdict first (top finding without one), confident false positives, estimates
within 25% of the measured fix, run facts."""

from __future__ import annotations

TRUTH = {"case": "c", "bound": "input", "bound_share": 0.6,
         "shares": {"input": 0.6, "compute": 0.38, "periodic": 0.02},
         "noise": {"step_cv": 0.05}, "fix": {"speedup": 2.0},
         "facts": {"framework": "pytorch", "mode": "training", "dataloader_workers": 0,
                   "optimizer": "adamw_foreach", "precision": "bf16"}}


def finding(fid, conf=0.9, est=None):
    return {"id": fid, "confidence": conf, "estimated_speedup": est}


def test_the_verdict_wins_over_the_top_finding_and_the_top_finding_stands_in(diag):
    doc = {"findings": [finding("compute_bound")]}
    assert diag.prediction(doc) == ("compute", "compute_bound")
    doc["verdict"] = {"bound": "input", "share": 0.6, "basis": "..."}
    assert diag.prediction(doc)[0] == "input"
    assert diag.prediction({"findings": []}) == ("none", "no finding")


def test_finding_ids_and_verdict_words_map_to_bounds(diag):
    assert diag.bound_of("host_reads_in_loop") == "sync"
    assert diag.bound_of("straggler_holds_collectives") == "communication"
    assert diag.bound_of("Host overhead") == "host_overhead"
    assert diag.bound_of("start-up") == "startup"
    assert diag.bound_of("some_new_input_wait_rule") == "input"  # an id added later
    assert diag.bound_of(None) == "none"


def test_confident_findings_of_absent_bottlenecks_are_false_positives(diag):
    doc = {"findings": [finding("input_pipeline_bound"), finding("periodic_extra", 0.7),
                        finding("host_reads_in_loop", 0.4),
                        finding("iteration_jitter", 0.6)]}
    # periodic work is 2% (< 5%): a false positive; the read-back finding is not
    # confident; jitter on steps that vary by 5% is one too
    assert diag.false_positives(doc, TRUTH) == ["periodic_extra (0.7)",
                                                "iteration_jitter (0.6)"]
    noisy = {**TRUTH, "noise": {"step_cv": 0.3}}
    assert diag.false_positives(doc, noisy) == ["periodic_extra (0.7)"]


def test_estimates_are_checked_against_the_measured_fix_within_25_percent(diag):
    ok = diag.estimate_check({"findings": [finding("compute_bound", est=1.1),
                                           finding("input_pipeline_bound", est=2.4)]}, TRUTH)
    assert ok == {"estimated": 2.4, "measured": 2.0, "within": True,
                  "finding": "input_pipeline_bound"}
    far = diag.estimate_check({"findings": [finding("input_pipeline_bound", est=1.3)]},
                              TRUTH)
    assert far["within"] is False
    assert diag.estimate_check({"findings": []}, TRUTH)["within"] is False
    assert diag.estimate_check({"findings": []}, {**TRUTH, "fix": None}) is None


def test_run_facts_are_compared_in_the_analyzer_s_terms(diag):
    run = {"framework": {"value": "pytorch"}, "mode": {"value": "inference"},
           "dataloader": {"value": "single_process"}, "optimizer": {"value": "foreach"},
           "precision": {"value": None}}
    got = diag.facts_check({"run": run}, TRUTH)
    assert {k: ok for k, (_, _, ok) in got.items()} == {
        "framework": True, "mode": False, "dataloader_workers": True, "optimizer": True,
        "precision": False}


def test_the_score_compares_the_estimate_of_the_fix_that_was_measured(diag):
    f = {"id": "input_pipeline_bound", "estimated_speedup": 3.0,
         "estimated_by": "cache pre-processed data",
         "fixes": [{"name": "loader workers", "estimated_speedup": 1.3},
                   {"name": "cache pre-processed data", "estimated_speedup": 3.0}]}
    truth = {"bound": "input", "fix": {"what": "num_workers=2", "speedup": 1.33}}
    got = diag.estimate_check({"findings": [f]}, truth)
    assert got["estimated"] == 1.3 and got["within"] is True
    other = {"bound": "input", "fix": {"what": "something else", "speedup": 1.33}}
    assert diag.estimate_check({"findings": [f]}, other)["estimated"] == 3.0


def test_a_measured_slowdown_is_right_unless_the_advisor_promises_a_gain_for_it(diag):
    """Autocast off measured 0.6x on a CPU with bf16 instructions: not offering it, or
    offering it on a condition with no estimate, is right; promising a gain is wrong."""
    truth = {"bound": "compute", "fix": {"what": "autocast off (fp32)", "speedup": 0.6}}
    leave = {"name": "fp32 on the CPU", "estimated_speedup": None}
    f = {"id": "compute_bound", "estimated_speedup": 1.65, "fixes": [leave]}
    assert diag.estimate_check({"findings": [f]}, truth)["within"] is True
    f["fixes"] = []  # not offered at all: the finding's estimate is for other fixes
    assert diag.estimate_check({"findings": [f]}, truth)["within"] is True
    f["fixes"] = [{"name": "fp32 on the CPU"}]  # offered under the finding's estimate
    got = diag.estimate_check({"findings": [f]}, truth)
    assert got["within"] is False and got["estimated"] == 1.65
    workers = {"bound": "input", "fix": {"what": "num_workers=2", "speedup": 0.7}}
    f = {"id": "input_pipeline_bound", "estimated_speedup": 1.6,
         "fixes": [{"name": "loader workers", "estimated_speedup": 1.0}]}
    assert diag.estimate_check({"findings": [f]}, workers)["within"] is True
    f["fixes"][0]["estimated_speedup"] = 1.3
    assert diag.estimate_check({"findings": [f]}, workers)["within"] is False
    assert diag.estimate_check({"findings": []}, workers)["within"] is True


def test_the_score_compares_the_planned_setting_with_its_measured_variant(diag):
    """A truth that measured one and two loader workers: the estimate is compared with the
    setting the advisor plans; a plan of none is right when no setting gained 25%."""
    variants = {"num_workers=2": {"speedup": 1.2}, "num_workers=1": {"speedup": 0.8}}
    truth = {"bound": "input",
             "fix": {"what": "num_workers=2", "speedup": 1.2, "variants": variants}}

    def doc(n, est):
        fix = {"name": "loader workers", "estimated_speedup": est,
               "settings": {"num_workers": n, "main_threads": 1}}
        return {"findings": [{"id": "input_pipeline_bound", "estimated_speedup": 2.0,
                              "fixes": [fix]}]}
    one = diag.estimate_check(doc(1, 0.9), truth)
    assert (one["measured"], one["setting"], one["within"]) == (0.8, "num_workers=1", True)
    two = diag.estimate_check(doc(2, 1.6), truth)
    assert (two["measured"], two["within"]) == (1.2, False)  # 1.6 is 33% over 1.2
    none = diag.estimate_check(doc(0, 1.0), truth)
    assert none["setting"] == "none helps" and none["within"] is True
    variants["num_workers=2"]["speedup"] = 1.4  # a setting gained 40%: none was wrong
    assert diag.estimate_check(doc(0, 1.0), truth)["within"] is False


def test_a_change_the_advisor_does_not_offer_is_right_only_when_it_gains_little(diag):
    """A measured prefetch that the advisor does not offer: right at 1.06x (nothing to
    offer), wrong at 1.5x (a fix that helps was missed); the finding's estimate of its
    other fixes is not compared with it."""
    truth = {"bound": "input", "fix": {"what": "prefetch(2)", "speedup": 1.06}}
    f = {"id": "input_pipeline_bound", "estimated_speedup": 2.6,
         "fixes": [{"name": "cache pre-processed data", "estimated_speedup": 2.6}]}
    got = diag.estimate_check({"findings": [f]}, truth)
    assert (got["estimated"], got["within"], got["said"]) == (None, True, "no gain promised")
    truth["fix"]["speedup"] = 1.5
    assert diag.estimate_check({"findings": [f]}, truth)["within"] is False


def test_a_change_offered_under_the_other_bound_of_a_near_tie_is_compared(diag):
    """Compute 0.51 against input 0.49 in the truth, the parallel map offered under the
    input finding: its estimate is the advisor's for that change."""
    truth = {"bound": "compute", "fix": {"what": "num_parallel_calls + prefetch",
                                         "speedup": 1.35}}
    compute = {"id": "compute_bound", "estimated_speedup": 1.6, "fixes": []}
    inp = {"id": "input_pipeline_bound", "estimated_speedup": 2.6,
           "fixes": [{"name": "parallel map", "estimated_speedup": 1.34}]}
    got = diag.estimate_check({"findings": [inp, compute]}, truth)
    assert (got["estimated"], got["within"], got["finding"]) == (1.34, True, "compute_bound")


def test_a_fused_optimizer_or_a_vectorised_parse_compares_the_fix_that_makes_it(diag):
    """A measured ``fused=True`` compares the fused optimizer's own estimate, records
    batched before they are parsed the cheaper-samples fix's (which vectorises per-sample
    ops with .batch() before .map()), not the compute hypothesis of the true bound."""
    compute = {"id": "compute_bound", "estimated_speedup": 1.86, "fixes": []}
    loop = {"id": "op_overhead_bound", "estimated_speedup": 1.4,
            "fixes": [{"name": "fused optimizer", "estimated_speedup": 1.16}]}
    truth = {"bound": "compute", "fix": {"what": "AdamW(fused=True)", "speedup": 1.12}}
    got = diag.estimate_check({"findings": [loop, compute]}, truth)
    assert (got["estimated"], got["within"]) == (1.16, True)
    inp = {"id": "input_pipeline_bound", "estimated_speedup": 1.07,
           "fixes": [{"name": "cheaper samples", "estimated_speedup": 1.07}]}
    truth = {"bound": "compute", "fix": {"what": "records batched first, each batch parsed "
                                                 "with one parse call", "speedup": 1.25}}
    got = diag.estimate_check({"findings": [compute, inp]}, truth)
    assert (got["estimated"], got["within"]) == (1.07, True)


def test_a_hypothesis_promises_its_gain_only_for_the_change_it_assumes(diag):
    """The compute hypothesis (2x faster compute) against a measured change it does not
    show as a fix (float64 batches put on the device once): no gain promised, right when
    the change gains little, wrong when it gains more; against more intra-op threads,
    which it shows as a fix, its estimate is compared."""
    compute = {"id": "compute_bound", "estimated_speedup": 1.82,
               "estimate_assumes": "2x faster compute",
               "fixes": [{"name": "more intra-op threads"}]}
    truth = {"bound": "compute", "fix": {"what": "the data put on the device once",
                                         "speedup": 1.05}}
    got = diag.estimate_check({"findings": [compute]}, truth)
    assert (got["estimated"], got["within"], got["said"]) == (None, True, "no gain promised")
    truth["fix"]["speedup"] = 1.5
    assert diag.estimate_check({"findings": [compute]}, truth)["within"] is False
    threads = {"bound": "compute", "fix": {"what": "the default intra-op threads",
                                           "speedup": 1.69}}
    got = diag.estimate_check({"findings": [compute]}, threads)
    assert (got["estimated"], got["within"]) == (1.82, True)
    measured = {**compute, "fixes": []}
    del measured["estimate_assumes"]  # an estimate read off the trace is a promise
    assert diag.estimate_check({"findings": [measured]}, truth)["estimated"] == 1.82


def test_a_frozen_part_computed_once_compares_that_fix_s_own_estimate(diag):
    """Features of a frozen base computed once compare the frozen-part fix's estimate, not
    the compute hypothesis's; without that fix shown nothing is promised for them."""
    fix = {"name": "frozen part computed once", "estimated_speedup": 14.0}
    compute = {"id": "compute_bound", "estimated_speedup": 1.94, "estimate_assumes": "2x",
               "fixes": [fix]}
    truth = {"bound": "compute", "fix": {"what": "the frozen base's features computed once, "
                                                 "the head fit on them", "speedup": 15.2}}
    got = diag.estimate_check({"findings": [compute]}, truth)
    assert (got["estimated"], got["within"]) == (14.0, True)
    got = diag.estimate_check({"findings": [{**compute, "fixes": []}]}, truth)
    assert (got["within"], got["said"]) == (False, "no gain promised")


def test_python_preprocessing_rewritten_as_tf_ops_compares_that_fix_not_the_prefetch(diag):
    """Tokenising moved from a Python generator into a ``TextVectorization`` layer mapped
    in parallel (then prefetched) is the tf.data-ops fix, whatever the prefetch after it:
    its estimate is compared, not the absence of a prefetch-only fix."""
    truth = {"bound": "input", "fix": {"what": "TextVectorization in a parallel map over "
                                               "raw-text batches + prefetch", "speedup": 3.57}}
    f = {"id": "input_pipeline_bound", "estimated_speedup": 4.1,
         "fixes": [{"name": "tf.data ops in parallel", "estimated_speedup": 3.69},
                   {"name": "cache", "estimated_speedup": 4.1}]}
    got = diag.estimate_check({"findings": [f]}, truth)
    assert (got["estimated"], got["within"]) == (3.69, True)


def test_the_spread_of_a_case_s_estimates_between_captures_is_summarised(diag):
    def case(*ests):
        return {"case": "c", "split": "tuned", "truth": "input", "share": 0.6, "stable": True,
                "captures": [{"predicted": "input", "estimate":
                              None if e is None else {"estimated": e, "measured": 2.0,
                                                      "within": True}} for e in ests]}

    assert abs(diag.estimate_spread(case(2.0, 4.0)) - 0.6931) < 1e-3
    assert diag.estimate_spread(case(4.0, 2.0)) == diag.estimate_spread(case(2.0, 4.0))
    assert diag.estimate_spread(case(2.0, None)) is None  # one capture without an estimate
    assert diag.estimate_spread(case(2.0)) is None  # nothing to part from
    s = diag.summary([case(2.0, 2.0), case(2.0, 4.0), case(3.0, None)])
    assert s["spread"] == [0.0, diag.estimate_spread(case(2.0, 4.0))]
    head = "\n".join(diag.render([case(2.0, 2.0), case(2.0, 4.0)], True)[:3])
    assert "|ln(est1/est2)| 0.347 median, 0.69 summed (2 cases)" in head
