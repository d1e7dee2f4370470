"""Warm-up and periodic-extra detection cost O(n log n): one median per candidate, not per
iteration (a period-3 stream of 100k iterations took 15-30 s), and the same answer as
the direct definition."""
import numpy as np
import pytest

from sofa_gui.core.analysis.findings import steady


def _direct_warmup(d):
    """The definition: the longest leading group (at most half) whose fastest step is
    slower than every later one and than OUTLIER x their median."""
    n, k = len(d), 0
    for j in range(1, max(n // 2, 1) + 1):
        if j < n and d[:j].min() > max(steady.OUTLIER * float(np.median(d[j:])),
                                       float(d[j:].max())):
            k = j
    return k


@pytest.mark.parametrize("seed", range(40))
def test_warmup_count_matches_the_definition(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(0, 30))
        d = rng.integers(1, 20, n).astype(float)  # small integers: many ties
        if n and seed % 2:
            d[:int(rng.integers(0, n))] += rng.choice([0, 5, 30, 100])
        if seed % 5 == 0:
            d = np.sort(d)[::-1].copy()
        assert steady._warmup_count(d) == _direct_warmup(d), d.tolist()


@pytest.mark.parametrize("shape", ["period-3", "descending", "warm-up then period 3"])
def test_long_runs_take_a_handful_of_medians(monkeypatch, shape):
    n = 300_000
    if shape == "period-3":
        d = np.tile([1.0, 2.0, 9.0], n // 3)
    elif shape == "descending":
        d = np.linspace(1000.0, 1.0, n)
    else:
        d = np.concatenate([[500.0, 400.0], np.tile([1.0, 2.0, 9.0], n // 3)])
    calls = []
    median = np.median

    def counted(a, *args, **kwargs):
        calls.append(len(a))
        assert len(calls) <= 10, f"more than 10 medians for {n} iterations"
        return median(a, *args, **kwargs)

    monkeypatch.setattr(np, "median", counted)
    ph = steady._leading_outliers(None, d)
    if shape != "descending":
        assert ph.extras.size == n // 3 and np.all(d[ph.extras] == 9.0)
    assert len(ph.warmup) == {"period-3": 0, "descending": n // 2,
                              "warm-up then period 3": 2}[shape]


def test_leading_steps_slow_by_their_wait_for_workers_behind_are_steady():
    d = np.array([30.0, 28.0, 10.0, 6.0, 12.0, 4.0, 8.0])
    ph = steady.phases(None, d, False)
    assert ph.warmup.tolist() == [0, 1]
    # the workers are behind (the steady steps wait 40% of their time)
    waits = np.array([24.0, 9.0, 4.0, 2.4, 5.0, 1.6, 3.2])
    # the first step's excess (22 ms over the 8 ms median) is wait; the second's is not
    assert steady.phases(None, d, False, waits).warmup.tolist() == [0, 1]
    waits[1] = 22.0
    got = steady.phases(None, d, False, waits)
    assert got.warmup.tolist() == [] and got.n_steady == 7
    waits[0] = 5.0  # the first step is slow by its own work: it and what follows stay
    assert steady.phases(None, d, False, waits).warmup.tolist() == [0]
    # workers that keep up (the steady steps wait 5%): warm-up as without waits
    assert steady.phases(None, d, False, d * 0.05).warmup.tolist() == [0, 1]
    assert steady.phases(None, d, False, None).warmup.tolist() == [0, 1]
