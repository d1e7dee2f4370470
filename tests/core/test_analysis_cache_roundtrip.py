"""Every part of a real analysis is stored by the analysis cache and comes back equal:
a result type that is not registered with the codec would silently not be cached."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from sofa_gui.core.analysis import codec
from sofa_gui.core.analysis.pipeline import Analysis, analyze
from sofa_gui.core.importers import load_trace
from sofa_gui.core.samples import demo_trace_path


def test_a_real_analysis_round_trips_through_the_codec():
    analysis = analyze(load_trace(demo_trace_path(), use_cache=False))
    assert analysis.verdict is not None and analysis.findings
    back = codec.loads(codec.dumps(analysis))
    assert type(back) is Analysis
    for field in dataclasses.fields(Analysis):
        assert type(getattr(back, field.name)) is type(getattr(analysis, field.name)), field.name
    assert back.verdict == analysis.verdict
    assert [f.id for f in back.findings] == [f.id for f in analysis.findings]


def test_the_cache_module_registers_every_result_type_on_import():
    code = ("from sofa_gui.core.analysis import cache, codec\n"
            "print(sorted(codec.result_types()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    for name in ("Analysis", "Verdict", "TraceBreakdown", "RunFacts", "InputPipeline",
                 "HostBreakdown", "DeviceBreakdown", "RankStats", "Finding", "Kind"):
        assert f"'{name}'" in out
