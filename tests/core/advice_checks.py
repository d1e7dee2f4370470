"""What every advisor test on a real run checks: the run analyzed, its findings by id,
startup cost kept apart from per-step gains, and fixes that fit the run's facts."""

from __future__ import annotations

from tracedata import DATA

from sofa_gui.core.analysis.pipeline import analyze
from sofa_gui.core.importers import load_trace

ADVICE = DATA / "advice"


def analyzed(path):
    trace = load_trace(path)
    return trace, analyze(trace)


def by_id(a):
    return {f.id: f for f in a.findings}


def no_gain_from_one_off(a):
    """startup_cost has no speed-up; no per-step finding rests on warm-up iterations."""
    for f in a.findings:
        if f.id == "startup_cost":
            assert f.estimated_speedup is None and f.one_off_ns > 0
        assert f.causes, f.id  # every finding says what makes up its time


def fits_facts(a):
    """No shown fix contradicts a known fact (framework, device, mode, the fact it changes)."""
    fw, dev, mode = (a.run.value(k) for k in ("framework", "device", "mode"))
    for f in a.findings:
        for x in f.fixes:
            if fw is not None:
                assert x.framework == "any" or fw in x.framework.split("/"), (f.id, x.text)
            assert not (x.devices and dev is not None and dev not in x.devices), x.text
            assert not (x.modes and mode is not None and mode not in x.modes), x.text
            if x.fact:
                assert a.run.value(x.fact) not in x.unless, x.text
