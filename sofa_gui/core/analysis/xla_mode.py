"""Training or inference from the XLA programs that ran in a capture (JAX, TensorFlow
with XLA), each summarised by the XPlane importer from its HloProto
(:mod:`..importers.xplane.hlo`: op types, name scopes and transformations, its math).

Training is a sign that is there: a program that ran holds a gradient or update name
(``transpose(jvp())``, ``gradient_tape/``, ``ReluGrad``, ``Conv2DBackpropFilter``...).
Inference is only the absence of such signs, so it is claimed where the absence covers
the run's math: every program that ran has its HloProto in the capture, all their
names are known, at least one holds matmuls or convolutions, and each of those is a
compiled function of several ops (a primitive dispatched eagerly, as ``jax.grad`` runs
outside ``jit``, carries no name of the transformation it belongs to). Programs that
were compiled but did not run in the capture (the metadata plane lists every program
of the process) say nothing.
"""

from __future__ import annotations

import re

from ..trace import Trace
from .facts_base import Fact

#: ``meta.extra`` key the XPlane importer writes (its ``XLA_PROGRAMS``).
PROGRAMS = "xla_programs"


def ran_programs(trace: Trace) -> list[dict]:
    """The summaries of the programs that ran, as far as they are well-formed (checked
    again here: a trace cached before may hold anything)."""
    out = []
    for p in trace.meta.extra.get(PROGRAMS) or []:
        if not isinstance(p, dict) or not isinstance(p.get("module"), str):
            continue
        names = p.get("names") if isinstance(p.get("names"), list) else []
        out.append({"module": p["module"], "hlo": p.get("hlo") is True,
                    "complete": p.get("complete") is True,
                    "math": _count(p.get("math")), "op_names": _count(p.get("op_names")),
                    "names": [n for n in names if isinstance(n, str)]})
    return out


def _count(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


#: Names that say training only by what a function is called: cited after an op.
_CALLED = re.compile(r"train|update_step")


def training_program(trace: Trace, training: re.Pattern) -> Fact | None:
    """``mode: training`` where a program that ran holds a training name (a gradient or
    update op cited before a function's name)."""
    hits = [(bool(_CALLED.search(n)), n, p["module"]) for p in ran_programs(trace)
            for n in p["names"] if training.search(n)]
    if not hits:
        return None
    _, name, module = min(hits)
    return Fact("mode", "training", "",
                f"XLA program `{module}`, run in the capture, holds `{name}`")


def inference_programs(trace: Trace, training: re.Pattern) -> Fact | None:
    """``mode: inference`` where no program that ran holds a training name and the
    absence covers the math (see the module doc); None where it does not."""
    progs = ran_programs(trace)
    if not progs or not all(p["hlo"] and p["complete"] for p in progs):
        return None
    math = [p for p in progs if p["math"]]
    if not math or any(p["op_names"] < 2 for p in math):
        return None
    if any(training.search(n) for p in progs for n in p["names"]):
        return None
    held = ", ".join(f"`{p['module']}` ({p['math']} matmuls/convolutions)" for p in math[:3])
    ran = f"{len(progs)} XLA programs ran" if len(progs) > 1 else "1 XLA program ran"
    return Fact("mode", "inference", "no gradient or update op in the XLA programs run",
                f"{ran} in the capture, the math in {held}; none "
                f"holds a gradient, transpose or optimizer op (HLO op types and name "
                f"paths): no sign of training, which is weaker than a sign of inference")


#: A run whose XLA programs that ran are at least this many, each of fewer than
#: :data:`FUSED_OP_NAMES` op names, dispatched its primitives one by one (JAX outside
#: ``jax.jit``: every ``jnp`` function is a small program of its own).
OP_BY_OP_PROGRAMS = 8
FUSED_OP_NAMES = 12


def op_by_op(trace: Trace) -> bool:
    """The XLA programs that ran are many small ones and none a compiled function of the
    program's own: the run was not compiled, whatever ``PjitFunction`` events say."""
    progs = ran_programs(trace)
    return (len(progs) >= OP_BY_OP_PROGRAMS and all(p["hlo"] for p in progs)
            and max(p["op_names"] for p in progs) < FUSED_OP_NAMES)
