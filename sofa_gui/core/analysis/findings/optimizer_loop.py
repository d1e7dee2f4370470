"""Which loop of tiny ops a step's op overhead is, and the fixes that fit it.

A PyTorch optimizer's default implementation updates each parameter tensor with a few
tiny ops (``add_``, ``mul_``, ``addcdiv_``, ``sqrt``) inside ``Optimizer.step``; the
model's own tiny ops are the rest.  The two loops have different fixes: the fused
optimizer (``fused=True``) does the whole update in one op per parameter group, while
batching the model's calls or ``torch.compile(model)`` leaves the optimizer's loop as it
is.  :class:`TinyLoops` says which loops a finding counts and hides the fixes that
remove neither of them (through :func:`.context.make_finding`'s ``unseen``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .batch_estimate import median_row, repeated_blocks
from .context import Ctx

#: The optimizers with a fused implementation (``fused=True``) in PyTorch.
FUSED_OPTIMIZERS = ("Adam", "AdamW", "SGD", "Adagrad")
#: The optimizers whose step is no per-parameter loop: ``LBFGS`` works on one flat vector
#: of all the parameters (its two-loop recursion's ``dot`` and ``add_`` over its history,
#: its line search) and runs the closure, the model's forward and backward, inside its
#: step several times.  PyTorch has no foreach or fused implementation of it, so its
#: step's tiny ops are the algorithm's own and no loop a fix removes.
NO_LOOP_OPTIMIZERS = ("LBFGS",)
#: Fix names (:attr:`..results.Fix.name`) per loop they remove.
OPTIMIZER_FIXES = ("fused optimizer", "foreach optimizer")
MODEL_FIXES = {"batch or compile the model": "batching or compiling the model's calls leaves "
                                             "it as it is",
               "more work per op": "a larger batch leaves its ops as many and as small"}
#: The class in a recorded step, ``Optimizer.step#AdamW.step`` -> ``AdamW``.
_STEP_CLASS = re.compile(r"^Optimizer\.step#(\w+)\.step$")


@dataclass
class TinyLoops:
    """The loops a finding counts: ``optimizer`` (tiny ops inside ``Optimizer.step``),
    ``model`` (the other tiny ops); ``optimizer_class`` as the step's record names it
    ("" when no record names one)."""

    optimizer: bool
    model: bool
    optimizer_class: str = ""

    #: The words on an update batched along with the model's calls.
    UPDATE_ALONG = (" The step's calls repeat no unit inside it, so they stack across steps: "
                    "a larger batch, which also pays the optimizer's update once for all "
                    "its samples; the estimate takes the update out with the tiny ops.")

    @property
    def optimizer_only(self) -> bool:
        return self.optimizer and not self.model

    def update_batched_along(self, ctx: Ctx, host) -> bool:
        """Whether batching the model's loop takes the optimizer's update out with it,
        though the update's ops are no loop of their own: in a training step whose calls
        repeat no unit over half its time (:func:`.batch_estimate.repeated_blocks`: its
        tiny ops are the step's own, one per layer and per autograd node, not a loop
        inside it) the calls stack only across steps, a larger batch, which pays the
        update once for all its samples (per sample it goes); a loop of repeats inside
        the step is batched there, and the update stays."""
        if not self.model or self.optimizer or ctx.facts.value("mode") != "training":
            return False
        return not repeated_blocks(ctx, host, median_row(ctx, host), cover=0.5)

    def fused_exists(self) -> bool | None:
        """Whether the optimizer has a fused implementation (None: the trace does not
        name its class)."""
        if not self.optimizer_class:
            return None
        return self.optimizer_class in FUSED_OPTIMIZERS

    def unseen(self, fix) -> str:
        """Why ``fix`` removes neither counted loop ("" when it removes one of them)."""
        if fix.name in OPTIMIZER_FIXES:
            if not self.optimizer:
                return "no loop of tiny ops inside the optimizer's step here"
            if fix.name == "fused optimizer" and self.fused_exists() is False:
                return (f"{self.optimizer_class} has no fused implementation (PyTorch's are "
                        f"{', '.join(FUSED_OPTIMIZERS)})")
        if fix.name in MODEL_FIXES and self.optimizer_only:
            return (f"the loop of tiny ops is the optimizer's per-parameter update inside "
                    f"Optimizer.step: {MODEL_FIXES[fix.name]}")
        return ""


def optimizer_class(ctx: Ctx, steps: np.ndarray) -> str:
    """The optimizer's class as its recorded steps name it ("" when none does, or they
    name several)."""
    names = {ctx.trace.name_of(int(j)) for j in steps.tolist()}
    found = {m.group(1) for n in names if (m := _STEP_CLASS.match(n))}
    return found.pop() if len(found) == 1 else ""


def no_update_loop(optimizer: str) -> bool:
    """Whether the tiny ops inside a step of ``optimizer`` (a class, as
    :func:`optimizer_class` reads it) are no per-parameter loop: its step has neither a
    foreach nor a fused implementation (:data:`NO_LOOP_OPTIMIZERS`)."""
    return optimizer in NO_LOOP_OPTIMIZERS


def fused_step_ns(ctx: Ctx, ops: np.ndarray, fixed: np.ndarray, typical: np.ndarray,
                  held_ns: float) -> float:
    """What one fused step costs for the optimizer's loop ``ops``, in ns: the math of the
    loop's in-place ops (``add_``, ``mul_``, ``lerp_``, ``addcdiv_``: a name ending in
    ``_``), each op's time over its ``fixed`` cost per call.  A fused step updates each
    parameter and its state in place as those ops do; the loop's out-of-place ops
    (``sqrt``, ``div``) fill fresh temporaries it never makes.  An instance held
    ``held_ns`` or more (descheduled) counts its name's ``typical`` time."""
    s = ctx.trace.slices
    dur = s.dur[ops].astype(np.float64)
    dur = np.where(dur >= held_ns, np.minimum(dur, typical), dur)
    in_place = np.isin(s.name[ops], ctx.trace.name_ids(lambda n: n.endswith("_")))
    return float(np.maximum(dur - fixed, 0.0)[in_place].sum())


def fused_gain(loops: TinyLoops, alone) -> tuple[float | None, str, float]:
    """The fused optimizer's own estimate, where the trace names an optimizer with a fused
    implementation: its loop of tiny ops (``alone``) replaced by one fused step, the
    model's tiny ops, where they are counted too, kept (the finding's estimate removes
    both); none otherwise (said why)."""
    if loops.fused_exists() is None:
        return None, ("the trace does not name the optimizer's class, so whether it has a "
                      "fused implementation is unknown"), 1.0
    kept = "" if loops.optimizer_only else "; the model's tiny ops stay as they are"
    return alone.speedup(), (f"the optimizer's loop of tiny ops replaced by one fused "
                             f"{loops.optimizer_class} step that does the math of its in-place "
                             f"ops{kept}"), 1.0
