"""How right the advisor is on the diagnosis corpus (``tests/data/corpus``).

For every capture of every case, ``python3 -m sofa_gui analyze --json --no-cache`` is run
and its answer set against the case's ``truth.json`` (measured without the profiler, see
``docs/diagnosis.md``).  Printed, for all cases, the tuned ones and the held-out ones:

* the confusion table: the true bound x the predicted one (the ``verdict`` bound where
  ``analyze --json`` has a ``verdict`` key, else the bound of the top finding);
* right top finding (or verdict) %;
* false positives: findings with confidence >= 0.5 whose bound the truth does not have
  (no measured share >= 5%);
* estimate vs measured fix: the estimated speed-up of the finding of the true bound
  against the measured counterfactual, within 25% or not; where the advisor plans a
  setting of the fix (``settings`` of a loader-workers fix: ``num_workers``) and the
  truth measured that setting (``fix.variants``), against that setting's speed-up; where
  the advisor promises nothing for the measured change (a plan that no setting helps, the
  change not offered, offered on a condition with no estimate, or only by a hypothesis's
  estimate -- ``estimate_assumes`` -- for a change it does not assume), right when the change
  measured no more than 25% of gain; where the measured change is a slowdown, right when
  the advisor does not offer it with a gain (no estimate, or one <= 1.0);
* stability: whether every capture of a case gets the same prediction;
* spread: how far a case's estimates part between its captures, ``|ln(est1 / est2)|``
  (the largest over its captures' pairs) for every case with an estimate on each
  capture, as their median and sum: the same loop captured twice the same way;
* run facts: the facts the truth states (framework, mode, precision, loader workers,
  optimizer, compilation, ranks) against those ``analyze`` proves.

    python benchmarks/diagnosis.py [--corpus tests/data/corpus] [--only CASE ...]
                                   [--markdown] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "corpus"
BOUNDS = ("compute", "input", "communication", "host_overhead", "sync", "startup",
          "memory_copies")
FINDING_BOUND = {
    "input_pipeline_bound": "input", "eager_input_bound": "input",
    "compute_bound": "compute", "cpu_bound": "compute",
    "communication_bound": "communication", "straggler_holds_collectives": "communication",
    "straggler": "communication", "load_imbalance": "communication",
    "op_overhead_bound": "host_overhead", "launch_overhead_bound": "host_overhead",
    "host_dispatch_bound": "host_overhead", "setup_overhead_bound": "host_overhead",
    "anomaly_detection_on": "host_overhead",
    "call_overhead_bound": "host_overhead", "sequence_loop": "host_overhead",
    "synchronization_stalls": "sync",
    "blocking_readback": "sync", "host_reads_in_loop": "sync",
    "host_callback_round_trip": "sync", "host_callback_work": "host_overhead",
    "startup_cost": "startup",
    "recompile": "startup",
    "host_device_copy_bound": "memory_copies", "memory_copy_bound": "memory_copies",
    "periodic_extra": "periodic",
    "iteration_jitter": "noise", "cpu_contention": "noise", "gpu_idle_unexplained": "other",
}
HINTS = (("input", "input"), ("comput", "compute"), ("communic", "communication"),
         ("collective", "communication"), ("overhead", "host_overhead"),
         ("dispatch", "host_overhead"), ("sync", "sync"), ("readback", "sync"),
         ("start", "startup"), ("compile", "startup"), ("cop", "memory_copies"),
         ("memory", "memory_copies"), ("periodic", "periodic"))
PRESENT = 0.05  # a truth share at least this large: the run has that bottleneck
CONFIDENT = 0.5
WITHIN = 0.25


def bound_of(label: str | None) -> str:
    """The bound a finding id or a verdict's bound names (unknown ids by their words)."""
    if not label:
        return "none"
    key = str(label).lower().replace("-", "_").replace(" ", "_")
    if key in BOUNDS or key == "periodic":
        return key
    if key in FINDING_BOUND:
        return FINDING_BOUND[key]
    return next((b for hint, b in HINTS if hint in key), "other")


def capture_paths(case_dir: Path, truth: dict) -> list[Path]:
    return [case_dir / name for name in truth.get("captures", [])]


def load_cases(corpus: Path, only: list[str] | None = None) -> list[tuple[Path, dict]]:
    cases = []
    for tj in sorted(corpus.glob("*/truth.json")):
        truth = json.loads(tj.read_text())
        if not only or truth["case"] in only:
            cases.append((tj.parent, truth))
    return cases


@functools.cache
def source_key() -> str:
    """A hash of the analyzer's source: reused answers are valid only for the same code."""
    h = hashlib.sha256()
    for p in sorted((ROOT / "sofa_gui").rglob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def analyze(path: Path, reuse: Path | None = None, timeout: float = 600) -> dict:
    """``analyze --json`` of one capture; {"error": line} when it fails.  With ``reuse``
    (a folder), answers are kept there per capture, analyzer source and capture time,
    and read back instead of analyzing again."""
    if reuse is None:
        return _analyze(path, timeout)
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_mtime_ns}|{source_key()}".encode())
    kept = reuse / f"{key.hexdigest()[:24]}.json"
    if kept.exists():
        return json.loads(kept.read_text())
    doc = _analyze(path, timeout)
    if "error" not in doc:
        reuse.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(doc))
    return doc


def _analyze(path: Path, timeout: float) -> dict:
    proc = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", "--json", "--no-cache",
                           str(path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {last}"}
    return json.loads(proc.stdout)


def prediction(doc: dict) -> tuple[str, str]:
    """(predicted bound, what it comes from): the verdict when there is one, else the top
    finding."""
    verdict = doc.get("verdict")
    if isinstance(verdict, dict) and verdict.get("bound"):
        return bound_of(verdict["bound"]), f"verdict {verdict['bound']}"
    findings = doc.get("findings") or []
    if not findings:
        return "none", "no finding"
    return bound_of(findings[0].get("id")), findings[0].get("id", "?")


def truth_bottlenecks(truth: dict) -> set[str]:
    return {b for b, share in truth.get("shares", {}).items() if share >= PRESENT}


def false_positives(doc: dict, truth: dict) -> list[str]:
    """Confident findings naming a bottleneck the truth does not have (machine noise is
    one the truth has when its steps vary by 10% or more)."""
    have = truth_bottlenecks(truth)
    if truth.get("noise", {}).get("step_cv", 0) >= 0.1:
        have.add("noise")
    out = []
    for f in doc.get("findings") or []:
        b = bound_of(f.get("id"))
        if (f.get("confidence") or 0) >= CONFIDENT and b not in have:
            out.append(f"{f.get('id')} ({f.get('confidence')})")
    return out


#: The advisor's fixes (by name, first shown wins) that are the change a truth's measured
#: fix makes (matched in its ``what``): their own estimate is the one to compare, not the
#: finding's, which is that of its best fix (often another change, e.g. caching the data).
MEASURED_AS = (("num_workers", ("loader workers", "more loader workers")),
               ("num_parallel_calls", ("parallel map", "prefetch")),
               ("cache()", ("cache",)),
               ("tf.image ops", ("tf.data ops in parallel",)),
               ("TextVectorization in a parallel map", ("tf.data ops in parallel",)),
               ("prefetch", ("prefetch",)),
               ("persistent_workers", ("persistent workers",)),
               ("autocast off", ("fp32 on the CPU",)),
               ("float32 policy", ("fp32 on the CPU",)),
               ("inference_mode", ("inference mode",)),
               ("no_grad", ("inference mode",)),
               ("whole batch at once", ("batch or compile the model",)),
               ("loaded once into memory", ("cache pre-processed data",)),
               ("packed into one tensor", ("batch or compile the model",)),
               ("fused=True", ("fused optimizer",)),
               ("batched first", ("cheaper samples",)),
               ("intra-op threads", ("more intra-op threads",)),
               ("inputs in float32", ("float32 instead of float64",)),
               ("set_detect_anomaly(False)", ("anomaly detection off",)),
               ("over the sequence", ("one call over the sequence",)),
               ("augmentation mapped", ("augmentation in the input pipeline",)),
               ("computed once", ("frozen part computed once",)),
               ("weight_decay", ("weight decay in the optimizer",)),
               ("MB buckets", ("bucket size",)),
               ("no communication hook", ("communication hook off",)),
               ("no optimizer-state sharding", ("optimizer state unsharded",)),
               ("np.stack the samples", ("one conversion per batch",)))


def offer(findings: list[dict], what: str) -> tuple[float | None, dict, bool]:
    """(estimate, planned settings, promised) of what the advisor offers for the measured
    change ``what``, ``findings[0]`` being the finding of the true bound (None when there
    is none): where the change is one of the advisor's named fixes, that fix as the first
    finding that shows it offers it (a near tie between bounds can put it under the
    other one; promised only when shown with an estimate: not shown, or shown on a
    condition with no estimate, is no promise), else the true bound's finding's own
    estimate -- unless that estimate is a hypothesis's (``estimate_assumes``: the gain of
    a change it assumes, such as faster compute), which promises nothing for a change it
    does not show as one of its fixes."""
    names = [n for key, ns in MEASURED_AS if key in what for n in ns]
    if not names:
        est = findings[0].get("estimated_speedup") if findings[0] else None
        if findings[0] and findings[0].get("estimate_assumes"):
            return None, {}, False
        return est, {}, est is not None
    for finding in (f for f in findings if f):
        shown = {f.get("name"): f for f in finding.get("fixes") or []}
        fix = next((shown[n] for n in names if n in shown), None)
        if fix is None:
            continue
        est = fix["estimated_speedup"] if "estimated_speedup" in fix else \
            finding.get("estimated_speedup")
        settings = fix.get("settings") or {}
        return est, settings, est is not None and settings.get("num_workers") != 0
    return None, {}, False


def planned_measurement(fix: dict, settings: dict) -> tuple[float, str]:
    """(measured speed-up to compare, the setting it is of): the truth's variant of the
    planned ``num_workers`` where it has one; for a plan that no setting helps, the best
    measured setting."""
    variants = fix.get("variants") or {}
    n = settings.get("num_workers")
    if not variants or not isinstance(n, int):
        return fix["speedup"], ""
    if n == 0:
        best = max(variants, key=lambda k: variants[k]["speedup"])
        return variants[best]["speedup"], "none helps"
    setting = f"num_workers={n}"
    if setting in variants:
        return variants[setting]["speedup"], setting
    return fix["speedup"], ""


def estimate_check(doc: dict, truth: dict) -> dict | None:
    """The estimate of the finding of the true bound (of its fix that is the measured
    change, where one is; of the setting it plans, where the truth measured several)
    against the measured fix: within :data:`WITHIN` of it; where nothing is promised,
    right when the change gains no more than :data:`WITHIN`; for a measured slowdown,
    right when no gain is promised."""
    fix = truth.get("fix")
    if not fix:
        return None
    match = next((f for f in doc.get("findings") or []
                  if bound_of(f.get("id")) == truth["bound"]), None)
    est, settings, promised = offer([match, *(doc.get("findings") or [])],
                                    fix.get("what") or "")
    measured, setting = planned_measurement(fix, settings)
    if not promised:
        ok, said = measured <= 1 + WITHIN, "no gain promised"
    elif measured < 1.0:
        ok, said = est <= 1.0, "gain promised"
    else:
        ok, said = abs(est / measured - 1) <= WITHIN, ""
    out = {"estimated": est, "measured": measured, "within": ok,
           "finding": match.get("id") if match else None}
    if promised and match and match.get("estimate_is_lower_bound") \
            and est == match.get("estimated_speedup"):
        out["lower_bound"] = True  # said to be one: scored as a number, and whether it holds
        said = "lower bound, " + ("holds" if measured >= est else "above the measured fix")
    extra = {k: v for k, v in (("said", said), ("setting", setting)) if v}
    return {**out, **extra}


def _precision(v):
    return "low" if v in ("bf16", "fp16") else v


def _workers(v):
    return "single_process" if v == 0 else "workers"


def _optimizer(v):
    return "foreach" if "foreach" in v else "fused" if "fused" in v else "for_loop"


FACT_CHECKS = {  # truth fact -> (run fact, how the truth's value reads as the run fact's)
    "framework": ("framework", str), "mode": ("mode", str), "device": ("device", str),
    "precision": ("precision", _precision), "dataloader_workers": ("dataloader", _workers),
    "optimizer": ("optimizer", _optimizer), "ranks": ("ranks", int),
    "collectives": ("collectives", str), "compiled": ("compiled", lambda v: "yes"),
}


def facts_check(doc: dict, truth: dict) -> dict[str, tuple]:
    """{fact: (expected, got, right)} for the facts the truth states."""
    run = doc.get("run") or {}
    out = {}
    for key, value in truth.get("facts", {}).items():
        if key not in FACT_CHECKS:
            continue
        run_key, conv = FACT_CHECKS[key]
        want = conv(value)
        got = (run.get(run_key) or {}).get("value")
        right = got is not None if key == "compiled" else str(got).lower() == str(want).lower()
        out[key] = (want, got, right)
    return out


def score_case(case_dir: Path, truth: dict, reuse: Path | None = None) -> dict:
    rows = []
    for path in capture_paths(case_dir, truth):
        doc = analyze(path, reuse)
        if "error" in doc:
            rows.append({"capture": path.name, "error": doc["error"], "predicted": "error"})
            continue
        pred, basis = prediction(doc)
        rows.append({"capture": path.name, "predicted": pred, "basis": basis,
                     "false_positives": false_positives(doc, truth),
                     "estimate": estimate_check(doc, truth),
                     "facts": facts_check(doc, truth),
                     "iterations": len((doc.get("iterations") or {}).get("items") or [])})
    preds = {r["predicted"] for r in rows}
    return {"case": truth["case"], "split": truth.get("split", "tuned"),
            "truth": truth["bound"], "share": truth.get("bound_share"), "captures": rows,
            "stable": len(preds) == 1}


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.0f}% ({n}/{d})" if d else "-"


def summary(results: list[dict]) -> dict:
    caps = [r for res in results for r in res["captures"]]
    truth_of = {id(r): res["truth"] for res in results for r in res["captures"]}
    right = sum(1 for r in caps if r["predicted"] == truth_of[id(r)])
    fps = [(res["case"], r["capture"], fp) for res in results for r in res["captures"]
           for fp in r.get("false_positives", [])]
    ests = [r["estimate"] for r in caps if r.get("estimate")]
    floors = [e for e in ests if e.get("lower_bound")]
    facts = [ok for r in caps for (_, _, ok) in (r.get("facts") or {}).values()]
    parts = sorted(p for p in map(estimate_spread, results) if p is not None)
    return {"cases": len(results), "captures": len(caps),
            "right": _pct(right, len(caps)), "right_n": right,
            "false_positives": len(fps), "fp_list": fps,
            "estimates_within": _pct(sum(e["within"] for e in ests), len(ests)),
            "lower_bounds": (len(floors), sum(e["measured"] >= e["estimated"] for e in floors)),
            "stable": _pct(sum(r["stable"] for r in results), len(results)),
            "facts_right": _pct(sum(facts), len(facts)), "spread": parts}


def estimate_spread(result: dict) -> float | None:
    """How far a case's estimates part between its captures: ``|ln(a / b)|`` of its
    largest and smallest positive estimate; None unless every capture has one."""
    ests = [(r.get("estimate") or {}).get("estimated") for r in result["captures"]]
    if len(ests) < 2 or any(e is None or not e > 0 for e in ests):
        return None
    return math.log(max(ests) / min(ests))


def _spread(s: dict) -> str:
    parts = s["spread"]
    if not parts:
        return ""
    n = len(parts)
    median = (parts[(n - 1) // 2] + parts[n // 2]) / 2
    return (f"; estimates part between captures by |ln(est1/est2)| {median:.3f} median, "
            f"{sum(parts):.2f} summed ({n} cases)")


def _floors(s: dict) -> str:
    """" (3 of them lower bounds said to be such, 3 holding)": an estimate the advisor
    gives as "at least" is scored as a number like any other; this says how many are such
    and how many hold (the measured fix at or above them)."""
    n, hold = s["lower_bounds"]
    return f" ({n} of them lower bounds said to be such, {hold} holding)" if n else ""


def confusion(results: list[dict]) -> tuple[list[str], list[str], dict]:
    table = defaultdict(Counter)
    for res in results:
        for r in res["captures"]:
            table[res["truth"]][r["predicted"]] += 1
    rows = [b for b in BOUNDS if b in table]
    cols = sorted({p for c in table.values() for p in c}, key=lambda p: (
        BOUNDS.index(p) if p in BOUNDS else len(BOUNDS), p))
    return rows, cols, table


def render(results: list[dict], markdown: bool) -> list[str]:
    lines = []
    for label, part in (("all", results),
                        ("tuned", [r for r in results if r["split"] != "holdout"]),
                        ("held-out", [r for r in results if r["split"] == "holdout"])):
        if not part:
            continue
        s = summary(part)
        lines += [f"## {label}: {s['cases']} cases, {s['captures']} captures", "",
                  f"right top finding / verdict: {s['right']}; confident false positives: "
                  f"{s['false_positives']}; estimates within {int(WITHIN * 100)}% of the "
                  f"measured fix (where none is promised: it gains <= 25%): "
                  f"{s['estimates_within']}{_floors(s)}; stable across captures: "
                  f"{s['stable']}; run facts right: {s['facts_right']}{_spread(s)}", ""]
        rows, cols, table = confusion(part)
        head = ["truth \\ predicted", *cols]
        body = [[r, *[str(table[r][c] or "") for c in cols]] for r in rows]
        lines += _table(head, body, markdown) + [""]
    lines += ["## per case", ""]
    head = ["case", "split", "truth", "share", "predicted (per capture)", "stable",
            "fix est/measured", "false positives", "facts wrong"]
    body = []
    for res in results:
        caps = res["captures"]
        est = next((r["estimate"] for r in caps if r.get("estimate")), None)
        wrong = sorted({f"{k}={got}" for r in caps
                        for k, (_, got, ok) in (r.get("facts") or {}).items() if not ok})
        body.append([res["case"], res["split"], res["truth"], f"{res['share']:.2f}",
                     ", ".join(r.get("basis", r["predicted"]) for r in caps),
                     "yes" if res["stable"] else "no",
                     _estimate_cell(est),
                     "; ".join(fp for r in caps for fp in r.get("false_positives", [])),
                     ", ".join(wrong)])
    return lines + _table(head, body, markdown)


def _estimate_cell(est: dict | None) -> str:
    """``estimated/measured``, with the planned setting where the truth measured several
    and whether a gain was promised where that decides."""
    if not est:
        return ""
    notes = [x for x in (est.get("setting"), est.get("said")) if x]
    return f"{est['estimated']}/{est['measured']}" + (f" ({'; '.join(notes)})" if notes else "")


def _table(head: list[str], body: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                *("| " + " | ".join(r) + " |" for r in body)]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*head), *(fmt.format(*r) for r in body)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--markdown", action="store_true", help="tables as Markdown")
    ap.add_argument("--json", type=Path, help="also write every result to this file")
    ap.add_argument("--reuse", type=Path, metavar="DIR",
                    help="keep analyze answers in DIR and reuse them while neither the "
                         "capture nor the analyzer's source changed")
    args = ap.parse_args(argv)
    cases = load_cases(args.corpus, args.only)
    if not cases:
        print(f"{args.corpus}: no case (no */truth.json)", file=sys.stderr)
        return 2
    results = []
    for case_dir, truth in cases:
        results.append(score_case(case_dir, truth, args.reuse))
        print(f"{truth['case']}: {[r['predicted'] for r in results[-1]['captures']]}",
              file=sys.stderr, flush=True)
    print("\n".join(render(results, args.markdown)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
