"""What the advisor says on every real trace we have: the top finding, its estimate and
confidence, and for the before/after pairs the measured speed-up against the prediction.

    python benchmarks/advice.py [--only SUBSTRING]

Traces: the public ones in ``../shared/traces/public`` (skipped when absent) and the
CPU runs in ``tests/data/advice`` (``benchmarks/gen_advice_runs.py``; ``quiet/``: the
input-bound pair made on the machine with nothing else running).  "measured" is the
speed-up ``sofa-gui diff`` checks the prediction against: the mean of the steady-state
iterations (warm-up left out by the advisor's own rule, e.g. a loader worker's start-up
in AFTER's first step); the mean of all iterations and the median follow, and for the
generated pairs the unprofiled timing from ``runs.json``.  "estimated" is
the estimate of the fix the AFTER run applied (found from the run facts that changed,
e.g. dataloader single_process -> workers) when that fix has its own estimate; every
fix's estimate is listed under the row.  To check the input-bound pair on a quiet machine:
``gen_advice_runs.py --out tests/data/advice/quiet --only input_nw0 --only input_nw1``,
then this script.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sofa_gui.core.analysis.diff import diff_analyses  # noqa: E402
from sofa_gui.core.analysis.diff_repeated import summarize  # noqa: E402
from sofa_gui.core.analysis.findings.input_removal import DEFAULT_INTERFERENCE  # noqa: E402
from sofa_gui.core.analysis.findings.input_rules import parallel_bound  # noqa: E402
from sofa_gui.core.analysis.pipeline import analyze  # noqa: E402
from sofa_gui.core.importers import load_trace  # noqa: E402

PUBLIC = ROOT.parent / "shared" / "traces" / "public"
ADVICE = ROOT / "tests" / "data" / "advice"
HTA = "holistic-trace-analysis/"
TRACES = [
    HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    HTA + "negative_queue_length_values_check/rank0.json.gz",
    HTA + "nccl_parser_config/nccl_data.json.gz",
    HTA + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    HTA + "trace_diff/control/control.json.gz",
    HTA + "trace_diff/test/test.json.gz",
    HTA + "trace_filter/sampled_rank-0.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "tracelens/b200/eager_trace.json.gz",
    "tracelens/mi300/resnet_act_checkpoint.json.gz",
    "tracelens/mi300/jax_conv_minimal_08/tw003.xplane.pb",
    "sofa-deepprof-gputrace/gputrace.csv",
    "sofa-demo-sofalog",
]
GENERATED = ["warmup", "tiny_ops", "tiny_ops_dense", "item_loop", "item_vectorised",
             "checkpoint", "input_nw0", "input_nw1", "quiet/input_nw0", "quiet/input_nw1",
             "default-heap/input_nw0", "default-heap/input_nw1"]
PAIRS = [("kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
          "kineto-tb-plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"),
         ("advice/input_nw0", "advice/input_nw1"),
         ("advice/quiet/input_nw0", "advice/quiet/input_nw1"),
         ("advice/default-heap/input_nw0", "advice/default-heap/input_nw1"),
         ("advice/item_loop", "advice/item_vectorised"),
         ("advice/tiny_ops", "advice/tiny_ops_dense")]


def _rounds() -> tuple[list[str], list[tuple[str, str]]]:
    """The quiet pair's further rounds (``gen_advice_runs.py --rounds N``: ``quiet/rK/``)."""
    names, pairs = [], []
    for d in sorted((ADVICE / "quiet").glob("r[0-9]*")):
        if (d / "input_nw0.json.gz").exists() and (d / "input_nw1.json.gz").exists():
            a, b = f"advice/quiet/{d.name}/input_nw0", f"advice/quiet/{d.name}/input_nw1"
            names += [a, b]
            pairs.append((a, b))
    return names, pairs


def _path(name: str) -> Path:
    if name.startswith("advice/"):
        return ADVICE / f"{name[7:]}.json.gz"
    return PUBLIC / name


def _top(a) -> str:
    if not a.findings:
        return "(none)"
    f = a.findings[0]
    gain = ("one-off, no per-step gain" if f.estimated_speedup is None
            else f"{f.estimated_speedup:.2f}x")
    return f"{f.id} {100 * f.share:.0f}% {gain} conf {f.confidence:.2f}"


def _runs(name: str) -> dict:
    """The unprofiled timings (runs.json) beside a generated capture."""
    f = _path(name).parent / "runs.json"
    return json.loads(f.read_text()) if name.startswith("advice/") and f.exists() else {}


def _short(name: str) -> str:
    return name[7:] if name.startswith("advice/") else name.split("/")[-2]



def _per_fix(analysis, fid, timing: dict) -> None:
    """Every fix's own estimate under the pair's row, and the machine the timing saw."""
    f = next((f for f in analysis.findings if f.id == fid), None)
    for x in (f.fixes if f else []):
        if x.gain:
            est = "not estimated" if x.estimate is None else f"{x.estimate:.2f}x"
            print(f"{'':46s}- {x.name}: {est} ({x.estimate_why})")
    cores = analysis.run.value("cpu_cores")
    if f is not None and cores and any(x.gain == "cores" for x in f.fixes):
        slow = analysis.run.value("cpu_interf")
        how = "measured" if slow else "assumed"
        slow = slow or DEFAULT_INTERFERENCE
        print(f"{'':46s}the same {cores}-core machine with no other load "
              f"({cores - 1} free core{'s' if cores > 2 else ''}), loader workers would be "
              f"estimated {parallel_bound(f.share, cores - 1, slow):.2f}x (interference "
              f"{slow:.2f}x, {how}; {parallel_bound(f.share, cores - 1):.2f}x without it; "
              f"hand-over not counted in this line)")
    if timing.get("cpu_busy_other_cores") is not None:
        print(f"{'':46s}unprofiled timing: other processes kept "
              f"{timing['cpu_busy_other_cores']} cores busy")


def _round_row(before, est, measured, pred, timing, after_t, unprof) -> list[str]:
    """One quiet round: calibration, estimate, measured, error, what else changed."""
    m = _runs(before).get("_machine", {})
    calib = (m.get("core_interference") or {}).get("factor")
    hand = m.get("batch_handover") or {}
    two = (hand.get("per_batch_us", 0) + 2 * hand.get("per_tensor_us", 0)) / 1e3 \
        if hand else None
    rest = pred.get("rest_of_step") or {}
    faults = (after_t.get("profiled_minor_faults_per_step") or [])[2:]
    heap = m.get("heap")
    label = ("default heap" if "default-heap" in before else
             before.split("/")[-2] if "/r" in before else "r1")
    return [label,
            f"{calib:.2f}" if calib else "-", f"{two:.1f} ms" if two else "-",
            f"{est:.2f}x", f"{measured:.2f}x", f"{100 * (est / measured - 1):+.0f}%",
            f"{100 * rest['grew']:+.0f}%" if "grew" in rest else "-",
            f"{100 * rest['error_if_unchanged']:+.0f}%" if "error_if_unchanged" in rest else "-",
            f"{unprof:.2f}x ({100 * (est / unprof - 1):+.0f}%)" if unprof else "-",
            f"{sorted(faults)[len(faults) // 2]}" if faults else "-",
            "steady" if isinstance(heap, dict) else "default"]


def _round_table(rows: list[list[str]]) -> None:
    """The quiet pair's rounds side by side (is the estimate within 25% in each?)."""
    head = ["round", "interf", "hand-over", "estimate", "steady", "error", "rest changed",
            "if unchanged", "unprofiled (error)", "AFTER faults/step", "heap"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print()
    print("quiet input pair, by round (hand-over: a batch of two tensors; AFTER faults: "
          "median per profiled step after the first two; default heap: glibc's defaults)")
    for r in [head] + rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    more, more_pairs = _rounds()
    names = [n for n in TRACES + [f"advice/{g}" for g in GENERATED] + more if args.only in n]
    done = {}
    print(f"{'trace':58s} {'s':>5s}  top finding (share, estimate, confidence); run facts")
    for name in names:
        p = _path(name)
        if not p.exists():
            print(f"{name[-58:]:58s}  (absent)")
            continue
        t0 = time.perf_counter()
        trace = load_trace(p)
        a = analyze(trace)
        done[name] = (trace, a)
        secs = time.perf_counter() - t0
        print(f"{name[-58:]:58s} {secs:5.1f}  {_top(a)}; {a.run.header()[:90]}")
    print()
    print(f"{'pair (before -> after)':44s} {'finding':22s} {'estimated':>9s} "
          f"{'measured':>9s} {'error':>7s} {'all mean':>8s} {'median':>7s} {'unprofiled':>10s}"
          f"  estimate for")
    errors, rounds, steady_diffs = [], [], []
    for before, after in PAIRS[:3] + more_pairs + PAIRS[3:]:
        if before not in done or after not in done:
            continue
        r = diff_analyses(done[before], done[after])
        pred = r["prediction"] or {}
        sp = r["iteration_time"]["speedup"]
        measured = pred.get("measured_speedup") or sp["mean_us"]
        est = pred.get("predicted_speedup")
        err = f"{100 * (est / measured - 1):+.0f}%" if est and measured else "-"
        timing = _runs(before).get(before.split("/")[-1], {})
        unprof = timing.get("measured_speedup_unprofiled")
        fix = pred.get("fix_applied")
        basis = (f"fix applied: {fix['name']} ({fix['fact']} {fix['before']} -> "
                 f"{fix['after']})" if fix else
                 f"best fix: {pred['predicted_by']}" if pred.get("predicted_by") else "finding")
        label = f"{_short(before)} -> {_short(after)}"
        print(f"{label[-44:]:44s} {pred.get('finding', '-'):22s} "
              f"{(f'{est:.2f}x' if est else '-'):>9s} {measured:8.2f}x {err:>7s} "
              f"{sp['mean_us']:7.2f}x {sp['median_us']:6.2f}x "
              f"{(f'{unprof:.2f}x' if unprof else '-'):>10s}  {basis}")
        _per_fix(done[before][1], pred.get("finding"), timing)
        after_t = _runs(after).get(after.split("/")[-1], {})
        if "minor_faults_per_step" in timing and "minor_faults_per_step" in after_t:
            print(f"{'':46s}main process's minor page faults per step (unprofiled, median): "
                  f"{timing['minor_faults_per_step']:.0f} -> "
                  f"{after_t['minor_faults_per_step']:.0f}")
        if before.startswith("advice/quiet") and est and measured:
            if before.startswith("advice/quiet/"):  # the steady-heap rounds
                errors.append((est / measured - 1, est / unprof - 1 if unprof else None))
                steady_diffs.append(r)
            rounds.append(_round_row(before, est, measured, pred, timing, after_t, unprof))
    if rounds:
        _round_table(rounds)
    if len(errors) > 1:
        e = [x for x, _ in errors]
        u = [y for _, y in errors if y is not None]
        print(f"quiet pair over {len(errors)} rounds: error vs steady mean {100 * min(e):+.0f}% "
              f".. {100 * max(e):+.0f}%" + (f"; vs unprofiled {100 * min(u):+.0f}% .. "
                                           f"{100 * max(u):+.0f}%" if u else ""))
    _repeated(steady_diffs)
    return 0


def _repeated(rounds: list[dict]) -> None:
    """The quiet rounds (their diffs) as ``sofa-gui diff B1 A1 B2 A2 ...`` reads them."""
    from repeated_pairs import group_lines  # this script's folder is on sys.path

    if len(rounds) < 2:
        return
    r = summarize(rounds)
    p = r.get("prediction")
    if p:
        print(f"quiet pair, {r['pairs']} rounds as repeated runs (diff B1 A1 B2 A2 ...): "
              f"predicted {p['predicted_speedup']:.2f}x (median of the BEFORE runs), measured "
              f"{r['measured_speedup']:.2f}x (median runs; pair by pair "
              f"{min(r['per_pair_speedup']):.2f}x .. {max(r['per_pair_speedup']):.2f}x): "
              f"{100 * p['error']:+.0f}%")
    for line in group_lines(rounds, (3, 5)):  # a user repeating the pair k times
        print("  " + line)

if __name__ == "__main__":
    sys.exit(main())
