"""Every fix is shown only where it applies: over every fix x every corpus case, a fix the
run facts (proved from the capture) let through never contradicts what the case is
(its truth.json, measured without the profiler), and no fix names another framework's API.
"""

import json
import re
from pathlib import Path

import pytest

from sofa_gui.core.analysis.findings import RULES
from sofa_gui.core.analysis.findings.fixes import FIXES, choose_fixes
from sofa_gui.core.analysis.results import Fix
from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
CASES = sorted(p.parent for p in CORPUS.glob("*/truth.json"))
#: Cases whose run facts read wrong or cannot be read, so fixes they would rule out are
#: shown (strict xfails, docs/diagnosis.md): case -> why.
MISREAD_FACTS = {"jax_train_kmeans_tol_check": "a k-means fit records the ops an inference "
                                               "does (nearest-centroid assignment, a mean), "
                                               "read as inference",
                 "tf_tape_gp_cholesky_hyperparams": "a float64 GP whose XLA capture records "
                                                    "no dtype: precision unknown, so the "
                                                    "bf16 policy is offered as compute's fix"}
#: What each framework's API looks like in a fix's text.
API = {"pytorch": r"\btorch\b|DataLoader|DistributedDataParallel|\bFSDP\b|cudnn",
       "tensorflow": r"\btf\.|[Kk]eras|TensorFlow",
       "jax": r"\bjax\b|\bjnp\b|orbax|flax|\bgrain\b"}


#: A fix whose text advises this declares the fact it depends on (needed, or ruling it out
#: once applied), so the run facts can keep it away from runs it does not fit.
DECLARES = ((r"DataLoader\(|num_workers", "dataloader"),
            (r"autocast|mixed.precision|mixed_bfloat16|bfloat16", "precision"),
            (r"foreach|fused=True", "optimizer"), (r"torch\.compile\(model\)|jit_compile=True|"
                                                  r"jax\.jit the whole", "compiled"),
            (r"tf\.data: |dataset\.map|\.prefetch\(|\.cache\(\)", "tf_data"))


#: Advice that trades precision where the device may be a CPU (fp32 instead of bf16, or
#: bf16 itself) pays off only by the CPU's bf16 instructions: it declares ``cpu_bf16``.
CPU_PRECISION = r"bf16|bfloat16|fp32"


def _declared(fix: Fix) -> set[str]:
    keys = ({k for k, _ in fix.needs} | {k for k, _ in fix.excludes}
            | {k for k, _ in fix.assumes} | {fix.fact})
    return {k.split("_parallel")[0].split("_prefetch")[0].split("_cache")[0] for k in keys if k}


def _every_fix() -> list[tuple[str, Fix]]:
    return [(fid, f) for fid in RULES for f in FIXES.get(fid, [])]


def _truth_facts(truth: dict) -> dict:
    """The case's facts as run-fact values (None: the case does not have it)."""
    t = truth.get("facts", {})
    workers = t.get("dataloader_workers")
    opt = str(t.get("optimizer", ""))
    return {
        "framework": t.get("framework"), "device": t.get("device"), "mode": t.get("mode"),
        "precision": "low" if t.get("precision") in ("bf16", "fp16") else
        t.get("precision") if t.get("precision") == "fp64" else None,
        "dataloader": None if workers is None else
        ("single_process" if workers == 0 else "workers"),
        "optimizer": "fused" if "fused" in opt else "foreach" if "foreach" in opt else None,
        "compiled": t.get("compiled"),
    }


def _contradiction(fix: Fix, truth: dict) -> str:
    """Why the case rules ``fix`` out ("" when it may apply)."""
    fw = truth["framework"]
    if fix.framework != "any" and fw not in fix.framework.split("/"):
        return f"for {fix.framework}, the case is {fw}"
    for key, allowed in (("device", fix.devices), ("mode", fix.modes)):
        if allowed and truth[key] is not None and truth[key] not in allowed:
            return f"for {key} {allowed}, the case is {truth[key]}"
    for key, allowed in fix.needs:
        if key in truth and truth[key] not in allowed:
            return f"needs {key} {allowed}, the case has {truth[key]}"
    for key, values in fix.excludes + ((fix.fact, fix.unless),):
        if key in truth and truth[key] is not None and truth[key] in values:
            return f"ruled out by {key} {truth[key]}"
    return ""


def test_no_fix_names_another_frameworks_api():
    bad = []
    for fid, fix in _every_fix():
        mine = set(fix.framework.split("/")) if fix.framework != "any" else set()
        for fw, rx in API.items():
            if fw not in mine and re.search(rx, fix.text):
                bad.append(f"{fid} ({fix.framework}) names {fw}: {fix.text[:70]}")
    assert not bad, "\n".join(bad)


def test_fixes_declare_the_facts_their_advice_depends_on():
    bad = [f"{fid}: {fix.text[:70]} (declares none of {key})"
           for fid, fix in _every_fix() for rx, key in DECLARES
           if re.search(rx, fix.text) and key not in _declared(fix)]
    assert not bad, "\n".join(bad)


def test_precision_advice_on_a_cpu_declares_the_cpus_bf16():
    bad = [f"{fid}: {fix.text[:70]}" for fid, fix in _every_fix()
           if re.search(CPU_PRECISION, fix.text) and (not fix.devices or "cpu" in fix.devices)
           and "cpu_bf16" not in _declared(fix)]
    assert not bad, "\n".join(bad)


def test_fixes_shown_on_a_condition_are_named():
    """A fix that may be shown on an unproven condition says so under its own name."""
    assert all(fix.name for _, fix in _every_fix() if fix.assumes)


@pytest.mark.skipif(not CASES, reason="no diagnosis corpus in tests/data/corpus")
@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=MISREAD_FACTS[c.name])]
                 if c.name in MISREAD_FACTS else []) for c in CASES])
def test_every_fix_shown_on_a_case_fits_it(case):
    truth = json.loads((case / "truth.json").read_text())
    facts = run_facts(load_trace(case / truth["captures"][0]))
    want = _truth_facts(truth)
    wrong = []
    for fid, fix in _every_fix():
        shown, _ = choose_fixes([fix], facts)
        why = _contradiction(fix, want) if shown else ""
        if why:
            wrong.append(f"{fid}: {fix.text[:60]}... shown, but {why}")
    assert not wrong, "\n".join(wrong)
