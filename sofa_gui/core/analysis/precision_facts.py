"""Run facts about numeric precision: what the run computes in, and what the CPU does
natively.

``precision``: low (fp16/bf16 kernels, matmul / convolution ops taking 16-bit inputs
under CPU autocast, or a Keras mixed policy's casts where TensorFlow records no dtypes),
int8 (quantized ops: PyTorch's ``quantized::`` ops of a dynamically or statically
quantized model, TensorFlow's ``Quantized*`` kernels, int8 tensor-core kernels), fp64
(matmul / convolution ops taking float64 inputs: a model turned ``.double()`` to match
NumPy's default float64 arrays computes every matmul at half the float32 rate) or tf32,
from op and kernel names and recorded input types.

``cpu_bf16``: native / emulated, whether the profiled CPU has bf16 instructions
(``avx512_bf16``, ``amx_bf16``): with them autocast to bf16 speeds the math up; without
them bf16 is converted to fp32 and back around each op and runs slower than fp32
itself. A profiler's trace does not say the instruction set: the fact comes from a
``sofa-gui record`` recording's manifest (``host.cpu_isa``, read from /proc/cpuinfo)
or from trace metadata ``cpu_flags`` (a /proc/cpuinfo flags line); else it is unknown,
and advice that trades precision on a CPU is given only as a condition (see
:mod:`.findings.fixes`).

Registered with :mod:`.run_facts`, which imports this module before its own probes.
"""

from __future__ import annotations

import re

import numpy as np

from ..metadata import cpu_isa
from ..trace import Kind, Trace
from .facts_base import Fact, named, probe, trace_header


@probe
def _precision(trace: Trace) -> list[Fact]:
    kinds = [Kind.KERNEL]
    low = named(trace, "precision", "low", r"bf16|fp16|f16_|half|hmma|h884|h1688|h16816|"
                 r"bfloat16|_BBS_|_HHS_", "fp16/bf16 kernels", kinds)
    if low.known:
        return [low]
    int8 = named(trace, "precision", "int8", _INT8_OPS, "quantized ops")
    if int8.known:
        return [int8]
    for read in (_typed_inputs, _keras_policy_casts):
        typed = read(trace)
        if typed.known:
            return [typed]
    return [named(trace, "precision", "tf32", r"tf32", "", kinds)]


#: Quantized ops and int8 kernels: the model computes in int8.
_INT8_OPS = r"^quantized::|^(_Mkl)?Quantized[A-Z]\w*|_imma_|int8"
#: Ops whose input types tell the compute precision (what autocast casts), and the types.
_MATH_OP = re.compile(r"^aten::(addmm|mm|bmm|baddbmm|matmul|linear|conv\w*|_convolution|"
                      r"mkldnn_\w*|scaled_dot_product\w*)$")
_LOW_TYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16"}
#: The recorded input type of float64 tensors.
FP64_TYPE = "double"
_TYPE_TEXTS = tuple(t.encode() for t in (*_LOW_TYPES, FP64_TYPE))
#: Op calls whose recorded args are read (spread over the trace): enough to see a mix.
_TYPE_SAMPLE = 300


_SCAN = "run_facts.low_precision_scan"


def start_scans(trace: Trace) -> None:
    """Start the byte scan of the sampled calls' args (:func:`_typed_inputs`) in a
    forked child where the analysis may fork (:mod:`.aside`): with args read on demand it
    reads ~120 pieces of a 1M-event file (~0.2 s), beside the first analysis steps."""
    from .aside import start

    trace.memo(_SCAN, lambda: start(_may_be_typed, (trace,)))


def _type_sample(trace: Trace) -> np.ndarray:
    """The matmul / convolution calls with args whose input types are read, in order."""
    s = trace.slices
    ids = trace.name_ids(_MATH_OP.match)
    idx = np.flatnonzero(np.isin(s.name, ids) & (s.args >= 0)) if len(ids) else ids
    return idx[np.linspace(0, len(idx) - 1, min(len(idx), _TYPE_SAMPLE)).astype(np.int64)]


def _may_be_typed(trace: Trace) -> bool:
    """False when no sampled call's args can name a 16-bit or float64 type (none need
    decoding)."""
    pick = _type_sample(trace)
    return bool(len(pick)) and trace.args.may_hold(trace.slices.args[pick], _TYPE_TEXTS)


def _scanned(trace: Trace) -> bool:
    job = trace.memo(_SCAN, lambda: None)
    try:
        return bool(job.result()) if job is not None else _may_be_typed(trace)
    except (OSError, ValueError):  # a job stopped with an earlier analysis
        return _may_be_typed(trace)


def fp64_inputs(types) -> bool:
    """Whether an op's recorded input types (``Input type``) hold a float64 tensor."""
    return isinstance(types, list) and FP64_TYPE in types


def _typed_inputs(trace: Trace) -> Fact:
    """bf16 / fp16 / fp64 from the recorded input types of matmul / convolution ops (CPU
    autocast and a float64 model leave no kernel names): low when at least a quarter of
    the sampled calls take 16-bit inputs, fp64 when at least half take float64 ones."""
    s = trace.slices
    pick = _type_sample(trace)
    if not len(pick) or not _scanned(trace):
        return Fact("precision")
    seen: dict[str, list[int]] = {}
    for j in pick.tolist():
        types = (trace.args.get(int(s.args[j])) or {}).get("Input type")
        kinds = {_LOW_TYPES[t] for t in types if t in _LOW_TYPES} if isinstance(types, list) \
            else set()
        for t in kinds | ({"fp64"} if fp64_inputs(types) else set()):
            seen.setdefault(t, []).append(j)
    low = {k: v for k, v in seen.items() if k != "fp64"}
    n = sum(len(v) for v in low.values())
    if n >= max(1, len(pick) / 4):
        kind = max(low, key=lambda k: len(low[k]))
        first = min(j for v in low.values() for j in v)
        return Fact("precision", "low", f"{kind} op inputs (autocast)",
                    f"{n} of {len(pick)} sampled matmul/convolution calls take "
                    f"{'c10::BFloat16' if kind == 'bf16' else 'c10::Half'} inputs, e.g. "
                    f"`{trace.name_of(first)}`", first)
    wide = seen.get("fp64", [])
    if len(wide) >= max(1, len(pick) / 2):
        return Fact("precision", "fp64", "float64 op inputs",
                    f"{len(wide)} of {len(pick)} sampled matmul/convolution calls take "
                    f"`{FP64_TYPE}` inputs, e.g. `{trace.name_of(wide[0])}`", wide[0])
    return Fact("precision")


#: A Keras mixed policy casts each float variable to the compute type where a layer reads
#: it (its AutoCastVariable): a ``Cast`` run right after the ``ReadVariableOp`` it casts, on
#: the same executor thread, for a good share of the step's variable reads (over 40% in a
#: mixed_bfloat16 fit).  A float32 step casts labels, metrics and its preprocessing
#: layers' outputs (a lookup's one-hot columns, a normalised feature), values it computed
#: rather than variables it read: at most 9% of its reads are followed by a cast in every
#: TensorFlow corpus capture, however many casts it makes.  Threads the graph executor runs
#: ops on, and the executor's own events between an op and the next.
_CASTS_PER_READ = 0.25
_MIN_CASTS = 20
_TF_OP_THREAD = re.compile(r"^tf_Compute")
_TF_EXECUTOR = re.compile(r"^(ThreadpoolListener|ExecutorState|ExecutorDoneCallback|"
                          r"Memory(Allocation|Deallocation))")


def _variable_casts(trace: Trace, ops: np.ndarray) -> tuple[np.ndarray, int]:
    """The ``Cast`` ops among ``ops`` (one executor thread's) that run right after a
    ``ReadVariableOp`` on that thread, and the number of variable reads."""
    s = trace.slices
    ops = ops[~np.isin(s.name[ops], trace.name_ids(lambda n: bool(_TF_EXECUTOR.match(n))))]
    ops = ops[np.argsort(s.start[ops], kind="stable")]
    cast = np.isin(s.name[ops], trace.name_ids("Cast".__eq__))
    read = np.isin(s.name[ops], trace.name_ids("ReadVariableOp".__eq__))
    return ops[1:][cast[1:] & read[:-1]], int(read.sum())


def _keras_policy_casts(trace: Trace) -> Fact:
    """Low precision from a Keras mixed policy's casts (TensorFlow traces carry no
    dtypes): a cast right after at least one in four ``ReadVariableOp`` on the executor
    threads."""
    s = trace.slices
    threads = np.flatnonzero([bool(_TF_OP_THREAD.match(n)) for n in trace.lanes.name])
    if not len(threads) or not len(s):
        return Fact("precision")
    found = [_variable_casts(trace, np.flatnonzero(s.lane == h)) for h in threads]
    casts = np.sort(np.concatenate([c for c, _ in found]))
    reads = sum(r for _, r in found)
    if len(casts) < _MIN_CASTS or len(casts) < _CASTS_PER_READ * reads or not reads:
        return Fact("precision")
    return Fact("precision", "low", "a Keras mixed policy's casts",
                f"{len(casts)} Cast ops right after the variable reads they cast, of "
                f"{reads} variable reads on the executor threads (a mixed policy casts "
                f"each variable where a layer reads it)",
                int(casts[0]))


#: CPU flags (as /proc/cpuinfo names them) that compute in bf16 natively: AVX512-BF16's
#: dot products, AMX's tiles.
NATIVE_BF16 = ("avx512_bf16", "amx_bf16")


@probe
def _cpu_bf16(trace: Trace) -> list[Fact]:
    """native when the CPU has a bf16 instruction set, emulated when its flags are known
    and name none (see the module doc)."""
    flags, proof = _isa_flags(trace)
    if flags is None:
        return [Fact("cpu_bf16")]
    have = [f for f in NATIVE_BF16 if flags.get(f)]
    if have:
        return [Fact("cpu_bf16", "native", " + ".join(have), proof)]
    if all(flags.get(f) is False for f in NATIVE_BF16):
        wide = "avx512f" if flags.get("avx512f") else "avx2" if flags.get("avx2") else ""
        return [Fact("cpu_bf16", "emulated", f"no {' or '.join(NATIVE_BF16)}"
                     + (f" (has {wide})" if wide else ""), proof)]
    return [Fact("cpu_bf16")]


def _isa_flags(trace: Trace) -> tuple[dict[str, bool] | None, str]:
    """The CPU's flags and where they come from: the recording manifest, else trace
    metadata ``cpu_flags`` (checked again here: a trace cached before may hold any)."""
    rec = trace.meta.extra.get("recording")
    host = (rec.get("host") or {}) if isinstance(rec, dict) else {}
    flags = cpu_isa(host.get("cpu_isa")) if isinstance(host, dict) else None
    if flags is not None:
        model = host.get("cpu_model")
        where = f" ({model})" if isinstance(model, str) and model else ""
        return flags, f"recording manifest host.cpu_isa{where}"
    flags = cpu_isa(trace_header(trace).get("cpu_flags"))
    return flags, "trace metadata cpu_flags" if flags is not None else ""
