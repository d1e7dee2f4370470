"""The catalog of fixes ``sofa-gui try`` applies from outside, and the verdict it gives."""

from __future__ import annotations

from sofa_gui.core.analysis.findings.fixes import FIXES
from sofa_gui.core.analysis.try_result import HOLDS, tried_label, try_text, verdict
from sofa_gui.core.analysis.tryable import (
    CODE,
    SHIM_PREFIX,
    TRYABLE,
    env_for,
    loader_workers,
    tryables_for,
)


def test_the_outside_fixes_are_declared_with_how_they_are_applied():
    for fix_id in ("loader-workers", "pin-memory", "prefetch-factor", "cudnn-benchmark",
                   "tf32-matmul", "gc-freeze", "intra-op-threads", "xla-auto-jit",
                   "tfdata-autotune"):
        assert TRYABLE[fix_id].from_outside, fix_id
    code = [t for t in TRYABLE.values() if t.how == CODE]
    assert code and all(t.change and not t.from_outside for t in code)


def test_every_tryable_answers_a_fix_the_advisor_gives():
    answered = {t.id for fid, fixes in FIXES.items() for f in fixes
                for t in tryables_for(fid, f)}
    assert answered == set(TRYABLE)


def test_the_input_finding_s_worker_fix_is_loader_workers():
    fix = next(f for f in FIXES["input_pipeline_bound"] if f.name == "loader workers")
    assert TRYABLE["loader-workers"] in tryables_for("input_pipeline_bound", fix)
    assert TRYABLE["loader-workers"] not in tryables_for("compute_bound", fix)


def test_without_a_plan_workers_leave_one_core_to_the_loop_and_its_threads_one_each():
    assert loader_workers(8) == (7, 1)
    assert loader_workers(1) == (1, 1)
    env = env_for(TRYABLE["loader-workers"], {}, cores_free=4)
    assert env == {f"{SHIM_PREFIX}LOADER_WORKERS": "3", f"{SHIM_PREFIX}PERSISTENT_WORKERS": "1",
                   f"{SHIM_PREFIX}MAIN_THREADS": "1"}


def test_the_advisor_s_plan_sets_the_workers_and_the_main_threads():
    plan = {"num_workers": 2, "main_threads": 3}
    env = env_for(TRYABLE["loader-workers"], {}, cores_free=8, plan=plan)
    assert env[f"{SHIM_PREFIX}LOADER_WORKERS"] == "2"
    assert env[f"{SHIM_PREFIX}MAIN_THREADS"] == "3"
    assert TRYABLE["loader-workers"].planned and TRYABLE["prefetch-factor"].planned
    assert not TRYABLE["gc-freeze"].planned


def test_flag_variables_are_appended_to_the_user_s_own():
    env = env_for(TRYABLE["xla-auto-jit"], {"TF_XLA_FLAGS": "--tf_xla_min_cluster_size=4"})
    assert env["TF_XLA_FLAGS"].startswith("--tf_xla_min_cluster_size=4 --tf_xla_auto_jit=2")
    assert env_for(TRYABLE["jax-single-thread-eigen"], {})["XLA_FLAGS"] == \
        "--xla_cpu_multi_thread_eigen=false"


def _result(pred, meas, **kw):
    out = {"fix": "loader-workers", "how": "shim", "rounds": 3, "predicted": pred,
           "predicted_by": None, "measured": {"steady_speedup": meas} if meas else None,
           "applied": {"environment": {}, "program": {"DataLoader.num_workers": 1}},
           "unprofiled": {"reason": "none"}, "unprofiled_speedup": None, "busy_cores": 0.1,
           "repeated_diff": None}
    out.update(kw)
    return out


def test_a_prediction_within_a_quarter_of_the_measurement_holds():
    assert verdict(_result(1.52, 1.48)) == "held: predicted 1.52x, measured 1.48x"
    assert verdict(_result(1.0, 1.0 / (1 - HOLDS) + 0.1)).startswith("did not hold, because")


def test_a_miss_names_what_else_the_runs_show():
    busy = verdict(_result(2.0, 1.1, busy_cores=1.7))
    assert "other processes kept 1.7 cores busy" in busy
    nothing = verdict(_result(2.0, 1.0, applied={"environment": {}, "program": {}}))
    assert "found nothing to change in the program" in nothing
    assert "nothing was predicted" in verdict(_result(None, 1.3))
    assert "no iteration time" in verdict(_result(1.5, None))


def test_the_text_and_the_finding_label_carry_both_numbers():
    r = _result(1.52, 1.48)
    r["verdict"] = verdict(r)
    assert try_text(r)[-1] == "held: predicted 1.52x, measured 1.48x"
    assert tried_label(r) == "tried: 1.48x measured (predicted 1.52x)"


def test_a_plan_of_no_workers_is_said_and_the_default_is_what_was_tried():
    r = _result(1.0, 1.05, plan={"num_workers": 0})
    r["verdict"] = verdict(r)
    text = try_text(r)
    assert "  BEFORE run 1's advisor expects no worker count to help on this machine: " \
        "tried with the default" in text
    assert not any("planned by" in line for line in text)
    r["plan"] = {"num_workers": 2, "main_threads": 1}
    assert "  planned by BEFORE run 1's advisor for this machine: num_workers=2, " \
        "main_threads=1" in try_text(r)


def test_without_a_profile_the_whole_runs_wall_times_are_measured():
    r = _result(1.5, None, unprofiled={"basis": "whole run"}, unprofiled_speedup=1.45)
    assert verdict(r) == "held: predicted 1.50x, measured 1.45x"
    assert tried_label(r) == "tried: 1.45x measured (predicted 1.50x)"


def test_the_unprofiled_steps_judge_and_the_profiled_gain_is_named_beside():
    r = _result(1.08, 0.70, unprofiled={"basis": "median step", "speedup": 1.15},
                unprofiled_speedup=1.15)
    assert verdict(r) == ("held: predicted 1.08x, measured 1.15x (the profiler changed the "
                          "gain (profiled 0.70x))")
    assert tried_label(r) == "tried: 1.15x measured (predicted 1.08x)"
    miss = verdict(_result(1.6, 1.55, unprofiled={"basis": "median step", "speedup": 1.02},
                           unprofiled_speedup=1.02))
    assert miss.startswith("did not hold, because the profiler changed the gain (profiled "
                           "1.55x)") and miss.endswith("(predicted 1.60x, measured 1.02x)")
