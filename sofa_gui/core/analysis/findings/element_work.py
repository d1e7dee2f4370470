"""What one more input adds to a unit's innermost elementwise ops: their elements at a small
cost each, but for random draws, whose calls' time beyond a small call's grows with them.

A small elementwise op (ReLU, an add, a copy) on a batch-1 input is its fixed cost: one
more input adds its elements at :data:`.batch_estimate.ELEMENT_NS` each (ReLU and a
product take 0.1 ns an element on 51,200 elements).  That holds for ops whose batch-1 call
is long too: a GELU on 96 elements takes 13 µs as captured and 0.4-0.9 ns an element in a
batch of 64; a max pooling's 11 µs on one image, counted per image, read a batch-1 conv
net's 50 images batched 3.2x where 4.5x is measured.
A random draw does work per element at any size: ``bernoulli_`` (dropout's mask) takes
8.5 ns an element on 1,024 elements and 8.0 on 51,200, ``normal_`` 4.0 and 3.4, on one
thread of the machine the corpus is made on.  So a random draw adds, per further input,
its calls' time beyond a small call's fixed cost (the median of the unit's innermost
elementwise calls), unprofiled, at most :data:`DRAW_NS` an element.  Monte-Carlo
dropout's 50 passes of an MLP on 4 rows batched into one pass of 200 rows: 4.9x with the
draws at half a nanosecond an element, 2.5x counted so, where 3.2x is measured.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from .context import Ctx
from .work import elements, input_dims

#: Ops that fill their input with a random number per element (``torch.rand`` and
#: ``randn`` record one inside); a draw of a few samples from a distribution
#: (``multinomial``, an action sampled from a policy) is its fixed cost.
RANDOM = re.compile(r"^aten::(bernoulli_?|normal_|uniform_|exponential_|geometric_|cauchy_|"
                    r"log_normal_|random_|native_dropout)$")
#: The most a draw costs per element (``bernoulli_`` 8.0-8.5 ns): beyond it, a call's time
#: is its own fixed cost (``multinomial``'s ``exponential_`` on 3 elements, 1.4 µs).
DRAW_NS = 10.0


def element_ns(ctx: Ctx, calls: np.ndarray, own: np.ndarray, element_ns: float,
               unprofiled: Callable[[float], float]) -> float:
    """ns the innermost elementwise ``calls`` (own times ``own``) add for one more input:
    per call its smallest input's elements at ``element_ns`` each, or, for a random draw
    (:data:`RANDOM`), at least its group's (name and input shapes) median unprofiled time
    (``unprofiled``: ns of a call that records one event) beyond the median of all the
    calls' (a small call's fixed cost), at most :data:`DRAW_NS` an element."""
    if not len(calls):
        return 0.0
    s = ctx.trace.slices
    draws = ctx.trace.name_ids(RANDOM.match)
    groups: dict[tuple, list[int]] = {}
    sizes = np.zeros(len(calls))
    for k, j in enumerate(calls.tolist()):
        dims = input_dims(ctx, j)
        sizes[k] = min((elements(d) for d in dims if len(d)), default=0)
        if np.isin(s.name[j], draws):
            groups.setdefault((int(s.name[j]), *map(tuple, dims)), []).append(k)
    out = float(sizes.sum()) * element_ns
    if not groups:
        return out
    fixed = float(np.median([unprofiled(float(x)) for x in own.tolist()]))
    for at in groups.values():
        k = np.asarray(at, np.int64)
        beyond = min(unprofiled(float(np.median(own[k]))) - fixed, sizes[k[0]] * DRAW_NS)
        out += max(len(k) * beyond - float(sizes[k].sum()) * element_ns, 0.0)
    return out
