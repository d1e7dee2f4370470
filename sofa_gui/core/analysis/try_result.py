"""The result of ``sofa-gui try``: the runs' repeated diff, predicted against measured.

The prediction is the BEFORE runs' own estimate for the fix tried (the estimate of the
finding's fix that :func:`.tryable.tryables_for` maps to it; the finding's when the fix
has none), median over the runs. The measured speed-up is the repeated diff's
(:mod:`.diff_repeated`: the sides' median runs, steady-state mean iteration); mean,
median and p90 iteration ratios and the unprofiled step times of the same runs stand
beside it. The prediction *holds* when it is within :data:`HOLDS` of the measured one.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from ..errors import TraceFormatError
from .tryable import Tryable, tryables_for

#: Relative distance of prediction and measurement within which the prediction held.
HOLDS = 0.25
_BUSY_CORES = 0.5  # other processes' mean busy cores worth naming in a verdict


def summarize(fix: Tryable, folder: Path, runs: list[dict], env: dict[str, str],
              cores_free: int, plan: dict | None = None) -> dict:
    """The JSON result of a try whose runs (``run_record`` dicts, B A B A ...) are in
    ``folder``; ``plan`` the settings the AFTER runs got from the advisor."""
    loaded = [_load(folder / r["folder"]) for r in runs]
    befores, afters = loaded[::2], loaded[1::2]
    predicted = _predicted(fix, [a for _, a in befores if a is not None])
    rep = None
    if all(x[1] is not None for x in loaded):
        from .diff_repeated import diff_repeated
        rep = diff_repeated(list(zip(befores, afters)))
    measured = _measured(rep)
    unprofiled = _unprofiled(runs)
    applied = {"environment": env, "program": _merged(r["applied"] for r in runs[1::2])}
    out = {"fix": fix.id, "how": fix.how, "summary": fix.summary, "applied": applied,
           "rounds": len(runs) // 2, "cores_free": cores_free, "plan": plan,
           "predicted": predicted["speedup"] if predicted else None,
           "predicted_by": predicted, "measured": measured,
           "unprofiled_speedup": unprofiled.get("speedup"), "unprofiled": unprofiled,
           "runs": runs, "repeated_diff": rep}
    out["busy_cores"] = _busy(befores + afters)
    out["verdict"] = verdict(out)
    return out


def _load(path: Path):
    """(trace, analysis) of one run, or (reason, None) when it cannot be read."""
    from ..importers import load_trace
    from .pipeline import analyze
    try:
        trace = load_trace(path, use_cache=False)
    except TraceFormatError as exc:
        return exc.reason, None
    analysis = analyze(trace)
    if analysis.iterations is None or not len(analysis.iterations):
        return "no iterations in its profile", None
    return trace, analysis


def planned_settings(fix: Tryable, run_folder: Path) -> dict | None:
    """The ``settings`` (worker count, main threads) the advisor gives ``fix`` in the run
    recorded in ``run_folder``; None when it cannot be read or gives none."""
    _, analysis = _load(run_folder)
    if analysis is None:
        return None
    for finding in analysis.findings:
        for f in finding.fixes:
            if f.settings and fix in tryables_for(finding.id, f):
                return dict(f.settings)
    return None


def _predicted(fix: Tryable, analyses: list) -> dict | None:
    """Median over the BEFORE runs of the estimate for ``fix`` of the first finding (in
    the advisor's order) that names it."""
    picks = [p for p in (_estimate(fix, a) for a in analyses) if p is not None]
    if not picks:
        return None
    values = [p[1] for p in picks]
    finding = max({p[0] for p in picks}, key=[p[0] for p in picks].count)
    return {"speedup": round(median(values), 4), "finding": finding, "per_run": values,
            "runs": len(values), "basis": picks[0][2]}


def _estimate(fix: Tryable, analysis) -> tuple[str, float, str] | None:
    for finding in analysis.findings:
        for f in finding.fixes:
            if fix not in tryables_for(finding.id, f) or f.conditional:
                continue  # a fix shown on an unproven condition claims no speed-up
            est = f.estimate if f.estimate is not None else finding.estimated_speedup
            if est is not None:
                why = f.estimate_why or f"the finding's share {100 * finding.share:.0f}%"
                return finding.id, round(float(est), 4), why
    return None


def _measured(rep: dict | None) -> dict | None:
    if not rep or rep.get("basis") is None:
        return None
    out = {"steady_speedup": rep["measured_speedup"], "basis": rep["basis"],
           "per_round": rep["per_pair_speedup"]}
    for key, name in (("median_us", "median_speedup"), ("mean_us", "mean_speedup"),
                      ("p90_us", "p90_speedup")):
        b = [r["iteration_time"]["before"].get(key) for r in rep["rounds"]]
        a = [r["iteration_time"]["after"].get(key) for r in rep["rounds"]]
        out[name] = round(median(b) / median(a), 4) if all(b) and all(a) else None
    return out


def _unprofiled(runs: list[dict]) -> dict:
    """Median step of each run timed without the profiler; the sides' median runs."""
    per = {side: [median(r["unprofiled_step_ms"]) for r in runs
                  if r["side"] == side and r["unprofiled_step_ms"]]
           for side in ("before", "after")}
    if not per["before"] or len(per["after"]) != len(per["before"]) or \
            len(per["before"]) != len(runs) // 2:
        return _whole_runs(runs)
    b, a = median(per["before"]), median(per["after"])
    return {"basis": "median step", "before_ms": round(b, 3), "after_ms": round(a, 3),
            "speedup": round(b / a, 4), "per_run_ms": per}


def _whole_runs(runs: list[dict]) -> dict:
    """Without steps taken from a DataLoader (a TensorFlow or JAX program, or a loop of
    its own), the whole runs' wall times: the profiler never ran in them."""
    per = {side: [r["duration_s"] * 1e3 for r in runs if r["side"] == side and
                  not r["unprofiled_step_ms"] and r.get("duration_s")]
           for side in ("before", "after")}
    if not per["before"] or len(per["before"]) != len(per["after"]) or \
            len(per["before"]) != len(runs) // 2:
        return {"reason": "some runs took too few steps from a DataLoader to be timed"}
    b, a = median(per["before"]), median(per["after"])
    return {"basis": "whole run", "before_ms": round(b, 3), "after_ms": round(a, 3),
            "speedup": round(b / a, 4), "per_run_ms": per}


def _merged(dicts) -> dict:
    out: dict = {}
    for d in dicts:
        out.update(d)
    return out


def _busy(loaded: list) -> float | None:
    vals = [a.run.value("cpu_other") for _, a in loaded if a is not None]
    vals = [float(v) for v in vals if isinstance(v, (int, float))]
    return round(median(vals), 2) if vals else None


def measured_speedup(result: dict) -> float | None:
    """What the fix gave: the steps timed without the profiler (what the program does
    when nobody watches; the profiler's own work changes the gain, most of all when the
    fix moves work to other processes that share the cores with it); without them the
    profiled runs' steady-state speed-up; without a profile, the whole runs'."""
    unp = result.get("unprofiled") or {}
    if unp.get("basis") == "median step" and unp.get("speedup"):
        return unp["speedup"]
    meas = (result.get("measured") or {}).get("steady_speedup")
    if meas is None and unp.get("basis") == "whole run":
        meas = result.get("unprofiled_speedup")
    return meas


def _other_measure(result: dict, meas: float) -> str | None:
    """The profiled gain where the verdict judged by the unprofiled one and the two part
    by more than :data:`HOLDS`."""
    prof = (result.get("measured") or {}).get("steady_speedup")
    if prof and prof != meas and abs(prof / meas - 1.0) > HOLDS:
        return f"the profiler changed the gain (profiled {prof:.2f}x)"
    return None


def verdict(result: dict) -> str:
    """"held: predicted 1.52x, measured 1.48x" or "did not hold, because ..."."""
    pred, meas = result["predicted"], measured_speedup(result)
    if meas is None:
        return ("did not hold, because no iteration time could be measured in every "
                "profiled run (see each run's folder)")
    if pred is None:
        return (f"did not hold, because the BEFORE runs show no finding this fix answers: "
                f"nothing was predicted (measured {meas:.2f}x)")
    head = f"predicted {pred:.2f}x, measured {meas:.2f}x"
    if abs(pred / meas - 1.0) <= HOLDS:
        note = _other_measure(result, meas)
        return f"held: {head}" + (f" ({note})" if note else "")
    return f"did not hold, because {'; '.join(_reasons(result, pred, meas))} ({head})"


def _reasons(result: dict, pred: float, meas: float) -> list[str]:
    why = []
    if result["how"] == "shim" and not result["applied"]["program"]:
        why.append("the fix found nothing to change in the program (see try-applied.json)")
    busy = result.get("busy_cores")
    if busy is not None and busy >= _BUSY_CORES:
        why.append(f"other processes kept {busy:.1f} cores busy during the runs")
    unp = result.get("unprofiled_speedup")
    if unp and unp != meas and abs(unp / meas - 1.0) > HOLDS:
        why.append(f"the profiler changed the gain (unprofiled {unp:.2f}x)")
    elif _other_measure(result, meas):
        why.append(_other_measure(result, meas))
    grew = _rest_grew(result.get("repeated_diff"))
    if grew is not None and abs(grew) >= 0.10:
        why.append(f"the rest of the step {'grew' if grew > 0 else 'shrank'} "
                   f"{100 * abs(grew):.0f}% in AFTER")
    if not why:
        side = "below" if meas < pred else "above"
        why.append(f"the measured gain is {100 * abs(meas / pred - 1):.0f}% {side} the "
                   "prediction with nothing else changed that the runs show")
    return why


def _rest_grew(rep: dict | None) -> float | None:
    vals = [((r.get("prediction") or {}).get("rest_of_step") or {}).get("grew")
            for r in (rep or {}).get("rounds", [])]
    vals = [v for v in vals if v is not None]
    return median(vals) if vals else None


def try_text(result: dict) -> list[str]:
    """Readable lines: what was applied, measured (profiled, unprofiled), the verdict."""
    prog = result["applied"]["program"]
    applied = ", ".join(f"{k} {v}" for k, v in prog.items() if k != "loaders") \
        or "no change seen in the program"
    lines = [f"Tried {result['fix']} over {result['rounds']} round(s) (BEFORE, AFTER "
             f"interleaved): {applied}"]
    env = {k: v for k, v in result["applied"]["environment"].items()}
    if env:
        lines.append("  environment: " + " ".join(f"{k}={v}" for k, v in env.items()))
    plan = result.get("plan")
    if plan and plan.get("num_workers") == 0:  # the applied figures are the default's
        lines.append("  BEFORE run 1's advisor expects no worker count to help on this "
                     "machine: tried with the default")
    elif plan:
        lines.append("  planned by BEFORE run 1's advisor for this machine: " +
                     ", ".join(f"{k}={v}" for k, v in plan.items()))
    m = result["measured"]
    if m:
        extra = ", ".join(f"{lbl} {m[k]:.2f}x" for k, lbl in
                          (("mean_speedup", "mean"), ("median_speedup", "median"),
                           ("p90_speedup", "p90")) if m.get(k))
        lines.append(f"Measured (profiled, median runs): {m['steady_speedup']:.2f}x; "
                     f"iteration {extra}")
    unp = result["unprofiled"]
    if "speedup" in unp:
        what = "steps" if unp["basis"] == "median step" else "whole runs (no steps counted)"
        lines.append(f"Unprofiled {what} of the same runs: {unp['before_ms']:.1f} ms -> "
                     f"{unp['after_ms']:.1f} ms ({unp['speedup']:.2f}x)")
    else:
        lines.append(f"Unprofiled: not measured ({unp['reason']})")
    p = result["predicted_by"]
    if p:
        lines.append(f"Predicted by BEFORE's {p['finding']}: {p['speedup']:.2f}x (median of "
                     f"{p['runs']} runs; {p['basis']})")
    if result.get("busy_cores") is not None:
        lines.append(f"Other processes kept {result['busy_cores']:.1f} cores busy "
                     f"(median over the runs)")
    lines.append(result["verdict"])
    return lines


def tried_label(result: dict) -> str:
    """What a finding shows once its fix was tried: "tried: 1.48x measured (predicted 1.52x)"."""
    meas = measured_speedup(result)
    pred = result.get("predicted")
    m = f"{meas:.2f}x measured" if meas else "not measured"
    return f"tried: {m}" + (f" (predicted {pred:.2f}x)" if pred else "")
