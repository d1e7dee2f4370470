"""An L2 penalty summed in Python over the parameters, and its fix: the optimizer's
``weight_decay``.

Forum answers add ``l2_lambda * sum(p.pow(2.0).sum() for p in model.parameters())`` to
the loss: per parameter tensor one ``pow`` and one ``sum`` on exactly the parameter's
shape, a chain of scalar ``add`` ops summing them, and in the backward pass a
``PowBackward0``, a ``SumBackward0`` and an ``AddBackward0`` per parameter: a loop of tiny
ops as long as the model has tensors.  ``weight_decay=2 * l2_lambda`` (the penalty's
gradient) makes the same update inside the optimizer's step: one op per parameter on the
same elements (one for all of them with ``foreach`` or ``fused``).  The parameters'
shapes are the shapes of the optimizer's step's ops' inputs, so a ``pow`` on an
activation (a norm layer's square) is no penalty term.
"""

from __future__ import annotations

import numpy as np

from ..grad_facts import EVALUATE
from .context import Ctx
from .work import input_dims

#: The fix's name (:attr:`..results.Fix.name`).
PENALTY_FIX = "weight decay in the optimizer"
#: Penalty terms (``pow`` on a parameter's shape) a step must show to read as a loop.
MIN_TERMS = 8


def penalty_ops(ctx: Ctx, ops: np.ndarray, opt: np.ndarray, n_steps: int) -> np.ndarray:
    """Per op of ``ops`` (outermost ops of the steady steps, in time order; ``opt``: inside
    the optimizer's step): one of an L2 penalty's ops (all False when the steps show no
    :data:`MIN_TERMS` terms a step).  A term is a ``pow`` on a parameter's shape, the
    ``sum`` right after it and the scalar ``add`` right after that; the backward nodes
    ``PowBackward0`` and ``SumBackward0`` count whole, ``AddBackward0`` only where there
    are no more of them than the chain's adds and the loss's own (else the model adds too,
    and which are the penalty's the trace cannot say)."""
    names = ctx.trace.name_of
    out = np.zeros(len(ops), bool)
    if not opt.any():
        return out
    params = {str(d) for j in ops[opt].tolist() for d in input_dims(ctx, j) if d}
    nm = [names(int(j)) for j in ops.tolist()]
    adds = 0
    for k, name in enumerate(nm):
        if name != "aten::pow" or opt[k] or k + 1 >= len(nm) or nm[k + 1] != "aten::sum":
            continue
        dims = input_dims(ctx, int(ops[k]))
        if not dims or str(dims[0]) not in params:
            continue
        out[k] = out[k + 1] = True
        if k + 2 < len(nm) and nm[k + 2] == "aten::add" and not any(
                input_dims(ctx, int(ops[k + 2]))):
            out[k + 2], adds = True, adds + 1
    if out[[n == "aten::pow" for n in nm]].sum() < MIN_TERMS * max(n_steps, 1):
        return np.zeros(len(ops), bool)
    node = np.array([EVALUATE.sub("", n) for n in nm]) if nm else np.array([], str)
    out |= np.isin(node, ("PowBackward0", "SumBackward0"))
    grads = node == "AddBackward0"
    if grads.sum() <= adds + n_steps:
        out |= grads
    return out


def penalty_cost_ns(ctx: Ctx, pen: np.ndarray) -> float:
    """What weight decay adds to the optimizer's step for the penalty's ops ``pen``, ns:
    one op per parameter on its elements, as the penalty's ``pow`` ops cost."""
    s = ctx.trace.slices
    pows = np.isin(s.name[pen], ctx.trace.name_ids(lambda n: n == "aten::pow"))
    return float(s.dur[pen[pows]].sum())


def penalty_gain(fix) -> tuple:
    """The fix's own estimate (:data:`.context.FixGain`): ``fix`` (a
    :class:`.host_estimate.HostFix`) removes the penalty's ops and the Python between
    them, and adds one op per parameter to the optimizer's step."""
    return fix.speedup(), ("the penalty's pow, sum and add per parameter and their backward "
                           "removed; the optimizer's step does one op per parameter more"), 1.0


def penalty_unseen(name: str, found: bool) -> str:
    """Why the fix named ``name`` has no cause here ("" when it has one, or is another)."""
    if name == PENALTY_FIX and not found:
        return "no L2 penalty summed over the parameters' tensors in the step"
    return ""
