"""The verdict moves the time a finding measures into its bound in proportion to the
steps' make-up: over the steady steps and the part of the warm-up steps that runs as a
steady step does (their excess over a steady step is start-up)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sofa_gui.core.analysis.verdict import compute_verdict


def host_only(times: list[list[float]]) -> SimpleNamespace:
    """A one-rank host-only breakdown of forward / python time per iteration (ns)."""
    host = SimpleNamespace(categories=("forward", "python"), label="main",
                           times=np.asarray(times, np.float64), rank=0, calls=np.zeros(0))
    return SimpleNamespace(durations=np.asarray(times).sum(axis=1), devices=[], hosts=[host],
                           host=host, device=None, ranks=None)


def test_a_measured_share_moves_from_the_warm_up_steps_steady_part_too():
    """A warm-up step of 300 (200 of it over a steady step of 100) and three steady steps:
    half of each step's steady make-up is the call's fixed cost, so 200 of the 400 that
    run as steady steps move to host overhead, not 150 of the steady rows alone."""
    bd = host_only([[300, 0], [100, 0], [100, 0], [100, 0]])
    f = SimpleNamespace(id="call_overhead_bound", share=0.5, paced="", one_off_ns=0)
    v = compute_verdict(bd, [f], np.asarray([0]))
    assert v.shares["startup"] == pytest.approx(200 / 600)
    assert v.shares["host_overhead"] == pytest.approx(200 / 600)
    assert v.shares["compute"] == pytest.approx(200 / 600)
    assert v.moved[0][:2] == ("call_overhead_bound", "host_overhead")
