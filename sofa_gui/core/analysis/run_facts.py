"""Run facts: what the profiled program *is*, each proved by an event or a file field.

The advisor picks fixes by these facts (a CPU-only run gets no CUDA fix, a run whose
DataLoader already has workers is not told to add them).  A fact the trace does not
prove stays ``None`` ("unknown"): nothing here is guessed from what is typical.

Facts (``RunFacts.facts`` keys):

===========  ===============================================  ========================
key          values                                           proved by
===========  ===============================================  ========================
framework    pytorch / tensorflow / jax / python (none of them)  op names, XLA modules
device       cuda / rocm / cpu / tpu / mixed (+ device names)  device properties,
                                                              runtime calls, lanes
mode         training / inference                             backward/optimizer ops,
                                                              TF gradient ops, XLA
                                                              grad / update names; the
                                                              HLO of the XLA programs
                                                              run (:mod:`.xla_mode`), a
                                                              TF variable decremented
ranks        world size (``detail``: this trace's ranks)       distributed info
cpu_cores    logical cores of the profiled machine            recording manifest, SOFA
                                                              misc.txt, trace metadata
                                                              ``cpu_cores``
cpu_other    cores other processes kept busy (mean)               trace metadata
                                                              ``cpu_busy_other_cores``,
                                                              recording counters
cpu_interf   how much slower one core computes while another      trace metadata
             core is busy (a calibration, ``recorder.calibrate``) ``cpu_core_interference``,
                                                              recording manifest
                                                              (``--calibrate-cores``)
cpu_handover what a loader worker's batch costs the main thread   trace metadata
             (µs for one tensor; detail: per extra tensor, per    ``cpu_batch_handover_*``
             MB; a calibration, ``recorder.calibrate``)
dataloader   single_process / workers                         the iterator class
host_copies  pageable / pinned / mixed                        memcpy names
precision    low (fp16/bf16 kernels or op inputs) / int8 /     kernel names, op input
             fp64 (float64 op inputs) / tf32                  types (CPU autocast,
                                                              float64 models), a Keras
                                                              mixed policy's casts
cpu_bf16     native / emulated: the CPU's bf16 instructions   recording manifest
             (avx512_bf16, amx_bf16)                          host.cpu_isa, trace
                                                              metadata ``cpu_flags``
compiled     torch.compile / cuda_graphs / xla / torch.jit      compiled regions, graph
                                                              launches, a TorchScript
                                                              method's call record
optimizer    fused / foreach / for_loop                       optimizer kernels/ops
grad_mode    recorded / off: autograd records the model's ops  ``Sequence number`` of
                                                              the model's ops
collectives  nccl / rccl / gloo                               collective kernels
===========  ===============================================  ========================

``anomaly_detection``: on where autograd's anomaly detection runs (every forward op
stores its Python stack, every backward output is checked for NaN), proved by the NaN
checks inside the backward's node evaluations (:mod:`.grad_facts`).

tf.data facts (from :mod:`.tfdata`'s stage tree): ``tf_data`` python / tf_ops (what makes
the elements: ``Iterator::Generator`` or ``PyFunc`` ops, else dataset ops);
``tf_data_parallel`` parallel / serial / python (a Python source is not parallelised by
``num_parallel_calls``; serial also where the bottleneck stage is a serial ``map`` or
``interleave`` beside parallel ones, :attr:`.InputPipeline.serial_map`);
``tf_data_prefetch`` prefetch / none; ``tf_data_cache`` cache / none.  ``cpu_cores``
also comes from tf.data's CPU budget (``Iterator::Root``).

More probes (e.g. TensorFlow's ``tf.data``) plug in with :func:`probe`: a function
``(trace) -> list[Fact]`` decorated with ``@probe``; the precision probes live in
:mod:`.precision_facts`, the grad-mode and anomaly-detection ones in :mod:`.grad_facts`.
"""

from __future__ import annotations

import re

import numpy as np

from ..metadata import amount, count
from ..trace import Kind, LaneKind, Trace
from . import grad_facts, precision_facts  # noqa: F401  (register their probes first)
from .facts_base import FACT_KEYS, PROBES, Fact, RunFacts, first_named, named, probe, trace_header
from .xla_mode import inference_programs, op_by_op, ran_programs, training_program

__all__ = ["FACT_KEYS", "TRAINING_NAMES", "Fact", "RunFacts", "handover_parts", "probe",
           "run_facts"]


def run_facts(trace: Trace) -> RunFacts:
    """Every fact the probes can prove; the first probe to prove a key wins."""
    return trace.memo("run_facts", lambda: _prove(trace))


def _prove(trace: Trace) -> RunFacts:
    out = RunFacts()
    for fn in PROBES:
        for f in fn(trace):
            if f.known and not out.get(f.key).known:
                out.facts[f.key] = f
    return out


def _framework_ops(trace: Trace) -> int:
    s = trace.slices
    return int(np.count_nonzero(s.kind == int(Kind.CPU_OP)))


# -- probes --------------------------------------------------------------------------------
_JAX = r"^PjitFunction\(|^jit_|pjit|^\$jax|jaxlib"
_TF = r"__inference_|IteratorGetNext|^tf\.|TensorFlow|^Iterator::|^TFE_Py_|^EagerLocalExecute"
_TORCH = r"^aten::|^ProfilerStep#|^autograd::|^Optimizer\.step"


@probe
def _framework(trace: Trace) -> list[Fact]:
    for value, pattern in (("jax", _JAX), ("tensorflow", _TF), ("pytorch", _TORCH)):
        f = named(trace, "framework", value, pattern)
        if f.known:
            break
    else:
        f = _plain_python(trace)
    h = trace_header(trace)
    version = h.get("pytorch_version") or h.get("torch_version")
    if f.known and f.value == "pytorch" and version:
        f.detail = f"torch {version}"
    return [f]


#: Python frames of a framework's own code (sampled stacks name the module's path).
_FRAMEWORK_CODE = r"torch|tensorflow|keras|jax|flax|optax|lightning"


def _plain_python(trace: Trace) -> Fact:
    """``python`` for a program with Python frames and no framework op, device work or
    framework name at all (a plain Python loop under ``sofa-gui record``): no
    framework's fix applies to it."""
    s = trace.slices
    device = np.isin(s.kind, [int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET),
                              int(Kind.RUNTIME)]).any()
    frames = int(np.count_nonzero(s.kind == int(Kind.PYTHON)))
    if _framework_ops(trace) or device or not frames or first_named(trace, _FRAMEWORK_CODE) >= 0:
        return Fact("framework")
    return Fact("framework", "python", "no PyTorch, TensorFlow or JAX",
                f"{frames:,} Python frames and no framework op or device event")


_ROCM = re.compile(r"AMD|Radeon|Instinct|MI\d{3}|gfx", re.I)


@probe
def _device(trace: Trace) -> list[Fact]:
    devs = trace.meta.devices
    names = sorted({str(p.get("name", "")) for p in devs.values() if isinstance(p, dict)} - {""})
    if names:
        kinds = {"rocm" if _ROCM.search(n) else "cuda" for n in names}
        value = kinds.pop() if len(kinds) == 1 else "mixed"
        return [Fact("device", value, ", ".join(names), "deviceProperties in the trace")]
    for value, pattern in (("rocm", r"^hip[A-Z]|^hsa_|rocclr"), ("cuda", r"^cuda[A-Z]|^cu[A-Z]"),
                           ("tpu", r"^TPU|/device:TPU")):
        f = named(trace, "device", value, pattern)
        if f.known:
            return [f]
    lanes = trace.lanes
    if np.any(lanes.kind == int(LaneKind.GPU)):
        return [Fact("device")]  # a device whose vendor the trace does not say
    s = trace.slices
    device_work = np.isin(s.kind, [int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET)])
    gpu_counter = any("gpu" in n.lower() or "sm " in n.lower() for n in trace.counters.table.name)
    if _framework_ops(trace) and not device_work.any() and not gpu_counter:
        return [Fact("device", "cpu", "", f"no device lane or kernel among "
                     f"{len(s):,} events, {_framework_ops(trace):,} of them framework ops")]
    return [Fact("device")]


#: TensorFlow's prefix of an op's type: an eagerly dispatched op is recorded as
#: ``EagerLocalExecute: <type>``, a graph function's kernel by its type, oneDNN's own
#: kernels as ``_Mkl[Native]<type>``.
_TF_OP = r"^(?:EagerLocalExecute: )?(?:_Mkl(?:Native)?)?"

#: Names only training makes: autograd and optimizer ops (PyTorch), gradient ops and
#: weight updates (TensorFlow, graph or eager: ``gradient_tape/...``, ``*Grad``,
#: ``BroadcastGradientArgs``, ``ResourceApply*``), differentiation and update names in XLA
#: modules and ops (JAX: ``transpose(jvp(...))``, ``value_and_grad``, optax updates, a
#: compiled step named for its optimizer's update: ``PjitFunction(adam_update)``,
#: ``sgd_step``).
TRAINING_NAMES = (r"Backward0$|^autograd::engine|^Optimizer\.step|^Optimizer\.zero_grad|"
             r"^optimizer|^_foreach_add|transpose_jvp|^gradients/|gradient_tape/|"
             r"Backprop(Filter|Input)(V\d)?$|" + _TF_OP + r"Resource(Sparse)?Apply|" + _TF_OP +
             r"(Relu6?|BiasAdd|Sigmoid|Tanh|Softmax|Softplus|Softsign|MaxPool|AvgPool|"
             r"FusedBatchNorm\w*|Elu|Selu|LeakyRelu)Grad(V\d)?$|" + _TF_OP +
             r"BroadcastGradientArgs$|"
             r"transpose\(jvp|\bjvp\(|value_and_grad|\bgrad\(|optax|apply_updates|"
             r"train_step|update_step|train_function|"
             r"(?i:(?<![a-z])(sgd|adamw?|adagrad|rmsprop|lion)_?(update|step)(?![a-z]))")

#: TensorFlow ops that write a variable: every optimizer's update is one of them (Keras 3
#: writes weights and slots with ``Assign{Add,Sub}VariableOp``, TF's own optimizers with
#: ``ResourceApply*``), so a run with none has trained no weight.
_TF_WRITES = _TF_OP + r"(Assign(Add|Sub)?VariableOp$|Resource(Sparse)?Apply|ResourceScatter)"
#: A TensorFlow variable decremented: an optimizer's update of a weight (Keras 3 applies
#: every optimizer's step with ``variable.assign_sub``, as a hand-written SGD step does),
#: where no op is named for the gradient (an embedding's gradient is an
#: ``UnsortedSegmentSum``, a matmul's a ``MatMul``) and the step's function is not named
#: for training (Keras 3 runs ``fit``, ``evaluate`` and ``predict`` each as a
#: ``multi_step_on_iterator``).  Inference writes no variable, and metrics only add.
_TF_DECREMENT = _TF_OP + r"AssignSubVariableOp$"
#: TensorFlow writes of an optimizer's update besides a decrement (TF's own optimizers'
#: fused updates, sparse ones): with none of them and no decrement, the variables written
#: are only set and added to, as Keras metrics keep their totals and counts (an
#: ``evaluate``), not trained.
_TF_UPDATES = _TF_OP + r"(Resource(Sparse)?Apply|ResourceScatter)"
#: A variable set and one added to inside compiled functions, or both eagerly: an
#: optimizer's slots set and its weights added to (Keras 3's SGD with momentum, which
#: neither decrements nor applies).  Metrics do not write both ways in one place: Keras
#: 3's set their totals inside the step, Keras 2's add to them, each resetting them
#: eagerly between calls.
_TF_SET_ADD = [(r"^(?:_Mkl(?:Native)?)?Assign", r"VariableOp$"),
               (r"^EagerLocalExecute: (?:_Mkl(?:Native)?)?Assign", r"VariableOp$")]


@probe
def _mode(trace: Trace) -> list[Fact]:
    f = named(trace, "mode", "training", TRAINING_NAMES)
    if f.known:
        return [f]
    rx = re.compile(TRAINING_NAMES)
    f = training_program(trace, rx)  # the HLO of a program that ran
    if f is not None:
        return [f]
    f = named(trace, "mode", "training", _TF_DECREMENT, "a variable decremented")
    if f.known:
        return [f]
    ops = _framework_ops(trace)
    fw = _framework(trace)[0].value
    if fw == "pytorch" and ops >= 50:  # autograd's and the optimizer's ops always show
        return [Fact("mode", "inference", "",
                     f"no backward, gradient or optimizer op among {ops:,} framework ops")]
    if fw == "tensorflow" and _compiled(trace)[0].value != "xla" and ops >= 50:
        return [_tf_absence(trace, ops)]
    return [inference_programs(trace, rx) or Fact("mode")]


def _tf_absence(trace: Trace, ops: int) -> Fact:
    """Inference for TensorFlow outside XLA where no op wrote a variable: a gradient's ops
    need not be named for it (a matmul's gradient is a ``MatMul``), but training cannot
    leave the weights unwritten. Writes that only set and add to variables (an
    evaluation's metrics) with no gradient op are inference too: an optimizer's update
    decrements (Keras 3, caught before), applies or scatters, or sets some variables
    and adds to others in one place (:data:`_TF_SET_ADD`): unknown then."""
    if first_named(trace, _TF_WRITES) < 0:
        return Fact("mode", "inference", "no gradient op and no variable written",
                    f"among {ops:,} framework ops, none is a gradient op and none writes a "
                    f"variable (an optimizer's update is such an op)")
    if first_named(trace, _TF_UPDATES) >= 0 or any(
            first_named(trace, a + b) >= 0 and first_named(trace, a + "Add" + b) >= 0
            for a, b in _TF_SET_ADD):
        return Fact("mode")
    return Fact("mode", "inference", "no gradient op, variables only set or added to",
                f"among {ops:,} framework ops, none is a gradient op and the variables "
                f"written are set or added to as metrics keep their state, not both in one "
                f"place (an optimizer's update applies, scatters, decrements, or sets its "
                f"slots and adds to its weights)")


@probe
def _ranks(trace: Trace) -> list[Fact]:
    world = trace.meta.world_size
    dist = trace.meta.extra.get("distributed")
    if world is None and isinstance(dist, dict):
        world = dist.get("world_size")
    if world is None:
        return [Fact("ranks")]
    mine = ", ".join(map(str, trace.meta.ranks)) if trace.meta.ranks else ""
    return [Fact("ranks", int(world), f"this trace: rank {mine}" if mine else "",
                 "distributedInfo")]


@probe
def _cpu_cores(trace: Trace) -> list[Fact]:
    # checked again here (the importers check at load): a trace cached before may hold any
    extra = trace.meta.extra
    rec = extra.get("recording")
    if isinstance(rec, dict):
        n = count((rec.get("host") or {}).get("logical_cores"))
        if n:
            return [Fact("cpu_cores", n, "", "recording manifest host.logical_cores")]
    misc = extra.get("sofa_misc")
    if isinstance(misc, dict) and count(misc.get("vcores")):
        return [Fact("cpu_cores", count(misc["vcores"]), f"{misc.get('cores')} physical",
                     "SOFA misc.txt vcores")]
    n = count(trace_header(trace).get("cpu_cores"))
    if n:
        return [Fact("cpu_cores", n, "", "trace metadata cpu_cores")]
    return [Fact("cpu_cores")]


@probe
def _cpu_other(trace: Trace) -> list[Fact]:
    """Cores held by other processes: what a loader worker cannot use."""
    n = amount(trace_header(trace).get("cpu_busy_other_cores"))
    if n is not None:
        return [Fact("cpu_other", round(float(n), 2), "cores",
                     "trace metadata cpu_busy_other_cores")]
    from .counter_signals import host_signals
    sig = host_signals(trace, np.array([trace.start_ns]), np.array([trace.end_ns]))
    if sig is None or np.isnan(sig.proc).all():
        return [Fact("cpu_other")]
    ok = ~np.isnan(sig.proc) & ~np.isnan(sig.busy)
    w = sig.weight[ok].astype(np.float64)
    if not w.sum():
        return [Fact("cpu_other")]
    other = (sig.busy[ok] * sig.n_cores - sig.proc[ok]) / 100.0
    value = round(max(float((other * w).sum() / w.sum()), 0.0), 2)
    return [Fact("cpu_other", value, "cores", "recording counters (all cores busy minus "
                 f"{sig.proc_name})")]


@probe
def _cpu_interference(trace: Trace) -> list[Fact]:
    """Compute on one core this many times slower while another core is busy: measured
    on the machine by a calibration stored with the trace (work moved to a "free" core
    slows the step left on the first one)."""
    h = trace_header(trace)
    v, how = h.get("cpu_core_interference"), h.get("cpu_core_interference_how")
    proof = "trace metadata cpu_core_interference"
    rec = trace.meta.extra.get("recording")
    calib = ((rec.get("host") or {}).get("core_interference")
             if isinstance(rec, dict) else None)
    if v is None and isinstance(calib, dict):  # sofa-gui record --calibrate-cores
        v, proof = calib.get("factor"), "recording manifest host.core_interference"
        how = (f"calibration: {calib.get('kernel')}, {calib.get('alone_ms')} ms alone, "
               f"{calib.get('together_ms')} ms with another core busy")
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.5 <= v <= 10:
        return [Fact("cpu_interf")]
    return [Fact("cpu_interf", round(float(v), 2), "x, compute with another core busy",
                 proof + (f" ({how})" if isinstance(how, str) and how else ""))]


#: Trace metadata keys of the hand-over calibration (scalars only): the main thread's µs
#: receiving a batch (per batch, tensor, MB; how); the worker's CPU µs sending it.
HANDOVER_KEYS = ("cpu_batch_handover_us", "cpu_batch_handover_tensor_us",
                 "cpu_batch_handover_mb_us", "cpu_batch_handover_how")
SEND_KEYS = ("cpu_batch_send_us", "cpu_batch_send_tensor_us", "cpu_batch_send_mb_us")


def _calibration(trace: Trace) -> dict:
    """A recording's manifest ``host.batch_handover`` (``record --calibrate-cores``)."""
    rec = trace.meta.extra.get("recording")
    calib = (rec.get("host") or {}).get("batch_handover") if isinstance(rec, dict) else None
    return calib if isinstance(calib, dict) else {}


def _plausible(parts: list) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1e6
               for x in parts) and parts[0] + parts[1] > 0


def handover_parts(trace: Trace) -> tuple[float, float, float, str, str] | None:
    """(µs per batch, per tensor, per MB, how, where) the main thread spends receiving a
    batch from a loader worker on the profiled machine (trace metadata
    ``cpu_batch_handover_*`` written by a calibration, or a recording's manifest
    ``host.batch_handover`` from ``record --calibrate-cores``); None when absent or not a
    set of plausible numbers."""
    h = trace_header(trace)
    parts, how = [h.get(k) for k in HANDOVER_KEYS[:3]], h.get(HANDOVER_KEYS[3])
    where, calib = "trace metadata cpu_batch_handover_us", _calibration(trace)
    if all(x is None for x in parts) and calib:
        parts = [calib.get(k) for k in ("per_batch_us", "per_tensor_us", "per_mb_us")]
        how, where = calib.get("how"), "recording manifest host.batch_handover"
    if not _plausible(parts):
        return None
    return (float(parts[0]), float(parts[1]), float(parts[2]),
            how if isinstance(how, str) else "", where)


def send_parts(trace: Trace) -> tuple[float, float, float] | None:
    """(µs per batch, per tensor, per MB) of CPU a loader worker spends on a batch beyond
    making it (trace metadata ``cpu_batch_send_*``, or the manifest's
    ``host.batch_handover`` ``send_per_*``); None when not measured (calibrations that
    timed the main thread's side only)."""
    parts, calib = [trace_header(trace).get(k) for k in SEND_KEYS], _calibration(trace)
    if all(x is None for x in parts):
        parts = [calib.get(f"send_{k}") for k in ("per_batch_us", "per_tensor_us", "per_mb_us")]
    return tuple(float(x) for x in parts) if _plausible(parts) else None


@probe
def _cpu_handover(trace: Trace) -> list[Fact]:
    """The main thread's cost of receiving one batch from a loader worker, measured on the
    machine: moving loading to workers does not remove it."""
    h = handover_parts(trace)
    if h is None:
        return [Fact("cpu_handover")]
    batch, tensor, mb, how, where = h
    return [Fact("cpu_handover", round(batch + tensor), f"µs per batch of one tensor, "
                 f"+{tensor:.0f} µs per extra tensor, +{mb:.0f} µs per MB",
                 where + (f" ({how})" if how else ""))]


@probe
def _dataloader(trace: Trace) -> list[Fact]:
    one = named(trace, "dataloader", "single_process", r"_SingleProcessDataLoaderIter",
                 "num_workers is 0")
    many = named(trace, "dataloader", "workers", r"_MultiProcessingDataLoaderIter",
                  "num_workers > 0")
    return [one if one.known else many]


@probe
def _host_copies(trace: Trace) -> list[Fact]:
    pageable = named(trace, "host_copies", "pageable", r"Pageable", "", [Kind.MEMCPY])
    pinned = named(trace, "host_copies", "pinned", r"Pinned", "", [Kind.MEMCPY])
    if pageable.known and pinned.known:
        pageable.value, pageable.detail = "mixed", f"also pinned: {pinned.proof}"
    return [pageable if pageable.known else pinned]


@probe
def _compiled(trace: Trace) -> list[Fact]:
    for value, pattern in (("torch.compile", r"Torch-Compiled Region|CompiledFunction|"
                                             r"^triton_|TorchDynamo"),
                           ("cuda_graphs", r"^cudaGraphLaunch|^hipGraphLaunch"),
                           ("xla", r"XLA GPU module|XlaModule|^PjitFunction\(|^jit_|"
                                   r"__inference_.*_jit|XlaLaunch|^_XlaRun|^XlaCompile|"
                                   r"^CpuExecutable::|^GpuExecutable::|XlaMustCompile")):
        f = named(trace, "compiled", value, pattern)
        if f.known and value == "xla" and op_by_op(trace):
            return [Fact("compiled", "op by op", "each primitive its own XLA program",
                         f"{len(ran_programs(trace))} small XLA programs ran, none a compiled "
                         f"function of several ops; first: {f.proof}", f.slice)]
        if f.known:
            return [f]
    return [_torchscript(trace)]


#: A TorchScript method's record: a lower-case method name (``forward``, ``predict``), not
#: an ``aten::`` op, an autograd node or c10d's ``record_param_comms`` (whose first inputs
#: are untyped too), whose first input is the script module itself.
_SCRIPT_METHOD = re.compile(r"^(?!record_param_comms$)[a-z_][a-z0-9_]*$")  # not c10d's record
#: Candidate calls read before the fact is left unknown.
_SCRIPT_LOOKS = 64


def _torchscript(trace: Trace) -> Fact:
    """``compiled`` = torch.jit where a scripted or traced module was called: the
    interpreter records each method call as an op whose first recorded input is the module
    object, an input with no tensor type (``Input type`` ``""``) and no shape."""
    s = trace.slices
    names = [i for i, n in enumerate(trace.names) if _SCRIPT_METHOD.match(n)]
    if not names:
        return Fact("compiled")
    calls = np.flatnonzero(np.isin(s.name, names) & (s.kind == int(Kind.CPU_OP)))
    for j in calls[:_SCRIPT_LOOKS]:  # a module's calls all look alike: the first few tell
        k = int(s.args[j])
        args = trace.args.get(k) if k >= 0 else None
        types = args.get("Input type") if isinstance(args, dict) else None
        dims = args.get("Input Dims") if isinstance(args, dict) else None
        if (isinstance(types, list) and isinstance(dims, list) and len(types) >= 2
                and types[0] == "" and len(dims) >= 1 and dims[0] == []):
            return Fact("compiled", "torch.jit", "a TorchScript module's method called",
                        f"`{trace.name_of(int(j))}`", int(j))
    return Fact("compiled")


def _slices_named(trace: Trace, pattern: str) -> np.ndarray:
    rx = re.compile(pattern)
    hit = np.zeros(len(trace.names), bool)
    hit[[i for i, n in enumerate(trace.names) if rx.search(n)]] = True
    return np.flatnonzero(hit[trace.slices.name])


def _first_inside(trace: Trace, pattern: str, spans: np.ndarray) -> int:
    """First slice matching ``pattern`` nested in one of ``spans`` (same lane), -1 if none."""
    s, ends = trace.slices, trace.slices.end
    ids = _slices_named(trace, pattern)
    inside = np.zeros(len(ids), bool)
    for j in spans:
        inside |= ((s.lane[ids] == s.lane[j]) & (s.start[ids] >= s.start[j])
                   & (ends[ids] <= ends[j]))
    ids = ids[inside]
    return int(ids[np.argmin(s.start[ids])]) if len(ids) else -1


#: Foreach ops that update weights by hand (a step without ``Optimizer.step`` spans):
#: not ``clip_grad_norm_``'s own (the norms, then the gradients scaled by the clip
#: coefficient) nor ``zero_grad(set_to_none=False)``'s ``_foreach_zero_``.
_UPDATE_FOREACH = r"^aten::_foreach_(add|sub|addcmul|addcdiv|lerp)_$|^multi_tensor_apply"


@probe
def _optimizer(trace: Trace) -> list[Fact]:
    """The optimizer's implementation, read from the ops inside its ``Optimizer.step`` spans
    where the trace has them: other foreach ops of the step (``clip_grad_norm_``'s
    ``_foreach_norm``) are not the optimizer's."""
    spans = _slices_named(trace, r"^Optimizer\.step")
    for value, pattern in (("fused", r"_fused_adam|fused_adamw|FusedAdam|_fused_sgd"),
                           ("foreach", r"^aten::_foreach_|multi_tensor_apply")):
        if not len(spans):  # no torch.optim step: an update by hand, not clipping's ops
            f = named(trace, "optimizer", value,
                      _UPDATE_FOREACH if value == "foreach" else pattern)
        elif (j := _first_inside(trace, pattern, spans)) >= 0:
            f = Fact("optimizer", value, "", f"`{trace.name_of(j)}`", j)
        else:
            continue
        if f.known:
            return [f]
    step = named(trace, "optimizer", "for_loop", r"^Optimizer\.step")
    if step.known:
        step.detail = "no foreach or fused op inside the optimizer's step"
    return [step]


@probe
def _collectives(trace: Trace) -> list[Fact]:
    for value, pattern in (("rccl", r"rccl"), ("nccl", r"nccl"), ("gloo", r"gloo")):
        f = named(trace, "collectives", value, pattern)
        if f.known:
            return [f]
    dist = trace.meta.extra.get("distributed")
    if isinstance(dist, dict) and dist.get("backend"):
        return [Fact("collectives", str(dist["backend"]), "", "distributedInfo.backend")]
    return [Fact("collectives")]


@probe
def _tf_data(trace: Trace) -> list[Fact]:
    """The tf.data pipeline's shape (:mod:`.tfdata`), and its CPU budget as the core count."""
    from .host_side import cpu_lanes_of_rank, main_thread
    from .tfdata import analyze_input_pipeline, iterator_slices

    if not len(iterator_slices(trace)):
        return []
    ranks = sorted({int(r) for r in trace.lanes.rank})
    cpu = cpu_lanes_of_rank(trace, ranks[0])
    p = analyze_input_pipeline(trace, main_lane=main_thread(trace, cpu) if len(cpu) else None)
    if p is None:
        return []
    stage = {st.kind: st for st in p.ordered()}
    out = []
    gen = next((st for st in p.stages.values() if st.python), None)
    if p.python:
        proof = (_stage_proof(gen) if gen is not None
                 else "`PyFunc` ops on tf.data threads")
        out.append(Fact("tf_data", "python", p.python, proof, gen.first if gen else -1))
    else:
        out.append(Fact("tf_data", "tf_ops", p.state(), "`Iterator::` stages, no PyFunc op"))
    par = next((st for st in p.ordered() if st.parallel), None)
    slow = p.serial_map
    if par is not None and slow is not None:
        out.append(Fact("tf_data_parallel", "serial", f"its slowest stage {slow.label} runs "
                        f"serially beside the parallel {par.label}", _stage_proof(slow),
                        slow.first))
    elif par is not None:
        out.append(Fact("tf_data_parallel", "parallel", par.label, _stage_proof(par),
                        par.first))
    elif gen is not None:
        out.append(Fact("tf_data_parallel", "python", "elements come from a Python generator",
                        _stage_proof(gen), gen.first))
    else:
        out.append(Fact("tf_data_parallel", "serial", "no stage runs in parallel",
                        "stage parallelism stats"))
    pre = stage.get("Prefetch")
    out.append(Fact("tf_data_prefetch", "prefetch", "inserted by tf.data" if
                    p.injected_prefetch else "", _stage_proof(pre), pre.first)
               if pre is not None else Fact("tf_data_prefetch", "none", "", "no prefetch stage"))
    cache = next((st for st in p.ordered() if "Cache" in st.kind), None)
    out.append(Fact("tf_data_cache", "cache", "", _stage_proof(cache), cache.first)
               if cache is not None else Fact("tf_data_cache", "none", "", "no cache stage"))
    if p.cpu_budget:
        out.append(Fact("cpu_cores", p.cpu_budget, "tf.data's CPU budget",
                        "`Iterator::Root` stat cpu_budget"))
    return out


def _stage_proof(st) -> str:
    return f"`Iterator::{st.kind}` ({st.dataset})"
