"""Names for narrow columns and the heat map's diverging scale (no Qt)."""

from __future__ import annotations

import numpy as np

from sofa_gui.view.heat_scale import diverging_scale
from sofa_gui.view.names import compact_name


def test_compact_name_keeps_the_distinctive_tail():
    kernel = ("void at::native::(anonymous namespace)::elementwise_kernel<128, 2, "
              "at::native::AddFunctor<float> >(int, at::native::Foo)")
    assert compact_name(kernel) == "elementwise_kernel<128, 2, AddFunctor<float> >"
    assert compact_name("aten::copy_") == "copy_"
    # not C++: parentheses are part of the name
    assert compact_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert compact_name("ProfilerStep#5") == "ProfilerStep#5"


def test_diverging_scale_is_centred_on_the_median_with_a_floor():
    v = np.array([[100.0, 104.0], [np.nan, 102.0]])
    sc = diverging_scale(v)
    assert sc.centre == 102.0 and abs(sc.half - 10.2) < 1e-9  # 10% of the median > 2.0
    pos = sc.position(v)
    assert np.isnan(pos[1, 0]) and abs(pos[0, 0] + 2 / 10.2) < 1e-9
    wide = diverging_scale(np.array([100.0, 100.0, 300.0]))
    assert wide.half == 200.0 and wide.position([300.0])[0] == 1.0
    assert diverging_scale(np.array([np.nan])).centre == 0.0
