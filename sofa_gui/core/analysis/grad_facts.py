"""Run facts about PyTorch's autograd: whether it records the model's ops, and whether
its anomaly detection is on.

``grad_mode``: recorded / off.  With grad mode on, ``torch.profiler`` gives every op that
goes through autograd a ``Sequence number`` argument (the number of the graph node it
would record); under ``torch.no_grad()`` or ``torch.inference_mode()`` the model's ops
carry none.  Ops outside the model (a read-back loop, a collate, post-processing after a
``no_grad`` block) run in grad mode in many correct programs, so the fact is read on the
model's own ops only: its matmuls, convolutions, normalisations, embeddings and
attention, which take the parameters.  Recorded in a training run is what training
needs; in an inference run it is a forgotten ``no_grad`` (see the inference-mode fix in
:mod:`.findings.fixes`).

``anomaly_detection``: on when the backward's node evaluations check their outputs for
NaN (see :func:`_anomaly_detection`); its cost is :mod:`.findings.anomaly_mode`'s.

Registered with :mod:`.run_facts`, which imports this module before its own probes.
"""

from __future__ import annotations

import re

import numpy as np

from ..trace import Kind, Trace
from .facts_base import Fact, probe
from .intervals import enclosing

#: The model's own ops (they take its parameters).
MODEL_OP = re.compile(r"^aten::(linear|addmm|mm|bmm|baddbmm|matmul|conv[123]d|convolution|"
                      r"conv_transpose[123]d|layer_norm|batch_norm|group_norm|embedding|"
                      r"embedding_bag|lstm|gru|rnn_tanh|rnn_relu|lstm_cell|gru_cell|"
                      r"scaled_dot_product_attention)$")
#: Model ops read (evenly spread over the trace) and the fewest that prove the fact.
SAMPLE, MIN_READ = 512, 8
#: Shares of the model ops read with a sequence number: at least RECORDED, recorded; at
#: most OFF, off; between, mixed (unknown).
RECORDED, OFF = 0.5, 0.1


def recorded(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Per slice of ``idx``: it carries autograd's ``Sequence number`` (None-args: no)."""
    s = trace.slices
    out = np.zeros(len(idx), bool)
    for k, j in enumerate(idx.tolist()):
        args = trace.args.get(int(s.args[j])) if s.args[j] >= 0 else None
        out[k] = isinstance(args, dict) and "Sequence number" in args
    return out


@probe
def _grad_mode(trace: Trace) -> list[Fact]:
    s = trace.slices
    ops = np.flatnonzero(np.isin(s.name, trace.name_ids(MODEL_OP.match))
                         & (s.kind == int(Kind.CPU_OP)) & (s.args >= 0))
    if len(ops) < MIN_READ:
        return [Fact("grad_mode")]
    read = ops[np.linspace(0, len(ops) - 1, min(len(ops), SAMPLE)).astype(np.int64)]
    seq = recorded(trace, read)
    frac = float(seq.mean())
    said = f"{int(seq.sum())} of {len(read)} model ops read carry an autograd sequence number"
    if frac >= RECORDED:
        first = int(read[np.flatnonzero(seq)[0]])
        return [Fact("grad_mode", "recorded", said,
                     f"`{trace.name_of(first)}` with a `Sequence number`", first)]
    if frac <= OFF:
        return [Fact("grad_mode", "off", said, "model ops without a `Sequence number`")]
    return [Fact("grad_mode")]


# -- anomaly detection ---------------------------------------------------------------------
#: The engine's evaluation of one backward node (``: name`` of the node).
EVALUATE = re.compile(r"^autograd::engine::evaluate_function: ")
#: The first op of anomaly mode's check of each output a backward node returns
#: (``isnan(output)._is_any_true().item()``), run by the engine right inside the node's
#: evaluation, beside the node's own call.
NAN_CHECK = "aten::isnan"
#: Node evaluations with a check inside that prove the mode on.
MIN_CHECKED = 4


def evaluations(trace: Trace) -> np.ndarray:
    """The backward's node evaluations (``autograd::engine::evaluate_function``)."""
    s = trace.slices
    return np.flatnonzero(np.isin(s.name, trace.name_ids(EVALUATE.match)))


def direct_children(trace: Trace, parents: np.ndarray,
                    names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the slices named one of ``names`` (name ids) one level inside one of ``parents``
    on its lane, the parent of each)."""
    s = trace.slices
    kids = np.flatnonzero(np.isin(s.name, names))
    kids = kids[np.argsort(s.lane[kids], kind="stable")]  # lane by lane
    p = enclosing(s.start, s.end, s.lane, parents, kids)[0]
    ok = (p >= 0) & (s.end[kids] <= s.end[p]) & (s.depth[kids] == s.depth[p] + 1)
    return kids[ok], p[ok]


@probe
def _anomaly_detection(trace: Trace) -> list[Fact]:
    """on when the backward checks its nodes' outputs for NaN
    (``torch.autograd.set_detect_anomaly(True)`` / ``detect_anomaly()``: each forward op
    then also stores its Python stack for the backward's error message); unknown
    otherwise, so that the run line of every other run stays as it is (a mode set with
    ``check_nan=False`` stores the stacks but runs no check, and reads unknown too)."""
    evals = evaluations(trace)
    if not len(evals):
        return [Fact("anomaly_detection")]
    checks, of = direct_children(trace, evals, trace.name_ids(lambda n: n == NAN_CHECK))
    checked = np.unique(of)
    if len(checked) < MIN_CHECKED:
        return [Fact("anomaly_detection")]
    nodes = int(np.count_nonzero(~np.isin(trace.slices.name[evals], trace.name_ids(
        lambda n: n.endswith("AccumulateGrad")))))
    return [Fact("anomaly_detection", "on", "NaN checks in the backward",
                 f"{len(checks):,} `{NAN_CHECK}` checks of backward outputs in "
                 f"{len(checked):,} of {nodes:,} node evaluations", int(checks.min()))]
