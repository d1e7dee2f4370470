"""Run fact about PyTorch's grad mode: whether autograd records the model's ops.

``grad_mode``: recorded / off.  With grad mode on, ``torch.profiler`` gives every op that
goes through autograd a ``Sequence number`` argument (the number of the graph node it
would record); under ``torch.no_grad()`` or ``torch.inference_mode()`` the model's ops
carry none.  Ops outside the model (a read-back loop, a collate, post-processing after a
``no_grad`` block) run in grad mode in many correct programs, so the fact is read on the
model's own ops only: its matmuls, convolutions, normalisations, embeddings and
attention, which take the parameters.  Recorded in a training run is what training
needs; in an inference run it is a forgotten ``no_grad`` (see the inference-mode fix in
:mod:`.findings.fixes`).

Registered with :mod:`.run_facts`, which imports this module before its own probes.
"""

from __future__ import annotations

import re

import numpy as np

from ..trace import Kind, Trace
from .facts_base import Fact, probe

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
