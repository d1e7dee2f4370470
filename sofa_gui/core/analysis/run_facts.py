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
                                                              grad / update names
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
precision    low (fp16/bf16 kernels or op inputs) / tf32      kernel names, op input
                                                              types (CPU autocast)
compiled     torch.compile / cuda_graphs / xla                compiled regions, graph
                                                              launches
optimizer    fused / foreach / for_loop                       optimizer kernels/ops
collectives  nccl / rccl / gloo                               collective kernels
===========  ===============================================  ========================

tf.data facts (from :mod:`.tfdata`'s stage tree): ``tf_data`` python / tf_ops (what makes
the elements: ``Iterator::Generator`` or ``PyFunc`` ops, else dataset ops);
``tf_data_parallel`` parallel / serial / python (a Python source is not parallelised by
``num_parallel_calls``); ``tf_data_prefetch`` prefetch / none; ``tf_data_cache`` cache /
none.  ``cpu_cores`` also comes from tf.data's CPU budget (``Iterator::Root``).

More probes (e.g. TensorFlow's ``tf.data``) plug in with :func:`probe`: a function
``(trace) -> list[Fact]`` decorated with ``@probe``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..metadata import amount, count
from ..trace import Kind, LaneKind, Trace
from .codec import register
from .results import us


@dataclass
class Fact:
    """One fact about the run: its value (None = unknown), a few words of detail, and
    what proves it (an event name or a file field; ``slice`` >= 0 is clickable)."""

    key: str
    value: object = None
    detail: str = ""
    proof: str = ""
    slice: int = -1

    @property
    def known(self) -> bool:
        return self.value is not None

    def to_dict(self, trace: Trace | None = None) -> dict:
        out = {"value": self.value, "detail": self.detail, "proof": self.proof}
        if trace is not None and self.slice >= 0:
            s = trace.slices
            out["event"] = {"name": trace.name_of(self.slice),
                            "start_us": us(int(s.start[self.slice])),
                            "end_us": us(int(s.start[self.slice] + s.dur[self.slice])),
                            "lane": int(s.lane[self.slice])}
        return out

    def said(self) -> str:
        """``"value (detail): proof"`` for headers and fix notes."""
        if not self.known:
            return "unknown"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.value}{detail}" + (f": {self.proof}" if self.proof else "")


@dataclass
class RunFacts:
    facts: dict[str, Fact] = field(default_factory=dict)

    def get(self, key: str) -> Fact:
        return self.facts.get(key) or Fact(key)

    def value(self, key: str):
        return self.get(key).value

    def to_dict(self, trace: Trace | None = None) -> dict:
        return {k: self.get(k).to_dict(trace) for k in FACT_KEYS}

    def header(self) -> str:
        """One line for summaries: the known facts, short."""
        parts = []
        for k in FACT_KEYS:
            f = self.get(k)
            if f.known:
                parts.append(f"{k} {f.value}" + (f" ({f.detail})" if f.detail else ""))
        return "; ".join(parts) if parts else "nothing about the run is proven by the trace"


FACT_KEYS = ("framework", "device", "mode", "ranks", "cpu_cores", "cpu_other", "cpu_interf",
             "cpu_handover", "dataloader",
             "host_copies", "precision", "compiled", "optimizer", "collectives", "tf_data",
             "tf_data_parallel", "tf_data_prefetch", "tf_data_cache")
PROBES: list[Callable[[Trace], list[Fact]]] = []


def probe(fn: Callable[[Trace], list[Fact]]) -> Callable[[Trace], list[Fact]]:
    """Register a fact probe (see the module doc)."""
    PROBES.append(fn)
    return fn


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


# -- helpers -------------------------------------------------------------------------------
def first_named(trace: Trace, pattern: str, kinds=None) -> int:
    """First slice (in time) whose name matches ``pattern`` (regex), -1 if none."""
    rx = re.compile(pattern)
    ids = [i for i, n in enumerate(trace.names) if rx.search(n)]
    if not ids:
        return -1
    s = trace.slices
    named = np.zeros(len(trace.names), bool)  # a lookup per slice: one pass, not isin's four
    named[ids] = True
    hit = named[s.name]
    if kinds is not None:
        hit &= np.isin(s.kind, [int(k) for k in kinds])
    idx = np.flatnonzero(hit)
    return int(idx[np.argmin(s.start[idx])]) if len(idx) else -1


def _named(trace: Trace, key: str, value, pattern: str, detail: str = "", kinds=None) -> Fact:
    j = first_named(trace, pattern, kinds)
    if j < 0:
        return Fact(key)
    return Fact(key, value, detail, f"`{trace.name_of(j)}`", j)


def _header(trace: Trace) -> dict:
    h = trace.meta.extra.get("header")
    return h if isinstance(h, dict) else {}


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
        f = _named(trace, "framework", value, pattern)
        if f.known:
            break
    else:
        f = _plain_python(trace)
    version = _header(trace).get("pytorch_version") or _header(trace).get("torch_version")
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
        f = _named(trace, "device", value, pattern)
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


#: Names only training makes: autograd and optimizer ops (PyTorch), gradient ops and
#: variable updates (TensorFlow: ``gradient_tape/...``, ``*Grad``, ``ResourceApply*``),
#: differentiation and update names in XLA modules and ops (JAX: ``transpose(jvp(...))``,
#: ``value_and_grad``, optax updates, a compiled step named for its optimizer's update:
#: ``PjitFunction(adam_update)``, ``sgd_step``).
_TRAINING = (r"Backward0$|^autograd::engine|^Optimizer\.step|^Optimizer\.zero_grad|"
             r"^optimizer|^_foreach_add|transpose_jvp|^gradients/|gradient_tape/|"
             r"Backprop(Filter|Input)(V\d)?$|^ResourceApply|^(Relu|BiasAdd|Sigmoid|Tanh|"
             r"Softmax|MaxPool|AvgPool|FusedBatchNorm\w*|Elu|Selu|LeakyRelu)Grad(V\d)?$|"
             r"transpose\(jvp|\bjvp\(|value_and_grad|\bgrad\(|optax|apply_updates|"
             r"train_step|update_step|train_function|"
             r"(?i:(?<![a-z])(sgd|adamw?|adagrad|rmsprop|lion)_?(update|step)(?![a-z]))")


@probe
def _mode(trace: Trace) -> list[Fact]:
    f = _named(trace, "mode", "training", _TRAINING)
    if f.known:
        return [f]
    ops = _framework_ops(trace)
    fw = _framework(trace)[0]
    # TF ops name their gradients unless XLA fused them; PyTorch's autograd always shows
    eager_tf = fw.value == "tensorflow" and _compiled(trace)[0].value != "xla"
    if (fw.value == "pytorch" or eager_tf) and ops >= 50:
        return [Fact("mode", "inference", "",
                     f"no backward, gradient or optimizer op among {ops:,} framework ops")]
    return [Fact("mode")]


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
    n = count(_header(trace).get("cpu_cores"))
    if n:
        return [Fact("cpu_cores", n, "", "trace metadata cpu_cores")]
    return [Fact("cpu_cores")]


@probe
def _cpu_other(trace: Trace) -> list[Fact]:
    """Cores held by other processes: what a loader worker cannot use."""
    n = amount(_header(trace).get("cpu_busy_other_cores"))
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
    h = _header(trace)
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


#: Trace metadata keys of the hand-over calibration (scalars: importers keep scalar
#: metadata only): µs per batch, per tensor, per MB, and how it was measured.
HANDOVER_KEYS = ("cpu_batch_handover_us", "cpu_batch_handover_tensor_us",
                 "cpu_batch_handover_mb_us", "cpu_batch_handover_how")


def handover_parts(trace: Trace) -> tuple[float, float, float, str, str] | None:
    """(µs per batch, per tensor, per MB, how, where) of handing a batch from a loader
    worker to the main thread on the profiled machine (trace metadata
    ``cpu_batch_handover_*`` written by a calibration, or a recording's manifest
    ``host.batch_handover`` from ``record --calibrate-cores``); None when absent or not a
    set of plausible numbers."""
    h = _header(trace)
    parts, how = [h.get(k) for k in HANDOVER_KEYS[:3]], h.get(HANDOVER_KEYS[3])
    where = "trace metadata cpu_batch_handover_us"
    if all(x is None for x in parts):
        rec = trace.meta.extra.get("recording")
        calib = (rec.get("host") or {}).get("batch_handover") if isinstance(rec, dict) else None
        if isinstance(calib, dict):
            parts = [calib.get(k) for k in ("per_batch_us", "per_tensor_us", "per_mb_us")]
            how, where = calib.get("how"), "recording manifest host.batch_handover"
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1e6
               for x in parts) or parts[0] + parts[1] <= 0:
        return None
    return (float(parts[0]), float(parts[1]), float(parts[2]),
            how if isinstance(how, str) else "", where)


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
    one = _named(trace, "dataloader", "single_process", r"_SingleProcessDataLoaderIter",
                 "num_workers is 0")
    many = _named(trace, "dataloader", "workers", r"_MultiProcessingDataLoaderIter",
                  "num_workers > 0")
    return [one if one.known else many]


@probe
def _host_copies(trace: Trace) -> list[Fact]:
    pageable = _named(trace, "host_copies", "pageable", r"Pageable", "", [Kind.MEMCPY])
    pinned = _named(trace, "host_copies", "pinned", r"Pinned", "", [Kind.MEMCPY])
    if pageable.known and pinned.known:
        pageable.value, pageable.detail = "mixed", f"also pinned: {pinned.proof}"
    return [pageable if pageable.known else pinned]


@probe
def _precision(trace: Trace) -> list[Fact]:
    kinds = [Kind.KERNEL]
    low = _named(trace, "precision", "low", r"bf16|fp16|f16_|half|hmma|h884|h1688|h16816|"
                 r"bfloat16|_BBS_|_HHS_", "fp16/bf16 kernels", kinds)
    if low.known:
        return [low]
    typed = _low_precision_inputs(trace)
    if typed.known:
        return [typed]
    return [_named(trace, "precision", "tf32", r"tf32", "", kinds)]


#: Ops whose input types tell the compute precision (what autocast casts), and the types.
_MATH_OP = re.compile(r"^aten::(addmm|mm|bmm|baddbmm|matmul|linear|conv\w*|_convolution|"
                      r"mkldnn_\w*|scaled_dot_product\w*)$")
_LOW_TYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16"}
_LOW_TEXTS = tuple(t.encode() for t in _LOW_TYPES)
#: Op calls whose recorded args are read (spread over the trace): enough to see a mix.
_TYPE_SAMPLE = 300


_SCAN = "run_facts.low_precision_scan"


def start_scans(trace: Trace) -> None:
    """Start the byte scan of the sampled calls' args (:func:`_low_precision_inputs`) in a
    forked child where the analysis may fork (:mod:`.aside`): with args read on demand it
    reads ~120 pieces of a 1M-event file (~0.2 s), beside the first analysis steps."""
    from .aside import start

    trace.memo(_SCAN, lambda: start(_may_be_low, (trace,)))


def _type_sample(trace: Trace) -> np.ndarray:
    """The matmul / convolution calls with args whose input types are read, in order."""
    s = trace.slices
    ids = trace.name_ids(_MATH_OP.match)
    idx = np.flatnonzero(np.isin(s.name, ids) & (s.args >= 0)) if len(ids) else ids
    return idx[np.linspace(0, len(idx) - 1, min(len(idx), _TYPE_SAMPLE)).astype(np.int64)]


def _may_be_low(trace: Trace) -> bool:
    """False when no sampled call's args can name a 16-bit type (none need decoding)."""
    pick = _type_sample(trace)
    return bool(len(pick)) and trace.args.may_hold(trace.slices.args[pick], _LOW_TEXTS)


def _scanned_low(trace: Trace) -> bool:
    job = trace.memo(_SCAN, lambda: None)
    try:
        return bool(job.result()) if job is not None else _may_be_low(trace)
    except (OSError, ValueError):  # a job stopped with an earlier analysis
        return _may_be_low(trace)


def _low_precision_inputs(trace: Trace) -> Fact:
    """bf16 / fp16 from the recorded input types of matmul / convolution ops (CPU
    autocast leaves no kernel names): low when at least a quarter of the sampled calls
    take 16-bit inputs."""
    s = trace.slices
    pick = _type_sample(trace)
    if not len(pick) or not _scanned_low(trace):
        return Fact("precision")
    seen: dict[str, int] = {}
    first = -1
    for j in pick.tolist():
        types = (trace.args.get(int(s.args[j])) or {}).get("Input type")
        low = {_LOW_TYPES[t] for t in types if t in _LOW_TYPES} if isinstance(types, list) \
            else set()
        for t in low:
            seen[t] = seen.get(t, 0) + 1
            first = j if first < 0 else first
    n = sum(seen.values())
    if n < max(1, len(pick) / 4):
        return Fact("precision")
    kind = max(seen, key=seen.get)
    return Fact("precision", "low", f"{kind} op inputs (autocast)",
                f"{n} of {len(pick)} sampled matmul/convolution calls take "
                f"{'c10::BFloat16' if kind == 'bf16' else 'c10::Half'} inputs, e.g. "
                f"`{trace.name_of(first)}`", first)


@probe
def _compiled(trace: Trace) -> list[Fact]:
    for value, pattern in (("torch.compile", r"Torch-Compiled Region|CompiledFunction|"
                                             r"^triton_|TorchDynamo"),
                           ("cuda_graphs", r"^cudaGraphLaunch|^hipGraphLaunch"),
                           ("xla", r"XLA GPU module|XlaModule|^PjitFunction\(|^jit_|"
                                   r"__inference_.*_jit|XlaLaunch|^_XlaRun|^XlaCompile|"
                                   r"^CpuExecutable::|^GpuExecutable::|XlaMustCompile")):
        f = _named(trace, "compiled", value, pattern)
        if f.known:
            return [f]
    return [Fact("compiled")]


@probe
def _optimizer(trace: Trace) -> list[Fact]:
    for value, pattern in (("fused", r"_fused_adam|fused_adamw|FusedAdam|_fused_sgd"),
                           ("foreach", r"^aten::_foreach_|multi_tensor_apply")):
        f = _named(trace, "optimizer", value, pattern)
        if f.known:
            return [f]
    step = _named(trace, "optimizer", "for_loop", r"^Optimizer\.step")
    if step.known:
        step.detail = "no foreach or fused optimizer op in the trace"
    return [step]


@probe
def _collectives(trace: Trace) -> list[Fact]:
    for value, pattern in (("rccl", r"rccl"), ("nccl", r"nccl"), ("gloo", r"gloo")):
        f = _named(trace, "collectives", value, pattern)
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
    if par is not None:
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


register(RunFacts, Fact)  # result types the analysis cache may store
