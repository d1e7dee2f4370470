"""Reads that index: PyTorch's indexing with a 0-d integer tensor (``table[tags[i + 1],
tags[i]]``, ``feat[tags[i]]``) reads the index into Python (``aten::item``) and picks with
it at once (``aten::select`` of the indexed tensor).  On a run with no device the read
waits for nothing: the tensor was computed on the CPU by the same thread, and what the
read costs is its call, part of the indexing op's fixed cost.  A loop of such reads is a
loop of indexed element ops (a gold path scored position by position): batching the
indexing (``gather`` of all the indices at once, advanced indexing with index tensors)
removes the reads with the picks and the ops between them, which is ``op_overhead_bound``'s
measure; a read of the whole result after the loop would remove nothing (no read loop,
:mod:`.read_rules`).  On a device each such read would drain the queue and stays a read.

The trace shows an indexing read by what surrounds it: the read hands over one integer
(``Input type`` ``long int``, no dims) and the framework's next call is a pick of a tensor
the loop has not picked from since the previous read (a different shape or type).  A loop
that reads elements one by one (``labels[k].item()``) picks its next element from the
tensor it read the last one from, so its reads stay reads.

A read of what an element op just computed is the same: ``bool(t[i] != 0)`` (a greedy
CTC decode walking a best path position by position) picks an element, compares it in a
framework op on 0-d operands and reads the 0-d result into Python.  On a run with no
device the comparison ran on the same thread before the read began: the read waits on
nothing and costs its call, one of the element op's calls; reading the whole tensor once
(``.tolist()``) and comparing in Python removes the picks, the ops and the reads alike,
the ops' fixed cost (``op_overhead_bound``'s).  The trace shows such a read by the call
right before it: a computing op (no pick, view or copy) whose recorded tensor inputs are all 0-d.  A
loop that reads a row's maximum (``out[k].max().item()``) computes on a row, and stays a
read loop.
"""

from __future__ import annotations

import numpy as np

from ...trace import Kind
from .context import Ctx
from .work import input_dims, op_kinds, outermost, slice_args

#: Ops that pick an element or a row of a tensor (:func:`.work.op_kind`).
INDEX_OP = frozenset({"select", "index", "slice", "narrow", "unbind"})
#: Ops that pick or view the element a read hands over (part of the read), as
#: :func:`.work.op_kind` spells them for every framework (PyTorch's ``aten::squeeze``,
#: TensorFlow's ``Squeeze``, JAX's ``squeeze`` alike).
PICK_OP = frozenset({"select", "index", "slice", "strided_slice", "dynamic_slice", "narrow",
                     "unbind", "unpack", "as_strided", "view", "alias", "unsqueeze",
                     "expand_dims", "squeeze", "reshape", "local_scalar_dense",
                     "gather_v2"})
#: Calls that hand over their input's values as they are (a view, a detached alias, a
#: copy): no element op computes before a read through them.
SAME_VALUES_OP = PICK_OP | {"detach", "expand", "contiguous", "clone", "lift_fresh", "to",
                            "to_copy", "copy_"}
#: PyTorch's integer element types, as ``Input type`` spells them.
INT_TYPES = frozenset({"long int", "int", "short int", "signed char", "unsigned char"})
#: Of a loop's reads at least this share index from which it is a loop of indexed ops.
INDEX_SHARE = 0.5


def index_loops(ctx: Ctx, mine: np.ndarray, reads: np.ndarray, run: np.ndarray,
                n_loops: int) -> np.ndarray:
    """Per loop of reads (``reads``: the main thread's reads by start, ``run`` the loop
    of each, numbered 0.. ``n_loops`` - 1; ``mine``: the main thread's slices): on a run
    with no device, a loop whose reads mostly index or read an element op's result
    (:func:`indexing_reads`, :func:`element_op_reads`)."""
    if ctx.bd.device is not None or not len(reads):
        return np.zeros(n_loops, bool)
    idx = indexing_reads(ctx, mine, reads) | element_op_reads(ctx, mine, reads)
    n = np.bincount(run, minlength=n_loops)
    return np.bincount(run, weights=idx, minlength=n_loops) >= INDEX_SHARE * np.maximum(n, 1)


def indexing_reads(ctx: Ctx, mine: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """Per read (by start): it reads a 0-d integer tensor and the next framework call on
    the thread picks from a tensor (shape and type) that no pick since the previous read
    took: the read is an index the indexing converts, not an element a loop hands to
    Python."""
    s = ctx.trace.slices
    ops = outermost(s.start, s.end, mine[s.kind[mine] == int(Kind.CPU_OP)])
    picks = np.isin(s.name[ops], op_kinds(ctx, INDEX_OP))
    at = np.searchsorted(s.start[ops], s.start[reads])  # each read's place among them
    out = np.zeros(len(reads), bool)
    prev = -1
    for r, (k, j) in enumerate(zip(at.tolist(), reads.tolist())):
        if k + 1 < len(ops) and ops[k] == j and picks[k + 1] and _int_scalar(ctx, j):
            seen = {_first_input(ctx, int(p)) for p in ops[prev + 1:k][picks[prev + 1:k]]}
            out[r] = _first_input(ctx, int(ops[k + 1])) not in seen
        prev = k
    return out


def element_op_reads(ctx: Ctx, mine: np.ndarray, reads: np.ndarray) -> np.ndarray:
    """Per read (by start): it reads a 0-d tensor, and the framework call right before it
    on the thread is a computing op (no pick, view or copy: :data:`SAME_VALUES_OP`; no
    read) on 0-d tensors only: the read hands over
    what an element op computed a moment before on the same thread."""
    s = ctx.trace.slices
    ops = outermost(s.start, s.end, mine[s.kind[mine] == int(Kind.CPU_OP)])
    same = np.isin(s.name[ops], op_kinds(ctx, SAME_VALUES_OP)) | np.isin(ops, reads)
    at = np.searchsorted(s.start[ops], s.start[reads])
    out = np.zeros(len(reads), bool)
    for r, (k, j) in enumerate(zip(at.tolist(), reads.tolist())):
        if 0 < k < len(ops) and ops[k] == j and not same[k - 1] and _scalar_read(ctx, j):
            out[r] = _on_scalars(ctx, int(ops[k - 1]))
    return out


def _scalar_read(ctx: Ctx, j: int) -> bool:
    """A call on one 0-d tensor."""
    dims = slice_args(ctx, j).get("Input Dims")
    return isinstance(dims, list) and dims[:1] == [[]]


def _on_scalars(ctx: Ctx, j: int) -> bool:
    """A call whose recorded tensor inputs are all 0-d (one at least)."""
    dims = input_dims(ctx, j)
    return bool(dims) and all(d == [] for d in dims)


def _int_scalar(ctx: Ctx, j: int) -> bool:
    """A call on one 0-d tensor of an integer type."""
    types = slice_args(ctx, j).get("Input type")
    return (_scalar_read(ctx, j) and isinstance(types, list) and bool(types)
            and types[0] in INT_TYPES)


def _first_input(ctx: Ctx, j: int) -> tuple:
    """(shape, type) of a call's first input, as recorded."""
    args = slice_args(ctx, j)
    dims, types = args.get("Input Dims") or [None], args.get("Input type") or [None]
    return str(dims[0]), str(types[0])
