"""Steps cut at a loop's input fetches where the compiled step's dispatches are known: a
fetch after which the step does not run before the next fetch (the one that finds an
epoch's end, a new iterator's first fetch) joins the next fetch's step, and fetches at the
end of the capture with no step after them, however many, stay in the last step."""

from __future__ import annotations

import numpy as np

from sofa_gui.core.analysis.iterations.steps import MainOps, _with_step


def _ops(starts: list[int]) -> MainOps:
    t = np.asarray(starts, np.int64)
    return MainOps(t, t + 1, np.zeros(len(t), np.int64))


def test_every_trailing_fetch_without_a_step_stays_in_the_last_step():
    # steps run after the fetches at 0, 10, 25 and 35; 20 finds the epoch's end (25 is
    # the new iterator's fetch), and 45 and 50 (the next epoch's end, a new iterator's
    # fetch) come after the last step
    ops = _ops([0, 10, 20, 25, 35, 45, 50])
    heads, alone = _with_step(ops, np.arange(7), np.array([2, 12, 27, 37]))
    assert ops.start[heads].tolist() == [0, 10, 20, 35] and alone == 3


def test_one_trailing_fetch_and_fetches_each_followed_by_a_step():
    ops = _ops([0, 10, 20, 30])
    heads, alone = _with_step(ops, np.arange(4), np.array([2, 12, 22]))
    assert ops.start[heads].tolist() == [0, 10, 20] and alone == 1
    heads, alone = _with_step(ops, np.arange(4), np.array([2, 12, 22, 32]))
    assert heads.tolist() == [0, 1, 2, 3] and alone == 0
