"""Which slices start inside regions, where a damaged trace gives the regions no length."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sofa_gui.core.analysis.findings.work import starts_inside


def ctx_of(starts: list[int], ends: list[int]) -> SimpleNamespace:
    slices = SimpleNamespace(start=np.asarray(starts, np.int64), end=np.asarray(ends, np.int64))
    return SimpleNamespace(trace=SimpleNamespace(slices=slices))


def test_a_slice_starting_inside_a_region_is_inside():
    ctx = ctx_of([0, 5, 20], [10, 6, 21])
    assert starts_inside(ctx, np.array([0]), np.array([1, 2])).tolist() == [True, False]


def test_regions_of_no_length_hold_nothing():
    ctx = ctx_of([10, 12], [10, 13])  # the region ends where it starts
    assert starts_inside(ctx, np.array([0]), np.array([1])).tolist() == [False]
