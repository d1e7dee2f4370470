"""Where test traces live: ``tests/data`` (``tests/data/real`` mirrors the shared layout)
and the shared real traces beside the checkout.

A plain module (not ``conftest``) so tests in every folder can import it unambiguously.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces" / "public"


REAL = DATA / "real"
#: Shared traces already elsewhere in the repository (byte-identical copies, sha256 checked).
_HERE = Path(__file__).parent
_HTA = "holistic-trace-analysis/"
BUNDLED = {
    "kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz":
        _HERE.parent / "resources" / "samples" / "resnet50_num_workers_0.pt.trace.json.gz",
    _HTA + "trace_filter/sampled_rank-0.json.gz": DATA / "ranks" / "sampled_rank-0.json.gz",
    _HTA + "trace_filter/sampled_rank-1.json.gz": DATA / "ranks" / "sampled_rank-1.json.gz",
    _HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz":
        DATA / "kineto" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    _HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz":
        DATA / "kineto" / "benchmark_result_2869224_1695835535_trace.json.gz",
    "sofa-deepprof-gputrace/gputrace.csv": DATA / "sofa-deepprof-gputrace" / "gputrace.csv",
    "tracelens/mi300/jax_conv_minimal_08/tw003.xplane.pb": DATA / "xplane" / "tw003.xplane.pb",
}


def shared_trace(rel: str) -> Path:
    """A real trace by its path under ``../shared/traces/public``: the copy in
    ``tests/data/real`` (or the bundled sample) first, so a plain clone runs the test;
    skips only when neither the copy nor the shared folder has it."""
    for p in (REAL / rel, BUNDLED.get(rel), SHARED / rel):
        if p is not None and p.exists():
            return p
    pytest.skip(f"shared trace {rel} not available")


CORPUS = DATA / "corpus"


def corpus_case(case: str) -> tuple[dict, list[Path]]:
    """(truth, captures) of a diagnosis corpus case (skips when the corpus lacks it)."""
    path = CORPUS / case / "truth.json"
    if not path.exists():
        pytest.skip(f"corpus case {case} not in tests/data/corpus")
    import json

    truth = json.loads(path.read_text())
    return truth, [CORPUS / case / c for c in truth["captures"]]


def corpus_capture(case: str, k: int = 0) -> Path:
    """The ``k``-th capture of a diagnosis corpus case (skips when the corpus lacks it)."""
    return corpus_case(case)[1][k]


def corpus_fix_speedup(case: str, variant: str = "") -> float:
    """The speed-up a corpus case's truth measures for its fix (or for ``variant``, a
    change measured beside it), without the profiler."""
    import json

    truth = json.loads((corpus_capture(case, 0).parent / "truth.json").read_text())
    return truth["variants"][variant]["speedup"] if variant else truth["fix"]["speedup"]


@functools.cache
def corpus_analysis(case: str, k: int = 0):
    """(trace, analysis) of the ``k``-th capture of a corpus case, analyzed once a test run."""
    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.importers import load_trace

    t = load_trace(corpus_capture(case, k), use_cache=False)
    return t, analyze(t)


@functools.cache
def corpus_context(case: str, k: int = 0):
    """(trace, analysis, the rules' context) of the ``k``-th capture of a corpus case, made
    once a test run: for tests that read what the rules measure."""
    from sofa_gui.core.analysis.findings import make_context

    t, a = corpus_analysis(case, k)
    return t, a, make_context(t, a.iterations, a.breakdown, a.run)


def findings_by_id(analysis) -> dict:
    """An analysis's findings by id."""
    return {f.id: f for f in analysis.findings}
