"""Steps made of several identical calls: told apart by the lengths of their runs
(:mod:`sofa_gui.core.analysis.iterations.runs`), on made-up symbol streams."""

from __future__ import annotations

import numpy as np
import pytest

from sofa_gui.core.analysis.iterations.runs import run_cycle, run_symbols
from sofa_gui.core.analysis.iterations.symbols import reduce_symbols

CALL = [1, 2, 3, 2]  # one call's events, then a run of releases (symbol 4)


def _calls(releases: list[int], other: dict[int, int] | None = None):
    """(symbols, events, first event and symbol count of each call) of a stream of calls,
    call j ending with ``releases[j]`` release events (``other``: call -> an event that
    replaces its second one)."""
    keys, firsts = [], []
    for j, r in enumerate(releases):
        firsts.append(len(keys))
        call = list(CALL)
        if other and j in other:
            call[1] = other[j]
        keys += call + [4] * r
    keys = np.array(keys)
    sym = reduce_symbols(keys)
    first = np.array(firsts, np.int64)
    lengths = np.diff(np.r_[np.searchsorted(sym.first, first), len(sym.seq)])
    return sym, len(keys), first, lengths


def test_run_lengths_that_cycle_make_one_step_of_the_cycle():
    # a step of 4 calls releases 2, 3, 3 and 5 handles after them (its last call: the
    # step's own tensors too); 5 steps
    sym, n, first, lengths = _calls([2, 3, 3, 5] * 5)
    per, heads = run_cycle(sym, n, first, lengths)
    assert per == 4
    assert np.array_equal(heads, first[4::4])  # the call after each step's last one


@pytest.mark.parametrize("releases", [
    [3] * 20,  # every call alike: one call a step
    [2, 5, 3, 7, 2, 4, 6, 3, 5, 2, 7, 4, 3, 6, 2, 5],  # lengths that vary with no cycle
    [2, 3, 3, 5] * 2,  # a cycle seen twice only
    [3, 3, 2] * 5,  # no single heaviest call: where a step ends is not told
])
def test_no_step_of_several_calls_without_a_clear_cycle(releases):
    sym, n, first, lengths = _calls(releases)
    assert run_cycle(sym, n, first, lengths)[0] == 1


def test_calls_that_differ_in_their_events_are_not_grouped_by_runs():
    # every 4th call runs other work: that is a periodic extra, not the run lengths' cycle
    sym, n, first, lengths = _calls([2, 3, 3, 5] * 5, other={j: 9 for j in range(3, 20, 4)})
    assert run_cycle(sym, n, first, lengths)[0] == 1


def test_a_partial_first_call_does_not_hide_the_cycle():
    sym, n, first, lengths = _calls([2, 3, 3, 5] * 5, other={0: 9})
    assert run_cycle(sym, n, first, lengths)[0] == 4


def test_run_symbols_keep_each_runs_length():
    keys = np.array([1, 2, 2, 3, 2, 2, 2, 3, 2, 2])
    sym = run_symbols(keys, ["", "a", "b", "c"])
    assert len(sym.seq) == 6 and np.array_equal(sym.first, [0, 1, 3, 4, 7, 8])
    assert sym.seq[1] == sym.seq[5] != sym.seq[3]  # b x2 twice, b x3 once (folded)


def test_calls_whose_work_varies_too_are_not_grouped_by_runs():
    # the calls' own work (a run of one kernel) alternates beside the releases: two runs
    # tell the calls apart, so no one run is what a step releases at its end
    keys, firsts = [], []
    for j, r in enumerate([2, 3, 3, 5] * 5):
        firsts.append(len(keys))
        keys += [1] * (2 + j % 2) + [2, 3, 2] + [4] * r
    keys = np.array(keys)
    sym = reduce_symbols(keys)
    first = np.array(firsts, np.int64)
    lengths = np.diff(np.r_[np.searchsorted(sym.first, first), len(sym.seq)])
    assert run_cycle(sym, len(keys), first, lengths)[0] == 1
