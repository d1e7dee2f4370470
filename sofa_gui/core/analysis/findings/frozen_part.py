"""A frozen part of the model recomputed on every training step: the estimate of computing
its outputs once and training on them (the feature-extraction route of transfer learning,
a distillation teacher's logits cached), a fix of the compute finding.

A training step whose backward runs shows which of its forward work gets no gradient:

* TensorFlow: the step's forward convolutions (``Conv2D``, ``DepthwiseConv2dNative``,
  ``Conv3D``, MKL and fused forms) against its filter gradients (``...BackpropFilter``):
  a convolution with no filter gradient belongs to a frozen base (``trainable = False``).
  A frozen base is the bottom of the model, so the first convolutions of the step are its
  own; its time is the step's wall time from the first of them to the end of the last.
* PyTorch: the model's ops (:data:`..grad_facts.MODEL_OP`) that run before the backward
  without autograd's ``Sequence number`` -- a sub-network run under ``torch.no_grad()`` or
  with ``requires_grad_(False)`` on its parameters and inputs; its time is the main
  thread's span of each such run of unrecorded ops.

Its outputs can be computed once only where the frozen part's inputs repeat from epoch to
epoch, which the trace cannot prove: the fix says so as its condition.  What the trace does
rule out is shown as absent: random ops before the frozen part in the step (noise fed to a
generator, random augmentation), and an EMA update of a teacher (``lerp_`` outside the
optimizer's step) that changes its outputs every step.  The estimate is the step without
the frozen part's time (:func:`_speedup`); the lookup of the cached outputs is left out.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from ..grad_facts import MODEL_OP, recorded
from ..intervals import covered
from ..results import Fix
from .causes import self_times
from .context import Ctx
from .host_estimate import TF_UNPROFILED, TINY_LOOP_UNPROFILED, HostFix
from .work import TINY_NS, outermost

#: The fix's name (the scorer matches a measured "computed once" to it).
FIX_NAME = "frozen part computed once"
#: The frozen part in at least this share of the steady training steps.
MIN_STEPS = 0.5
#: The frozen part's time, at least this share of the steps' time, to be worth a fix.
MIN_SHARE = 0.05

_TF_CONV = re.compile(r"^_?(Mkl)?_?(Native)?_?(Fused)?(Conv2D|Conv3D|DepthwiseConv2dNative)$")
_TF_FILTER_GRAD = re.compile(r"BackpropFilter")
_TF_BACKWARD = re.compile(r"Grad|Backprop")
_TF_RANDOM = re.compile(r"Random(Uniform|Normal|Standard|Crop|Shuffle)|ImageProjectiveTransform|"
                        r"RandomGamma|Multinomial")
_PT_BACKWARD = re.compile(r"^autograd::engine::evaluate_function|Backward[0-9]*$")
_PT_RANDOM = re.compile(r"^aten::(rand|randn|randint|randperm|rand_like|randn_like|normal_|"
                        r"uniform_|bernoulli_?|multinomial)$")
_PT_EMA = re.compile(r"^aten::(_foreach_)?lerp_")
_PT_OPTIMIZER = re.compile(r"^Optimizer\.step#")

_TEXT = {
    "tensorflow": "Compute the frozen base's outputs once and train the head on them: "
                  "features = base.predict(images) for the data set, then fit the head "
                  "(a model that starts at the base's output) on (features, labels). Only "
                  "where the base's inputs repeat from epoch to epoch: no random "
                  "augmentation before it (with augmentation the base runs every step, or "
                  "the augmented copies are cached).",
    "pytorch": "Compute the frozen sub-network's outputs once (a no_grad teacher's logits, a "
               "frozen backbone's features) for the data set and look them up per batch: "
               "torch.no_grad() over the data set once, a tensor indexed by the samples' "
               "positions (a Dataset that returns the index). Only where its inputs repeat "
               "from epoch to epoch: no random augmentation before it.",
}


def _name_ids(ctx: Ctx, pattern: re.Pattern) -> np.ndarray:
    return ctx.trace.name_ids(lambda n: bool(pattern.search(n)))


def _tf_ops(ctx: Ctx, host) -> np.ndarray:
    """The ops of the step graph's thread pools (tf.data threads left out), by start."""
    s = ctx.trace.slices
    lanes = [h for h in host.helper_lanes if not ctx.trace.lanes.name[h].startswith("tf_data")]
    if not lanes:
        return np.zeros(0, np.int64)
    ops = np.concatenate([ctx.trace.lane_slices(h) for h in lanes])
    ops = ops[(s.kind[ops] == int(Kind.CPU_OP)) & (s.depth[ops] > 0)]  # not the executor
    return ops[np.argsort(s.start[ops], kind="stable")]


def _tf_spans(ctx: Ctx, host) -> list[tuple[int, int]]:
    """Per steady training step, the (start, end) of its frozen base's forward (none
    where every convolution gets its filter gradient)."""
    s = ctx.trace.slices
    ops = _tf_ops(ctx, host)
    conv, grad, back, rand = (np.isin(s.name[ops], _name_ids(ctx, p)) for p in
                              (_TF_CONV, _TF_FILTER_GRAD, _TF_BACKWARD, _TF_RANDOM))
    spans = []
    for i in ctx.rows.tolist():
        mine = (s.start[ops] >= host.starts[i]) & (s.start[ops] < host.ends[i])
        convs = ops[mine & conv]
        frozen = len(convs) - int((mine & grad).sum())
        if not (mine & back).any() or frozen <= 0:
            continue
        first, last = int(s.start[convs[0]]), int(s.end[convs[frozen - 1]])
        if (mine & rand & (s.end[ops] <= first)).any():
            continue  # random inputs: the base's outputs differ every step
        spans.append((first, last))
    return spans


def _pt_spans(ctx: Ctx, host) -> list[tuple[int, int]]:
    """Per steady training step, the (start, end) of each run of unrecorded model ops
    before its backward (none where a random op comes first, or a teacher is an EMA)."""
    s = ctx.trace.slices
    all_ops = ctx.steady_slices(host, Kind.CPU_OP)
    if not len(all_ops):
        return []
    back = np.isin(s.name[all_ops], _name_ids(ctx, _PT_BACKWARD))
    model_ids = ctx.trace.name_ids(lambda n: bool(MODEL_OP.match(n)))
    rand_ids = ctx.trace.name_ids(lambda n: bool(_PT_RANDOM.match(n)))
    ema = all_ops[np.isin(s.name[all_ops], _name_ids(ctx, _PT_EMA))]
    steps = outermost(s.start, s.end, all_ops[np.isin(
        s.name[all_ops], _name_ids(ctx, _PT_OPTIMIZER))])
    if len(ema) and not all(((s.start[j] >= s.start[steps]) & (s.end[j] <= s.end[steps])).any()
                            for j in ema.tolist()):
        return []  # a teacher moved towards the student every step
    spans = []
    for i in ctx.rows.tolist():
        mine = all_ops[(s.start[all_ops] >= host.starts[i]) & (s.start[all_ops] < host.ends[i])]
        b = mine[np.isin(mine, all_ops[back])]
        if not len(b):
            continue
        top = outermost(s.start, s.end, mine[s.start[mine] < s.start[b[0]]])
        if not len(top):
            continue
        seq = recorded(ctx.trace, top)
        model = np.isin(s.name[top], model_ids)
        rand = np.isin(s.name[top], rand_ids)
        k = 0
        while k < len(top):
            if seq[k] or not model[k]:
                k += 1
                continue
            end = k
            while end + 1 < len(top) and not seq[end + 1]:
                end += 1
            last = max(m for m in range(k, end + 1) if model[m])
            if rand[:k].any():
                break  # noise or augmentation before it: its outputs differ every step
            spans.append((int(s.start[top[k]]), int(s.end[top[last]])))
            k = end + 1
    return spans


def estimate_frozen(ctx: Ctx, finding) -> None:
    """Add the frozen-part fix to the compute ``finding`` of a training run whose steps
    recompute a part of the model that gets no gradient, with its estimate, and say it in
    the summary."""
    fw = ctx.facts.value("framework")
    host = ctx.bd.host
    if fw not in _TEXT or host is None or ctx.bd.device is not None or not len(ctx.rows) \
            or ctx.facts.value("mode") != "training":
        return
    spans = _tf_spans(ctx, host) if fw == "tensorflow" else _pt_spans(ctx, host)
    steps = {int(np.searchsorted(host.starts, a, side="right")) - 1 for a, _ in spans}
    r = ctx.rows
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    frozen = float(sum(b - a for a, b in spans))
    if len(steps) < MIN_STEPS * len(r) or frozen < MIN_SHARE * wall:
        return
    fix = Fix(fw, _TEXT[fw], modes=("training",), gain="removes", name=FIX_NAME)
    fix.estimate = _speedup(ctx, host, fw, spans, frozen, wall)
    what = ("a frozen base: convolutions with no filter gradient" if fw == "tensorflow"
            else "a no_grad or frozen sub-network: model ops autograd does not record")
    fix.estimate_why = (f"the part that gets no gradient ({what}) takes {frozen / wall:.0%} "
                        f"of the training steps, gone once "
                        f"their outputs are computed once; on the condition, which the trace "
                        f"cannot prove, that its inputs repeat from epoch to epoch")
    fix.because = "a part of the model that gets no gradient runs in every training step"
    finding.fixes.insert(0, fix)
    finding.summary += (f" A part of the model that gets no gradient runs forward in every "
                        f"training step ({what}) and takes {frozen / wall:.0%} of the "
                        f"steps: its outputs computed once, where its inputs repeat from "
                        f"epoch to epoch, about {fix.estimate:.2f}x.")


def _speedup(ctx: Ctx, host, fw: str, spans, frozen: float, wall: float) -> float:
    """The steps' speed-up without the frozen part (:class:`.host_estimate.HostFix`): the
    removed part is math, as long without the profiler as captured; of the rest, the ops
    that run :data:`.work.TINY_NS` or longer on their own are math too, and the remainder
    is per-op work at the framework recorder's ratio."""
    s = ctx.trace.slices
    ops = _tf_ops(ctx, host) if fw == "tensorflow" else ctx.steady_slices(host, Kind.CPU_OP)
    ops = ops[ctx.in_steady(s.start[ops], host.starts, host.ends)]
    starts, ends = (np.array(x, np.int64) for x in zip(*spans))
    ops = ops[~covered(s.start[ops], starts, ends)]
    own = self_times(ctx, ops) if len(ops) else np.zeros(0)
    math = float(own[own >= TINY_NS].sum())
    ratio = TF_UNPROFILED if fw == "tensorflow" else TINY_LOOP_UNPROFILED
    return HostFix(min(frozen / wall, 1.0), math / wall, per_op=ratio,
                   step_ns=ctx.call_ns(wall, len(ctx.rows))).speedup()
