"""``sofa-gui diff BEFORE AFTER``: did the fix work, and what changed?

Compares two analyzed runs: iteration time (mean, median and p90, with the slow
iterations a median hides, and the mean of the steady-state iterations), the BEFORE
run's predicted speed-up against the measured steady-state mean one, the
mean per-iteration time of every breakdown category, findings resolved / new /
persisting (with the speed-up each finding predicted against the one
measured), and the kernels and ops whose time per iteration changed most.
Names are matched as strings, so the two traces need not share anything else.
"""

from __future__ import annotations

import numpy as np

from ..trace import Kind, Trace
from ..units import fmt_ns
from .diff_pairs import paired_changes
from .figures import median_ns
from .findings import BELOW, disjoint_ids, evaluate_rules
from .host_side import window_of
from .palette import label_of
from .pipeline import Analysis
from .results import us

TOP_CHANGES = 15
#: Findings whose shares are disjoint slices of device time, so their savings add up.
DISJOINT = disjoint_ids("device_time")
_DEVICE_KINDS = {int(Kind.KERNEL): "kernel", int(Kind.COMMUNICATION): "communication",
                 int(Kind.MEMCPY): "memcpy", int(Kind.MEMSET): "memset", int(Kind.CPU_OP): "op"}


def diff_analyses(before: tuple[Trace, Analysis], after: tuple[Trace, Analysis]) -> dict:
    """``before``/``after`` are (trace, analysis) pairs; returns a JSON-able dict."""
    (ta, aa), (tb, ab) = before, after
    med_a, med_b = _median(aa), _median(ab)
    sa, sb = _stats(aa), _stats(ab)
    fnd = _findings(ta, aa, tb, ab, med_a / med_b if med_a and med_b else None)
    steady = _ratio(sa.get("steady_mean_us"), sb.get("steady_mean_us"))
    mean = _ratio(sa.get("mean_us"), sb.get("mean_us"))
    return {
        "before": _run(ta, aa, med_a),
        "after": _run(tb, ab, med_b),
        "median_iteration_ratio": _ratio(med_b, med_a),
        "speedup": _ratio(med_a, med_b),
        "iteration_time": {"before": sa, "after": sb,
                           "speedup": {k: _ratio(sa.get(k), sb.get(k))
                                       for k in ("mean_us", "median_us", "p90_us",
                                                 "steady_mean_us")}},
        "hidden_slow_iterations": {"before": _slow(aa), "after": _slow(ab)},
        "prediction": _with_rest(_prediction(fnd, steady or mean,
                                             "steady_mean" if steady else "mean"), aa, ab),
        "categories": {side: _categories(aa.breakdown, ab.breakdown, side)
                       for side in ("device", "host")},
        "findings": fnd,
        "top_changes": _top_changes(ta, aa, tb, ab),
    }


#: An iteration this many times the median is "slow" (a median does not show it).
SLOW = 1.25


def _durations(analysis) -> np.ndarray:
    bd = analysis.breakdown
    return (bd.durations if bd is not None else analysis.iterations.durations).astype(float)


def _stats(analysis) -> dict:
    d = _durations(analysis)
    if not len(d):
        return {}
    out = {"n": int(len(d)), "mean_us": us(float(d.mean())),
           "median_us": us(_median(analysis)),
           "p90_us": us(float(np.percentile(d, 90))), "max_us": us(float(d.max()))}
    steady = _steady(analysis)
    if steady is not None and steady.any():
        out["steady_n"] = int(steady.sum())
        out["steady_mean_us"] = us(float(d[steady].mean()))
        out["left_out"] = np.flatnonzero(~steady).tolist()
    return out


def _steady(analysis) -> np.ndarray | None:
    """Steady-state rows by the advisor's own rule (warm-up and periodic extras left out):
    the iterations its predictions are about."""
    bd = analysis.breakdown
    if bd is None or bd.whole_trace or analysis.iterations is None:
        return None
    from .findings.steady import loader_waits, phases
    return phases(analysis.iterations, bd.durations, bd.whole_trace,
                  loader_waits(bd, analysis.run)).steady


def _ratio(a, b):
    """a / b to 4 places; None when either is 0 or missing (zero-length iterations) or
    the ratio rounds to 0."""
    return (round(a / b, 4) or None) if a and b else None


def _slow(analysis) -> list[dict]:
    """Iterations >= SLOW x the median: a median-only comparison does not see them."""
    d = _durations(analysis)
    med = _median(analysis) if len(d) >= 3 else 0.0
    if med <= 0:  # zero-length iterations: no median to compare with
        return []
    return [{"index": int(i), "duration_us": us(float(d[i])), "x_median": round(d[i] / med, 2)}
            for i in np.flatnonzero(d >= SLOW * med).tolist()]


def _prediction(fnd: dict, measured_mean: float | None, basis: str = "mean") -> dict | None:
    """The BEFORE run's prediction for the finding that shrank most, against the measured
    mean speed-up (the total time a user waits) of the steady-state iterations when the
    advisor left warm-up or periodic extras out (the prediction is about those; a worker's
    start-up in AFTER's first step is one-off work), else of all iterations."""
    rows = [r for r in fnd["resolved"] + fnd["persisting"]
            if r["predicted_speedup"] and r["saved_per_iteration_us"] > 0]
    if not rows or not measured_mean:
        return None
    r = max(rows, key=lambda r: r["saved_per_iteration_us"])
    pred = r["predicted_speedup"]
    out = {"finding": r["id"], "predicted_speedup": pred, "measured_speedup": measured_mean,
           "measured_over": basis, "error": round(pred / measured_mean - 1.0, 4)}
    if "fix_applied" in r:
        out["fix_applied"] = r["fix_applied"]
    elif "predicted_by" in r:
        out["predicted_by"] = r["predicted_by"]
    return out


#: Main-thread categories a fix of the finding changes; the prediction assumes the rest of
#: the step stays (up to the interference it names).
_FIX_TOUCHES = {"input_pipeline_bound": ("data_loading",)}
#: Change of the rest of the step worth saying (growth or shrinkage): it moves the
#: measured gain by itself.
REST_GREW = 0.10


def _with_rest(pred: dict | None, aa: Analysis, ab: Analysis) -> dict | None:
    """Add what happened to the part of the step the fix does not touch (AFTER's forward,
    backward, optimizer... against BEFORE's, steady means): when it grew or shrank by
    REST_GREW or more, the measured gain mixes the fix with another change, and the error
    against the AFTER run with that part as in BEFORE is given too."""
    touched = _FIX_TOUCHES.get(pred["finding"]) if pred else None
    ha = aa.breakdown.host if touched and aa.breakdown is not None else None
    hb = ab.breakdown.host if touched and ab.breakdown is not None else None
    if ha is None or hb is None or pred.get("measured_over") != "steady_mean":
        return pred
    steady = _steady(aa), _steady(ab)  # the advisor's rule, run once per side
    rows = [_rest_per_category(h, touched, m) for h, m in ((ha, steady[0]), (hb, steady[1]))]
    ra, rb = sum(rows[0].values()), sum(rows[1].values())
    if ra <= 0:
        return pred
    grew = rb / ra - 1.0
    delta = {c: us(rows[1][c] - rows[0].get(c, 0.0)) for c in rows[1]}
    pred["rest_of_step"] = {"before_us": us(ra), "after_us": us(rb), "grew": round(grew, 4),
                            "delta_us": {c: v for c, v in delta.items() if abs(v) >= 1}}
    t0, t1 = _steady_mean_ns(aa, steady[0]), _steady_mean_ns(ab, steady[1])
    if abs(grew) >= REST_GREW and t0 and t1 > rb - ra:
        as_before = t0 / (t1 - (rb - ra))
        pred["rest_of_step"]["measured_if_unchanged"] = round(as_before, 4)
        pred["rest_of_step"]["error_if_unchanged"] = round(
            pred["predicted_speedup"] / as_before - 1.0, 4)
    return pred


def _rest_per_category(host, touched, steady) -> dict[str, float]:
    """Mean ns per steady iteration of each main-thread category the fix leaves alone."""
    t = host.times if steady is None else host.times[steady]
    return {c: float(t[:, k].mean()) for k, c in enumerate(host.categories)
            if c not in touched and len(t)}


def _steady_mean_ns(analysis: Analysis, steady) -> float:
    d = _durations(analysis)
    d = d if steady is None else d[steady]
    return float(d.mean()) if len(d) else 0.0


def _median(analysis: Analysis) -> float:
    """Duration of the median iteration (the one every surface shows), or of the whole
    trace's span when there are no iterations."""
    it = analysis.iterations
    med = median_ns(it) if it is not None else None
    if med is not None:
        return float(med)
    d = _durations(analysis)
    return float(d[len(d) // 2]) if len(d) else 0.0


def _run(trace: Trace, analysis: Analysis, med: float) -> dict:
    bd = analysis.breakdown
    return {
        "path": trace.meta.source,
        "iterations": len(analysis.iterations),
        "scope": "whole_trace" if bd is None or bd.whole_trace else "iterations",
        "median_iteration": (analysis.iterations.median_index
                             if analysis.iterations is not None and len(analysis.iterations)
                             else None),
        "median_iteration_us": us(med),
        "device": bd.device.label if bd is not None and bd.device is not None else None,
    }


def _mean_row(bd, side: str) -> dict[str, float]:
    if bd is None:
        return {}
    obj = bd.device if side == "device" else bd.host
    if obj is None or not len(obj.times):
        return {}
    return dict(zip(obj.categories, (obj.times.sum(axis=0) / len(obj.times)).tolist()))


def _categories(bda, bdb, side: str) -> list[dict]:
    a, b = _mean_row(bda, side), _mean_row(bdb, side)
    cats = list(a) or list(b)
    out = []
    for c in cats:
        va, vb = a.get(c, 0.0), b.get(c, 0.0)
        if va or vb:
            out.append({"category": c, "before_us": us(va), "after_us": us(vb),
                        "delta_us": us(vb - va)})
    return out


def _findings(ta: Trace, aa: Analysis, tb: Trace, ab: Analysis, measured: float | None) -> dict:
    sa = {f.id: f for f in evaluate_rules(ta, aa.iterations, aa.breakdown, aa.run)}
    sb = {f.id: f for f in evaluate_rules(tb, ab.iterations, ab.breakdown, ab.run)}
    shown_a = {f.id for f in aa.findings}
    shown_b = {f.id for f in ab.findings}

    mean_a, mean_b = _mean_iteration(aa), _mean_iteration(ab)

    def saved(fid: str) -> float:
        """ns per iteration that this bottleneck shrank by (shares times mean iteration)."""
        ta_ = sa[fid].share * mean_a if fid in sa else 0.0
        tb_ = sb[fid].share * mean_b if fid in sb else 0.0
        return ta_ - tb_

    def row(fid: str) -> dict:
        fa, fb = sa.get(fid), sb.get(fid)
        fix = _applied_fix(fa, aa.run, ab.run) if fa else None
        pred = fix.estimate if fix is not None else (fa.estimated_speedup if fa else None)
        out = {
            "id": fid,
            "share_before": round(fa.share if fa else 0.0, 4),
            "share_after": round(fb.share if fb else 0.0, 4),
            "severity_before": fa.severity if fa else BELOW,
            "severity_after": fb.severity if fb else BELOW,
            "predicted_speedup": round(pred, 3) if pred is not None else None,
            "saved_per_iteration_us": us(saved(fid)),
        }
        if fix is not None:
            out["fix_applied"] = {"name": fix.name, "fact": fix.fact,
                                  "before": aa.run.value(fix.fact),
                                  "after": ab.run.value(fix.fact),
                                  "estimate_basis": fix.estimate_why}
        elif fa is not None and fa.estimated_by:
            out["predicted_by"] = fa.estimated_by
        return out

    total_saved = sum(max(saved(f), 0.0) for f in DISJOINT)
    total_grown = sum(max(-saved(f), 0.0) for f in DISJOINT)
    explained = mean_a / (mean_a - total_saved) if mean_a > total_saved else None
    return {
        "resolved": [row(f) for f in sorted(shown_a - shown_b)],
        "new": [row(f) for f in sorted(shown_b - shown_a)],
        "persisting": [row(f) for f in sorted(shown_a & shown_b)],
        "measured_speedup": round(measured, 3) if measured else None,
        "explained_speedup": round(explained, 3) if explained else None,
        "grown_per_iteration_us": us(total_grown),
    }


def _applied_fix(finding, run_a, run_b):
    """The fix of ``finding`` that AFTER's run facts show applied (the fact it changes
    went from a value it fits to one it marks as done), when it has its own estimate:
    that estimate is the prediction to check, not the finding's best one."""
    for fix in finding.fixes:
        if not fix.fact or fix.estimate is None or run_a is None or run_b is None:
            continue
        va, vb = run_a.value(fix.fact), run_b.value(fix.fact)
        if vb in fix.unless and va not in fix.unless:
            return fix
    return None


def _mean_iteration(analysis: Analysis) -> float:
    d = _durations(analysis)
    return float(np.mean(d)) if len(d) else 0.0


def _per_iteration_times(trace: Trace, analysis: Analysis) -> dict[tuple[str, str], float]:
    """Mean ns per analyzed window of each (kind, name), for device slices and CPU ops."""
    bd = analysis.breakdown
    s = trace.slices
    if bd is not None and len(bd):
        ws, we = bd.starts, bd.ends
    else:
        ws, we = np.array([trace.start_ns]), np.array([trace.end_ns])
    idx = np.flatnonzero(np.isin(s.kind, list(_DEVICE_KINDS)))
    w = window_of(s.start[idx], ws, we)
    idx = idx[w >= 0]
    n = max(len(ws), 1)
    out: dict[tuple[str, str], float] = {}
    for k, label in _DEVICE_KINDS.items():
        sel = idx[s.kind[idx] == k]
        if not len(sel):
            continue
        tot = np.bincount(s.name[sel], weights=s.dur[sel].astype(np.float64))
        for nid in np.flatnonzero(tot).tolist():
            out[(label, trace.names[nid])] = float(tot[nid]) / n
    return out


def _top_changes(ta: Trace, aa: Analysis, tb: Trace, ab: Analysis) -> list[dict]:
    """The largest per-iteration changes, ops paired by normalised name (see
    :mod:`.diff_pairs`), new and removed ones marked."""
    rows = paired_changes(_per_iteration_times(ta, aa), _per_iteration_times(tb, ab),
                          TOP_CHANGES)
    return [{"kind": r["kind"], "name": r["name"], "before_us": us(r["before"]),
             "after_us": us(r["after"]), "delta_us": us(r["delta"]), "status": r["status"]}
            for r in rows]


# -- text ------------------------------------------------------------------------------
def diff_text(result: dict) -> list[str]:
    """Readable lines for the terminal."""
    a, b = result["before"], result["after"]
    lines = [f"Before: {a['path']} ({a['iterations']} iterations)",
             f"After:  {b['path']} ({b['iterations']} iterations)"]
    sp = result["speedup"]
    verdict = ("" if sp is None else f"{sp:.2f}x faster" if sp >= 1
               else f"{1 / sp:.2f}x slower")
    lines.append(f"Median iteration: {_f(a['median_iteration_us'])}{_which(a)} -> "
                 f"{_f(b['median_iteration_us'])}{_which(b)}  ({verdict})")
    lines += verdict_lines(result)
    for side in ("device", "host"):
        rows = result["categories"][side]
        if not rows:
            continue
        lines.append(f"{side.capitalize()} breakdown (mean per iteration):")
        for r in sorted(rows, key=lambda r: -abs(r["delta_us"])):
            lines.append(f"  {label_of(r['category']):<26s} {_f(r['before_us']):>10s} -> "
                         f"{_f(r['after_us']):>10s}  ({_signed(r['delta_us'])})")
    f = result["findings"]
    for key, title in (("resolved", "Resolved"), ("new", "New"), ("persisting", "Persisting")):
        for r in f[key]:
            pred = (f"; before, it predicted {r['predicted_speedup']:.2f}x if removed"
                    if r["predicted_speedup"] and key != "new" else "")
            lines.append(f"{title}: {r['id']} ({100 * r['share_before']:.1f}% -> "
                         f"{100 * r['share_after']:.1f}% of step, "
                         f"{_signed(-r['saved_per_iteration_us'])} per iteration{pred})")
    if f["measured_speedup"]:
        expl = (f"; the bottlenecks that shrank explain {f['explained_speedup']:.2f}x"
                if f["explained_speedup"] else "")
        if f["grown_per_iteration_us"] > 0:
            expl += f", those that grew cost {_signed(f['grown_per_iteration_us'])} per iteration"
        lines.append(f"Measured speed-up {f['measured_speedup']:.2f}x (median iteration)"
                     f"{expl}")
    if result["top_changes"]:
        lines.append("Largest changes per iteration:")
        for r in result["top_changes"]:
            mark = f" ({r['status']})" if r.get("status", "changed") != "changed" else ""
            lines.append(f"  {_signed(r['delta_us']):>12s}  {r['kind']:<13s} {r['name']}{mark}")
    return lines


def _which(run: dict) -> str:
    """" (#4)": which iteration is a run's median one."""
    k = run.get("median_iteration")
    return f" (#{k})" if k is not None else ""


def verdict_lines(result: dict) -> list[str]:
    """Mean / p90 / steady-state iteration, slow iterations a median hides, and the BEFORE
    run's prediction against the measured gain (the CLI's lines; the app's Compare dock)."""
    lines = _time_lines(result) + _slow_lines(result) + _prediction_lines(result)
    if "whole_trace" in (result["before"]["scope"], result["after"]["scope"]):
        lines.append("  note: a run without iterations is compared as one whole-trace span")
    return lines


def _time_lines(result: dict) -> list[str]:
    it = result.get("iteration_time") or {}
    ia, ib, sp = it.get("before") or {}, it.get("after") or {}, it.get("speedup") or {}
    lines = []
    for key, label in (("mean_us", "Mean"), ("p90_us", "p90"),
                       ("steady_mean_us", "Steady-state mean")):
        if key == "steady_mean_us" and not (ia.get("left_out") or ib.get("left_out")):
            continue  # the same as the mean
        if ia.get(key) and ib.get(key) and sp.get(key):
            lines.append(f"{label} iteration: {_f(ia[key])} -> {_f(ib[key])}  "
                         f"({speed_phrase(sp[key])})" + _left_out(ia, ib, key))
    return lines


def _slow_lines(result: dict) -> list[str]:
    lines = []
    for side in ("before", "after"):
        slow = (result.get("hidden_slow_iterations") or {}).get(side) or []
        if slow:
            listed = ", ".join(f"#{x['index']} {_f(x['duration_us'])} ({x['x_median']}x)"
                               for x in slow[:5])
            lines.append(f"  {side}: {len(slow)} slow iteration(s) the median hides: {listed}")
    return lines


def _prediction_lines(result: dict) -> list[str]:
    pred = result.get("prediction")
    if not pred:
        return []
    lines = [f"Predicted by BEFORE's {pred['finding']}{fix_phrase(pred, basis=True)}: "
             f"{pred['predicted_speedup']:.2f}x; measured "
             f"{pred['measured_speedup']:.2f}x ("
             f"{_OVER.get(pred.get('measured_over'), 'mean iteration')}), "
             f"{100 * pred['error']:+.0f}%"]
    rest = pred.get("rest_of_step") or {}
    if "error_if_unchanged" in rest:
        sign = 1 if rest["grew"] >= 0 else -1
        grown = sorted(rest["delta_us"].items(), key=lambda kv: -sign * kv[1])[:3]
        lines.append(f"  the rest of AFTER's step (what the fix does not touch) "
                     f"{'grew' if sign > 0 else 'shrank'} "
                     f"{100 * abs(rest['grew']):.0f}% ("
                     + ", ".join(f"{label_of(c)} {_signed(v)}" for c, v in grown)
                     + f" per iteration): another change mixed into the measured gain; "
                     f"with that part as in BEFORE it would be "
                     f"{rest['measured_if_unchanged']:.2f}x, "
                     f"{100 * rest['error_if_unchanged']:+.0f}% from the prediction")
        lines.append("  a whole run can be that much faster or slower on a busy or "
                     "throttled machine: repeat the pair and compare median runs "
                     "(sofa-gui diff B1 A1 B2 A2 B3 A3)")
    return lines


def fix_phrase(pred: dict, basis: bool = False) -> str:
    """" for the fix applied (name: fact before -> after[; its estimate's basis])", or the
    best fix's name, or nothing: which estimate a prediction is."""
    fix = pred.get("fix_applied")
    if fix:
        why = f"; {fix['estimate_basis']}" if basis else ""
        return (f" for the fix applied ({fix['name']}: {fix['fact']} {fix['before']} -> "
                f"{fix['after']}{why})")
    return f" (best fix: {pred['predicted_by']})" if pred.get("predicted_by") else ""


_OVER = {"mean": "mean iteration", "steady_mean": "steady-state mean iteration"}


def _left_out(ia: dict, ib: dict, key: str) -> str:
    """"; left out: before #0, after #0" for the steady-state line."""
    if key != "steady_mean_us":
        return ""
    parts = [f"{side} " + ", ".join(f"#{i}" for i in x["left_out"][:5])
             for side, x in (("before", ia), ("after", ib)) if x.get("left_out")]
    return f"; warm-up / periodic iterations left out: {'; '.join(parts)}" if parts else ""


def speed_phrase(sp: float) -> str:
    """"1.25x faster" / "1.25x slower" for a speed-up ratio ``sp``."""
    return f"{sp:.2f}x faster" if sp >= 1 else f"{1 / sp:.2f}x slower"


def _f(v_us: float) -> str:
    return fmt_ns(v_us * 1000.0)


def _signed(v_us: float) -> str:
    return ("+" if v_us > 0 else "-" if v_us < 0 else "±") + fmt_ns(abs(v_us) * 1000.0)
