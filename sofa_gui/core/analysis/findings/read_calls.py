"""What a host read is in each framework's trace, and what work between two reads ends a
loop of them (:mod:`.read_rules` finds the loops).

* A **read** hands a tensor's values to Python: PyTorch's ``aten::item`` /
  ``aten::_local_scalar_dense`` (``.item()``, ``float(t)``), ``aten::is_nonzero``
  (``bool(t)``, ``if t:``, a Python comparison of one element: ``str(tensor)`` records one
  for each value its formatter tests), ``aten::tolist`` and the ``aten::resolve_neg`` that
  ``.tolist()`` / ``.numpy()`` record outside any other op; the Python conversions as
  the Python tracers name them: JAX's and TensorFlow's (``$array.py:298 __float__``) and
  PyTorch's (``<built-in method item of Tensor object at 0x...>``, a tensor's text
  formatting ``torch/_tensor.py(NNN): __format__``, which holds the whole formatting).
* An **element pick** of TensorFlow's eager mode stands for a read: ``x[k]`` and iterating
  an ``EagerTensor`` run one ``StridedSlice`` from Python per element, and TensorFlow records
  no event for the ``.numpy()`` / ``float()`` / ``int()`` that then reads the element.
* **Work** between two reads ends a loop of them: the model's math (a matmul or a
  convolution between two reads means the loop runs the model and reads once per pass: a
  decode loop, per-call work, not a read loop), and, when it does not recur between most
  pairs of reads, a call of real size (the median of its name's own time, outside the
  calls nested in it, over :data:`TINY_NS`) or of the step's structure (a region marker,
  the backward pass, the optimizer, the input pipeline, a collective).  Tiny calls that
  do not recur (the statistics ``str(tensor)`` computes before printing a tensor's values,
  the slicing that picks the next tensor to read) are the reading's own work.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from .. import roles as R
from .causes import self_times
from .context import Ctx
from .work import TINY_NS, name_medians, optimizer_steps, outermost, starts_inside

#: PyTorch ops that hand values to Python (``resolve_neg`` outside any op: ``.tolist()``
#: and ``.numpy()`` record it and nothing else).
TORCH_READ = re.compile(r"^aten::(item|_local_scalar_dense|is_nonzero|tolist|resolve_neg)$")
#: Python-level conversions of a JAX / TensorFlow / PyTorch array to host values, as the
#: JAX / TensorFlow Python tracer names their frames (``$array.py:298 __float__``): the
#: method names, in the frameworks' array / tensor / ops modules (``device_get`` in JAX's
#: ``api.py``); and as PyTorch's names them: a Tensor's built-in conversion methods and
#: the Python of its text formatting (``__repr__`` / ``__format__`` / ``_str``).
PY_READ = re.compile(
    r"^\$(\S*/)?(array|array_methods|ops|tensor|_tensor|api)\.py:\d+ "
    r"(__float__|__int__|__bool__|__index__|__complex__|__array__|item|tolist|numpy|_numpy|"
    r"device_get)$"
    r"|^<built-in method (item|tolist|numpy|__float__|__int__|__bool__|__index__) "
    r"of Tensor object\b"
    r"|^(\S*/)?torch/(_tensor\.py\(\d+\): (__repr__|__format__|__str__)|"
    r"_tensor_str\.py\(\d+\): _str)$")
#: TensorFlow eager element picks (one element per call, from Python).
TF_PICK = re.compile(r"^EagerLocalExecute: (StridedSlice|Slice|GatherV2)$")
#: The model's math: a read loop never has it between two reads.  A ``tf.function``
#: called from Python (``__inference_*``) runs its ops on the runtime's threads: the call
#: is the model's work as the main thread sees it.
MODEL_MATH = re.compile(
    r"^aten::(linear|matmul|mm|addmm|bmm|baddbmm|addbmm|einsum|_convolution|convolution\w*|"
    r"mkldnn_convolution|_slow_conv\w*|conv\w*|lstm\w*|gru\w*|rnn_\w*|"
    r"_scaled_dot_product\w*)$"
    r"|^(EagerLocalExecute: )?(MatMul|BatchMatMul\w*|Conv\dD\w*|Einsum|_Mkl\w*(MatMul|Conv)\w*|"
    r"_Fused(MatMul|Conv\w*)|__inference_\w+)$")
#: Host roles that mark the step's structure, whatever their size.
_STRUCTURE = (R.OPTIMIZER, R.BACKWARD, R.DATA_LOADING, R.COMMUNICATION)


def read_calls(ctx: Ctx, host, mine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the main thread's read calls, outermost among reads, by start; per read, whether it
    is a TensorFlow element pick that stands for an unrecorded read).  Reads inside the
    optimizer's step or the input pipeline are left out."""
    s = ctx.trace.slices
    trace = ctx.trace
    torch_ids = trace.name_ids(lambda n: bool(TORCH_READ.match(n)))
    neg = np.array([trace.names[int(i)] == "aten::resolve_neg" for i in torch_ids], bool)
    py_ids = trace.name_ids(lambda n: bool(PY_READ.match(n)))
    pick_ids = trace.name_ids(lambda n: bool(TF_PICK.match(n)))
    ops = mine[s.kind[mine] == int(Kind.CPU_OP)]
    top = outermost(s.start, s.end, ops)  # resolve_neg counts only outside every op
    cand = np.concatenate([top[np.isin(s.name[top], torch_ids)],
                           ops[np.isin(s.name[ops], torch_ids[~neg])],
                           ops[np.isin(s.name[ops], pick_ids)],
                           mine[(s.kind[mine] == int(Kind.PYTHON))
                                & np.isin(s.name[mine], py_ids)]])
    reads = outermost(s.start, s.end, np.unique(cand))
    skip = np.concatenate([optimizer_steps(ctx, host.lane),
                           host.role_slices.get("data_loading", mine[:0])])
    reads = reads[~starts_inside(ctx, skip, reads)]
    return reads, np.isin(s.name[reads], pick_ids)


def work_between(ctx: Ctx, mine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per slice of ``mine`` (the main thread's): (the model's math, work of real size or
    of the step's structure).  See the module docstring."""
    s = ctx.trace.slices
    trace = ctx.trace
    math = np.isin(s.name[mine], trace.name_ids(lambda n: bool(MODEL_MATH.match(n))))
    sized = name_medians(s.name[mine], self_times(ctx, mine)) > TINY_NS
    structure = (np.isin(R.host_roles(trace, mine), _STRUCTURE)
                 | (s.kind[mine] == int(Kind.ANNOTATION)))
    return math, math | sized | structure
