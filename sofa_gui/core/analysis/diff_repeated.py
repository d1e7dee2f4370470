"""``sofa-gui diff B1 A1 B2 A2 ...``: several before/after pairs of one change.

One run per side measures the machine as much as the fix: on a shared 2-core VM a whole
run was up to 30% faster or slower than the next with nothing else changed (pairs of one
loader-worker fix, measured on a quiet machine, read 1.17x to 2.36x). With several runs per side the
measured speed-up is the ratio of the sides' *median* run (each run's steady-state mean
iteration, else its mean), and the prediction is the median of the BEFORE runs'
predictions for the same finding, so one odd run moves neither. Every pair is still
diffed on its own (``rounds``); the text shows the pair nearest the median in full.
"""

from __future__ import annotations

from collections import Counter
from statistics import median

from ..units import fmt_ns
from .diff import diff_analyses, diff_text, fix_phrase, speed_phrase

_BASES = ("steady_mean_us", "mean_us")
_LABEL = {"steady_mean_us": "steady-state mean iteration", "mean_us": "mean iteration"}


def _ms(v_us: float) -> str:
    return fmt_ns(v_us * 1000.0)


def diff_repeated(pairs: list[tuple[tuple, tuple]]) -> dict:
    """``pairs``: ((trace, analysis) before, (trace, analysis) after) per round."""
    return summarize([diff_analyses(b, a) for b, a in pairs])


def summarize(rounds: list[dict]) -> dict:
    """The repeated diff of pairs already diffed (:func:`diff_analyses` results, in order):
    a caller grouping rounds several ways diffs each pair once."""
    basis = _basis(rounds)
    out: dict = {"pairs": len(rounds), "basis": basis, "rounds": rounds}
    if basis is None:
        return out
    before = [r["iteration_time"]["before"][basis] for r in rounds]
    after = [r["iteration_time"]["after"][basis] for r in rounds]
    out.update(before_us=before, after_us=after, before_median_us=median(before),
               after_median_us=median(after),
               measured_speedup=round(median(before) / median(after), 4),
               per_pair_speedup=[round(b / a, 4) for b, a in zip(before, after)])
    out["prediction"] = _prediction(rounds, out["measured_speedup"])
    return out


def _basis(rounds: list[dict]) -> str | None:
    """The iteration statistic every run has (steady-state mean when all have it)."""
    for key in _BASES:
        if all((r["iteration_time"].get(side) or {}).get(key)
               for r in rounds for side in ("before", "after")):
            return key
    return None


def _prediction(rounds: list[dict], measured: float) -> dict | None:
    """Median of the BEFORE runs' predictions for the finding most rounds predicted."""
    preds = [r["prediction"] for r in rounds if r.get("prediction")]
    if not preds:
        return None
    finding = Counter(p["finding"] for p in preds).most_common(1)[0][0]
    same = [p for p in preds if p["finding"] == finding]
    values = [p["predicted_speedup"] for p in same]
    out = {"finding": finding, "predicted_speedup": round(median(values), 4),
           "per_run": values, "runs": len(values), "measured_speedup": measured,
           "error": round(median(values) / measured - 1.0, 4)}
    for key in ("fix_applied", "predicted_by"):
        if key in same[0]:
            out[key] = same[0][key]
    return out


def nearest_median(result: dict) -> int:
    """Index of the pair whose own speed-up is nearest the sides' median ratio."""
    per = result.get("per_pair_speedup")
    if not per:
        return 0
    return min(range(len(per)), key=lambda i: abs(per[i] - result["measured_speedup"]))


def repeated_text(result: dict) -> list[str]:
    """Readable lines: the medians, each pair in one line, the typical pair in full."""
    rounds = result["rounds"]
    lines = [f"Repeated runs: {result['pairs']} before/after pairs"]
    basis = result["basis"]
    if basis is None:
        lines.append("  no iteration time common to every run: each pair in full below")
        for i, r in enumerate(rounds):
            lines += [f"Pair {i + 1}:"] + ["  " + x for x in diff_text(r)]
        return lines
    b, a, sp = result["before_median_us"], result["after_median_us"], result["measured_speedup"]
    lines.append(f"Median run ({_LABEL[basis]} of each run): {_ms(b)} -> {_ms(a)}  "
                 f"({speed_phrase(sp)})")
    per = result["per_pair_speedup"]
    lines.append(f"  pair by pair {min(per):.2f}x .. {max(per):.2f}x: one pair alone could "
                 f"have read any of these")
    pred = result.get("prediction")
    if pred:
        lines.append(_prediction_line(pred))
    for i, r in enumerate(rounds):
        lines.append(_pair_line(i, r, result["before_us"][i], result["after_us"][i], per[i]))
    k = nearest_median(result)
    lines.append(f"Pair {k + 1} (nearest the median), in full:")
    lines += ["  " + x for x in diff_text(rounds[k])]
    return lines


def _prediction_line(pred: dict) -> str:
    vals = pred["per_run"]
    return (f"Predicted by BEFORE's {pred['finding']}{fix_phrase(pred)}: "
            f"{pred['predicted_speedup']:.2f}x "
            f"(median of {pred['runs']} runs, {min(vals):.2f}x .. {max(vals):.2f}x); measured "
            f"{pred['measured_speedup']:.2f}x (median runs), {100 * pred['error']:+.0f}%")


def _pair_line(i: int, r: dict, b: float, a: float, sp: float) -> str:
    p = r.get("prediction") or {}
    est = f", predicted {p['predicted_speedup']:.2f}x" if p.get("predicted_speedup") else ""
    return (f"  pair {i + 1}: {_ms(b)} -> {_ms(a)} ({sp:.2f}x{est})  "
            f"{r['before']['path']} -> {r['after']['path']}")
