"""Row grouping by several integer columns: the numpy path equals the pandas one."""

from __future__ import annotations

import numpy as np
import pytest

from sofa_gui.core.importers.grouping import group_rows, group_rows_numpy


@pytest.mark.parametrize("n, high", [(0, 3), (1, 3), (2000, 3), (5000, 1 << 40)])
def test_numpy_grouping_equals_pandas_grouping(n, high):
    rng = np.random.default_rng(n)
    cols = [rng.integers(-high, high, n) for _ in range(3)]
    keys, ids = group_rows_numpy(*cols)
    want_keys, want_ids = group_rows(*cols)
    assert keys.shape == want_keys.shape and (keys == want_keys).all()
    assert (ids == want_ids).all()
    if n:
        assert (np.stack(cols, axis=1) == keys[ids]).all()  # every row maps to its own key
