"""The periodic-extra search (every N-th iteration clearly slower) against a brute force
over every (period, phase) pair, on random and planted durations."""
import numpy as np
import pytest

from sofa_gui.core.analysis.findings import steady


def _brute(d, rest):
    best, best_excess = np.zeros(0, np.int64), 0.0
    if len(rest) < steady.MIN_FOR_PERIOD:
        return best
    dr, pos = d[rest], np.arange(len(rest))
    for p in range(2, len(rest) // 2 + 1):
        for phase in range(p):
            mask = pos % p == phase
            if mask.sum() < 2 or mask.all():
                continue
            hold, other = dr[mask], dr[~mask]
            med = float(np.median(other))
            if hold.min() > other.max() and hold.min() > steady.PERIODIC_MIN * med \
                    and np.median(hold) > steady.PERIODIC_MEDIAN * med:
                excess = float((hold - med).sum())
                if excess > best_excess:
                    best, best_excess = rest[mask], excess
    return best


@pytest.mark.parametrize("seed", range(60))
def test_matches_every_period_and_phase(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    d = rng.normal(100, 3, n).round(0)  # rounding makes ties at the cut happen
    p = int(rng.integers(2, max(3, n // 2 + 1)))
    if seed % 3:
        d[int(rng.integers(0, p))::p] += rng.choice([10, 40, 200])
    start = int(rng.integers(0, 3))
    rest = np.arange(start, n)
    assert _brute(d, rest).tolist() == steady._periodic(d, rest).tolist()


def test_every_fourth_slow_is_found_and_scales():
    d = np.full(4000, 100.0)
    d[3::4] = 180.0
    rest = np.arange(4000)
    got = steady._periodic(d, rest)
    assert got.tolist() == list(range(3, 4000, 4))


def test_one_missing_member_is_not_periodic():
    d = np.full(40, 100.0)
    d[2::5] = 200.0
    d[17] = 100.0
    assert steady._periodic(d, np.arange(40)).size == 0
