"""The CPU's bf16 instructions as a run fact (``cpu_bf16``), and advice that trades
precision on a CPU only where that fact backs it: the CPU bf16 autocast capture of the
corpus with the flags a recording or trace metadata states, and a real recording."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from tracedata import corpus_capture as capture

from sofa_gui.core import metadata
from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace

NATIVE = "fpu sse2 avx2 avx512f avx512bw avx512_bf16"
EMULATED = "fpu sse2 avx2 avx512f avx512bw"
LEAVE_BF16 = "fp32 on the CPU"


def _with_flags(tmp_path: Path, flags: str | None) -> Path:
    """The bf16 autocast capture with trace metadata ``cpu_flags`` (as torch.profiler's
    ``add_metadata`` writes it), copied into ``tmp_path``."""
    doc = json.loads(gzip.decompress(capture("pt_train_autocast_bf16").read_bytes()))
    if flags is not None:
        doc["cpu_flags"] = flags
    out = tmp_path / "run.json.gz"
    out.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return out


def _compute(path: Path):
    a = analyze(load_trace(path, use_cache=False))
    return a, next(f for f in a.findings if f.id == "compute_bound")


def test_native_bf16_gets_no_advice_to_leave_bf16(tmp_path):
    a, f = _compute(_with_flags(tmp_path, NATIVE))
    fact = a.run.get("cpu_bf16")
    assert (fact.value, fact.detail, fact.proof) == ("native", "avx512_bf16",
                                                     "trace metadata cpu_flags")
    assert LEAVE_BF16 not in [x.name for x in f.fixes]
    hidden = [why for x, why in f.hidden_fixes if x.name == LEAVE_BF16]
    assert hidden and "cpu_bf16 is emulated; here native" in hidden[0]


def test_emulated_bf16_gets_the_advice_to_compute_in_fp32(tmp_path):
    a, f = _compute(_with_flags(tmp_path, EMULATED))
    assert a.run.value("cpu_bf16") == "emulated"
    fix = next(x for x in f.fixes if x.name == LEAVE_BF16)
    assert not fix.conditional and "cpu_bf16 is emulated" in fix.because
    assert "bf16 op inputs (autocast)" in fix.because  # the precision it changes


def test_unknown_bf16_states_the_advice_as_a_condition_without_an_estimate(tmp_path):
    a, f = _compute(_with_flags(tmp_path, None))
    assert not a.run.get("cpu_bf16").known  # torch.profiler does not say the ISA
    fix = next(x for x in f.fixes if x.name == LEAVE_BF16)
    assert fix.conditional and fix.estimate is None
    assert fix.because.startswith("only if cpu_bf16 is emulated: the trace does not say")
    d = fix.to_dict()
    assert d["estimated_speedup"] is None and d["name"] == LEAVE_BF16
    assert "not estimated" in fix.estimate_label


def test_bf16_autocast_advice_on_a_cpu_follows_the_fact():
    """An fp32 CPU run (no low precision): told to autocast to bf16 only with native bf16
    instructions, as a condition where they are unknown, never where bf16 is emulated."""
    from sofa_gui.core.analysis.findings.fixes import FIXES, choose_fixes

    t = load_trace(capture("pt_train_compute_cnn"), use_cache=False)
    autocast = [x for x in FIXES["compute_bound"] if x.name == "bf16 autocast on the CPU"]
    for flags, shown, conditional in ((NATIVE, True, False), (EMULATED, False, None),
                                      (None, True, True)):
        t.meta.extra["header"] = {**t.meta.extra.get("header", {}), "cpu_flags": flags}
        t.derived.pop("run_facts", None)
        got, _ = choose_fixes(autocast, run_facts(t))
        assert bool(got) is shown, flags
        if got:
            assert got[0].conditional is conditional


def test_a_recording_manifest_states_the_cpu_flags(data_dir, tmp_path):
    folder = tmp_path / "recording"
    shutil.copytree(data_dir / "recording-torch-pyspy", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    for isa, want in (({"avx512_bf16": False, "amx_bf16": True, "avx2": True}, "native"),
                      ({"avx512_bf16": False, "amx_bf16": False}, "emulated"),
                      ({"avx512_bf16": "yes"}, None)):
        manifest["host"]["cpu_isa"] = isa
        (folder / "manifest.json").write_text(json.dumps(manifest))
        t = load_trace(folder, use_cache=False)
        fact = run_facts(t).get("cpu_bf16")
        assert fact.value == want, isa
        if want:
            assert fact.proof == "recording manifest host.cpu_isa (AMD EPYC)"
        else:
            assert any("cpu_isa" in n for n in t.meta.load_stats.notes)


@pytest.mark.parametrize(("value", "want"), [
    ("fpu sse2 avx2 avx512_bf16", {"avx512_bf16": True, "avx2": True, "amx_bf16": False}),
    ("not a flags line", None),  # no sse2: not an x86-64 flags line
    ({"amx_bf16": True, "avx2": 1, "other": True}, {"amx_bf16": True}),
    ({}, None), (42, None)])
def test_cpu_flags_are_read_as_data(value, want):
    got = metadata.cpu_isa(value)
    if want is None:
        assert got is None
    else:
        assert {k: got[k] for k in want} == want and set(got) <= set(metadata.CPU_ISA_FLAGS)


def test_the_recorder_writes_the_cpus_flags():
    from sofa_gui.recorder.sampler import host_info

    host = host_info()
    try:
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines()
                    if x.startswith("flags"))
    except (OSError, StopIteration):
        pytest.skip("no /proc/cpuinfo flags line on this machine")
    flags = set(line.split(":", 1)[1].split())
    assert host["cpu_isa"] == {f: f in flags for f in metadata.CPU_ISA_FLAGS}
    assert host["cpu_model"]


def test_the_compute_hypothesis_is_said_to_be_no_fixs_estimate():
    """An fp32 CNN trained on a CPU: the compute finding's 2x is a hypothesis typical of
    bf16 instructions or more threads there (not of tensor cores), and its summary says the
    trace measures none of its fixes' gain, naming the one shown on a condition."""
    a = analyze(load_trace(capture("pt_train_compute_cnn"), use_cache=False))
    f = next(x for x in a.findings if x.id == "compute_bound")
    assert not a.run.get("cpu_bf16").known
    assert "tensor cores" not in f.summary and "more intra-op threads" in f.summary
    assert "The estimate is the hypothesis's, not a fix's" in f.summary
    assert "(bf16 autocast on the CPU only on a condition" in f.summary
    assert not f.estimated_by
