"""The quick byte scan of args (``ArgsStore.may_hold``) never says no to args that hold
the text, and spares the precision fact decoding sampled args on a trace without any.

A real bf16 autocast capture and the fp32 ResNet-50 sample are read with their args
spilled (gzip) and read back from the file on demand (a plain copy): the scan must say
yes wherever the text is, and the precision fact must be the same either way.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from test_diagnosis_patterns import capture

from sofa_gui.core.analysis.run_facts import run_facts
from sofa_gui.core.importers import load_trace
from sofa_gui.core.trace import ArgsStore

SAMPLE = (Path(__file__).resolve().parents[2] / "resources" / "samples"
          / "resnet50_num_workers_0.pt.trace.json.gz")
BF16 = (b"c10::BFloat16",)


def both_ways(src: Path, tmp_path: Path, monkeypatch):
    """(spilled, read on demand) loads of the same trace."""
    plain = tmp_path / src.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    monkeypatch.setenv("SOFA_GUI_LAZY_ARGS_MIN_BYTES", "0")
    spilled, lazy = load_trace(src, use_cache=False), load_trace(plain, use_cache=False)
    assert hasattr(lazy.args.backing, "segments")  # its args stay in the file
    return spilled, lazy


def rows_with_args(trace) -> np.ndarray:
    return trace.slices.args[trace.slices.args >= 0]


def test_the_scan_finds_bf16_inputs_where_they_are(tmp_path, monkeypatch):
    spilled, lazy = both_ways(capture("pt_train_autocast_bf16"), tmp_path, monkeypatch)
    for t in (spilled, lazy):
        rows = rows_with_args(t)
        holding = [int(r) for r in rows if b"c10::BFloat16" in t.args.raw(int(r))]
        assert holding
        assert t.args.may_hold(np.array(holding[:50]), BF16)
        assert not t.args.may_hold(rows, (b"no such text anywhere",))
        fact = run_facts(t).get("precision")
        assert fact.value == "low" and "bf16" in fact.detail
    assert run_facts(spilled).get("precision") == run_facts(lazy).get("precision")


def test_no_bf16_text_means_no_low_precision_fact(tmp_path, monkeypatch):
    spilled, lazy = both_ways(SAMPLE, tmp_path, monkeypatch)
    for t in (spilled, lazy):
        assert not t.args.may_hold(rows_with_args(t), BF16)
    assert run_facts(spilled).get("precision") == run_facts(lazy).get("precision")


@pytest.mark.parametrize(("raw", "holds"), [
    (b'{"Input type": ["c10::Half"]}', True),
    (b'{"Input type": ["float"]}', False),
    (b'{"Input type": ["c10::Hal\\u0066"]}', True),  # an escape may spell the text
    (b'{"\\u0000shared": [0]}', True),  # a shared row may hold it
])
def test_rows_in_memory_are_scanned_with_escapes_counted(raw, holds):
    store = ArgsStore([b'{"x": 1}', raw])
    assert store.may_hold(np.array([0, 1]), (b"c10::Half",)) is holds


def test_the_analysis_scans_beside_its_first_steps(tmp_path, monkeypatch):
    """``analyze`` starts the scan first (in a forked child where it may fork); the facts
    are those of a scan in-process (``run_facts`` alone)."""
    from sofa_gui.core.analysis import aside
    from sofa_gui.core.analysis.pipeline import analyze

    started = []
    real = aside.start

    def spy(fn, args):
        job = real(fn, args)
        started.append(fn.__name__)
        return job
    monkeypatch.setattr(aside, "start", spy)
    for src in (SAMPLE, capture("pt_train_autocast_bf16")):
        _, lazy = both_ways(src, tmp_path, monkeypatch)
        alone = run_facts(load_trace(lazy.meta.source, use_cache=False)).get("precision")
        started.clear()
        assert analyze(lazy).run.get("precision") == alone
        assert started[0] == "_may_be_typed"
