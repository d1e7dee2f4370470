"""What an XLA program holds, in brief, from the ``HloProto`` a JAX or TensorFlow (XLA)
profile stores in its ``/host:metadata`` plane (one per compiled program).

Schema: xla/service/hlo.proto. ``HloProto.hlo_module`` (1) is an ``HloModuleProto``:
``name`` (1), ``computations`` (3), ``id`` (5); each ``HloComputationProto`` holds
``instructions`` (2); an ``HloInstructionProto`` has ``opcode`` (2) and ``metadata`` (7),
an ``OpMetadata`` with ``op_type`` (1: TensorFlow's op, e.g. ``ReluGrad``) and
``op_name`` (2: the framework's name path, e.g. JAX's
``jit(train_step)/transpose(jvp())/dot_general`` or TensorFlow's
``gradient_tape/sequential/dense/MatMul``).

A summary keeps what says whether the program trains, as data for the run facts to
judge: the TensorFlow op types, the first component of each name path (a name scope
such as ``gradient_tape/``) and every component that is a transformation
(``jvp()``, ``transpose(jvp(f))``, ``jit(train_step)``); the count of matmuls and
convolutions (the model's math); and how many distinct op names its instructions have
(one for a single primitive dispatched eagerly, many for a jitted function).
"""

from __future__ import annotations

from . import wire as w

_HLO = {1: ("module", w.SPAN)}
_MODULE = {1: ("name", w.TEXT), 3: ("computations", w.SPAN), 5: ("id", w.INT64)}
_COMPUTATION = {2: ("instructions", w.SPAN)}
_INSTRUCTION = {2: ("opcode", w.TEXT), 7: ("metadata", w.SPAN)}
_METADATA = {1: ("op_type", w.TEXT), 2: ("op_name", w.TEXT)}

#: Opcodes of the model's math.
MATH_OPCODES = frozenset(("dot", "convolution"))
#: Instructions that hold data, not work (their op names are argument names).
_DATA_OPCODES = frozenset(("parameter", "constant", "tuple", "get-tuple-element"))
#: At most this many names are kept per program (``complete`` says whether all were).
MAX_NAMES = 256
_MAX_NAME_CHARS = 200


def summary(buf: bytes, span: tuple[int, int]) -> dict:
    """The summary of the ``HloProto`` at ``span`` (see the module doc): ``module``,
    ``program_id``, ``math``, ``op_names``, ``names`` and ``complete``."""
    hlo = w.message(buf, span, _HLO, name="HloProto")
    mod = w.message(buf, hlo.get("module", (0, 0)), _MODULE, frozenset(("computations",)),
                    "HloModuleProto")
    names: set[str] = set()
    op_names: set[str] = set()
    math = 0
    for comp in mod["computations"]:
        c = w.message(buf, comp, _COMPUTATION, frozenset(("instructions",)),
                      "HloComputationProto")
        for span_i in c["instructions"]:
            ins = w.message(buf, span_i, _INSTRUCTION, name="HloInstructionProto")
            opcode = ins.get("opcode", "")
            math += opcode in MATH_OPCODES
            meta = (w.message(buf, ins["metadata"], _METADATA, name="OpMetadata")
                    if "metadata" in ins else {})
            if opcode not in _DATA_OPCODES and meta.get("op_name"):
                op_names.add(meta["op_name"])
            names.update(_telling(meta))
    kept = sorted(n[:_MAX_NAME_CHARS] for n in names)
    return {"module": mod.get("name", ""), "program_id": mod.get("id"), "math": math,
            "op_names": len(op_names), "names": kept[:MAX_NAMES],
            "complete": len(kept) <= MAX_NAMES}


def _telling(meta: dict) -> list[str]:
    """The parts of one instruction's metadata that can tell training: its op type, the
    first component of its name path (with its slash) and the transformations in it."""
    out = [meta["op_type"]] if meta.get("op_type") else []
    parts = meta.get("op_name", "").split("/")
    if len(parts) > 1:
        out.append(parts[0] + "/")
    out += [p for p in parts if "(" in p]
    return out
