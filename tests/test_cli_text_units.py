"""The terminal text uses the app's names and units (no raw epoch µs, snake_case, 1e+09)."""

from __future__ import annotations

from sofa_gui.cli import main
from sofa_gui.core.samples import demo_trace_path


def test_analyze_text_reads_like_the_app(capsys):
    assert main(["analyze", str(demo_trace_path())]) == 0
    out = capsys.readouterr().out
    assert "Duration: 1.17 s, from 2021-06-08 08:57:03.460 UTC" in out
    assert "1623142623460016" not in out  # the raw epoch µs
    assert "Idle: waiting for input" in out and "Compute kernels" in out
    assert "idle_input " not in out and "data_loading " not in out
    assert "Counter GPU 0 memory allocated: mean 1.93 GB" in out and "e+0" not in out
    assert "median iteration #0: 176 ms" in out
    assert "(mean per iteration, share):" not in out  # no nested parentheses
    assert all(line.strip() != "Kinds:" for line in out.splitlines())
