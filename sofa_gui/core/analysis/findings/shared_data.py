"""Work on data every request shares: a request answered at batch 1 whose matmuls all
multiply one row (matrix-vector products: a query against an embedding bank, a sample
through an MLP) runs its other ops either on its own row (``[1, 128]``, ``[1, 512]``) or
on data that is the same for every request, a bank or a table ``[4096, 128]`` that has no
dimension of one.  ``torch.cdist(q.unsqueeze(0), bank)`` squares, sums and copies the
whole 4,096 x 128 bank for each query (its norms and the padded copy its matmul reads):
long calls, but paid once per call, not per query; one ``cdist`` of 64 queries does it
once.  So such an op is neither the work a batch keeps (:mod:`.small_batch`'s share) nor
what each further input adds (:func:`.batch_estimate.added_ns`).  A convolution's
activations (``[1, 64, 56, 56]``) and a model over a sequence (its matmuls on a row per
position, ``[197, 768] x [768, 768]``) are not one-row requests: their ops stay work.
"""

from __future__ import annotations

import numpy as np

from .context import Ctx
from .work import MATMUL, elements, input_dims, matmul_work


def one_row_requests(ctx: Ctx, ops: np.ndarray) -> bool:
    """``ops`` hold a matmul with recorded shapes and every such matmul multiplies a
    single row (each request one row through the data)."""
    s = ctx.trace.slices
    mm = ctx.trace.name_ids(MATMUL.match)
    rows = [w[1] for j in ops[np.isin(s.name[ops], mm)].tolist()
            if (w := matmul_work(input_dims(ctx, j))) is not None]
    return bool(rows) and max(rows) == 1


def shared_data(ctx: Ctx, ops: np.ndarray, among: np.ndarray | None = None) -> np.ndarray:
    """Per op of ``ops``: it works on data every request shares, where the requests of
    ``among`` (``ops`` where None) are one row each (:func:`one_row_requests`): its largest
    recorded input has two or more dimensions, none of them one."""
    out = np.zeros(len(ops), bool)
    if not len(ops) or not one_row_requests(ctx, ops if among is None else among):
        return out
    for k, j in enumerate(ops.tolist()):
        dims = [d for d in input_dims(ctx, j) if len(d)]
        big = max(dims, key=elements, default=[])
        out[k] = len(big) >= 2 and 1 not in big
    return out
