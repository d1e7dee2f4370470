"""What a slice *means* for the breakdown, from its kind and name.

Host roles are decided once per distinct name (the string table), then looked
up per slice with numpy, so classification costs O(names), not O(events).
The patterns cover PyTorch (eager, autograd, DataLoader, optimizers),
TensorFlow (tf.data, gradients, ResourceApply*) and JAX/XLA names.
"""

from __future__ import annotations

import re

import numpy as np

from ..kinds import is_sync_call
from ..trace import SAMPLED_LANES, CopyKind, Kind, Trace
from .self_time import parents

# Host roles, in priority order: where roles overlap in time, the first wins.
(DATA_LOADING, SYNC, COMMUNICATION, MEMCPY, RUNTIME, OPTIMIZER, BACKWARD, FORWARD, PYTHON,
 WRAPPER, OTHER_EVENT, NONE) = range(12)

#: Input fetches: loader and tf.data calls, and Python's ``next()`` as the Python tracers
#: record it (JAX ``$builtins next``, the PyTorch profiler's ``<built-in function next>``):
#: the loop asking an iterator or a generator for its next element, with the work that
#: makes it nested inside.
_DATA_LOADING = re.compile(
    r"DataLoader|_DataLoaderIter|IteratorGetNext|Iterator::|tf\.data|tf_data|"
    r"data_?load|load_?batch|next_?batch|get_?batch|prefetch_?batch|"
    r"^\$builtins next$|^<built-in function next>$", re.I)
#: Framework set-up a call pays before it runs any step: building a tf.data pipeline's
#: datasets and an iterator over them (``MakeIterator`` and its nested initialisers),
#: tracing a ``tf.function`` into a graph.  Not input work (no element is made) and not
#: compute: one-off in a loop that builds them once, per-call overhead where every step
#: builds them again (Keras ``predict`` / ``fit`` called once per sample).
SETUP = re.compile(
    r"^MakeIterator\b|^EagerLocalExecute: (\w*Dataset(V\d+)?|AnonymousIterator\w*|"
    r"MakeIterator)$|^tf\.function-graph_building$")


def makes_iterator(name: str) -> bool:
    """A call that makes a ``tf.data`` pipeline's root iterator (eager or in a graph), as
    opposed to the ``MakeIterator::<dataset>`` spans of the datasets under it."""
    return name.endswith("MakeIterator") or name.startswith("MakeIterator::Root")


_OPTIMIZER = re.compile(
    r"^Optimizer\.|optimizer|zero_grad|ResourceApply|ApplyGradient|ApplyAdam|"
    r"ResourceSparseApply|## ?optim", re.I)
_BACKWARD = re.compile(
    r"backward|AccumulateGrad|autograd::engine|gradients?/|backprop|transpose\(jvp", re.I)
_FORWARD = re.compile(r"forward|^nn\.Module:|^jit_|^pjit", re.I)
# Host calls that wait for the device (`.item()`, blocking copies, explicit syncs).
_SYNC_OP = re.compile(
    r"^aten::item$|^aten::_local_scalar_dense$|^cudaMemcpy$|^cudaMemcpy2D$|"
    r"^hipMemcpy$|block_until_ready|^cuCtxSynchronize|^cuStreamSynchronize", re.I)
# Copy API calls: from pageable memory they stage the data on the host first,
# and the device waits if nothing else is queued.
_MEMCPY_API = re.compile(r"^(cuda|hip|cu)Memcpy", re.I)
#: Step markers: ``ProfilerStep#N``, NVTX / TraceMe "step 12" / "train step 3" ranges and
#: Keras 3's "Profiled batch step 5" (TensorBoard callback).
STEP_NAME = re.compile(
    r"^(ProfilerStep#\d+|(profiled[ _-]?)?((train(ing)?|batch)[ _-]?)?(step|iteration|iter)"
    r"[ _#:-]*\d+)$", re.I)
#: Collectives of any backend as the host sees them: the NCCL / gloo / MPI / UCC ranges the
#: PyTorch profiler records (``gloo:all_reduce`` on the backend's own thread), c10d ops
#: and ``record_param_comms``, TF collective ops and XLA collective thunks.
_COLLECTIVE = re.compile(
    r"^(nccl|rccl|gloo|mpi|ucc|xccl)[:_]|^c10d::|^record_param_comms$|"
    r"^(Collective(Reduce|Gather|Bcast|Permute|AllToAll)\w*|NcclAllReduce|"
    r"all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(\b|[.:_])", re.I)
#: DDP's own work on the gradients around each all-reduce, on the thread that runs backward:
#: each gradient copied (scaled by 1/world) into the flat bucket the collective sends
#: (``torch::distributed::reducer::mul_out``) and the reduced bucket copied back
#: (``torch.distributed.ddp.reducer::copy_bucket_to_grad``).  A loop without DDP runs
#: none of it, so it is the collective's cost, not the model's compute.
_GRADIENT_BUCKETS = re.compile(r"^torch(::|\.)distributed(::|\.)(ddp\.)?reducer::")
#: FSDP2's (``fully_shard``) own work around its collectives, on the thread that runs the
#: step: each module's sharded parameters copied into the flat buffer its all-gather fills
#: (``fsdp::all_gather_copy_in``), the wait for it and the copy out (``FSDP::all_gather``,
#: ``FSDP::all_gather_copy_out``, in ``FSDP::pre_forward`` / ``FSDP::pre_backward``), the
#: gradients cut into the reduce-scatter's buffer, its wait and the reshard
#: (``fsdp::chunk_cat``, ``FSDP::post_backward_reduce``, ``FSDP::post_backward_rs_wait``,
#: ``FSDP::post_backward_reshard``).  No model op runs inside them, and a loop without
#: sharding runs none of them: they are the collectives' cost, not the model's compute.
_SHARDED_PARAMETERS = re.compile(r"^(FSDP|fsdp)::")
#: The collective itself as its backend records it (not the c10d op that enqueues it).
_BACKEND_COLLECTIVE = re.compile(r"^(nccl|rccl|gloo|mpi|ucc|xccl):", re.I)
#: Waits for the next input element (what a consumer thread blocks on), on any thread.
_INPUT_WAIT = re.compile(r"IteratorGetNext|DataLoader.*__next__|MultiDeviceIteratorGetNext")
#: Framework step functions and runtime wrappers on the thread that drives the loop: they
#: enclose the step while its ops run on pool threads, so the time under them that no op
#: of the thread covers is spent waiting for those threads.
_WRAPPER = re.compile(
    r"^(TFE_Py_|EagerExecute$|EagerLocalExecute|EagerKernelExecute$|KernelAndDeviceFunc::|"
    r"FunctionRun$|__inference_|__forward_|PjitFunction|PmapFunction|train_function$|"
    r"(train|test|predict)_step$|(multi|one)_step_on_(iterator|data)$|"
    r"ExecutorState::Process$|ExecutorDoneCallback$)")
# Host calls that run a TF/JAX training step from Python: eager dispatch of the
# step function, the Keras train_function, jitted JAX calls. The thread making them
# drives the loop even when runtime pools (Eigen, tf_Compute, XLA) hold more events.
_STEP_DRIVER = re.compile(
    r"^(EagerLocalExecute|EagerExecute$|TFE_Py_|__inference_|__forward_|PjitFunction|"
    r"PmapFunction|train_function$|train_step$)")
_STREAM_WAIT = re.compile(r"Stream ?Wait ?Event", re.I)

_PAGEABLE = re.compile(r"pageable", re.I)
_PINNED = re.compile(r"pinned", re.I)


def _name_roles(names: list[str]) -> np.ndarray:
    """Role implied by a name alone (NONE where the name says nothing)."""
    out = np.full(len(names), NONE, np.int8)
    for i, n in enumerate(names):
        if STEP_NAME.match(n):
            continue
        if SETUP.search(n):
            out[i] = RUNTIME
        elif _DATA_LOADING.search(n):
            out[i] = DATA_LOADING
        elif _COLLECTIVE.search(n) or _GRADIENT_BUCKETS.match(n) or _SHARDED_PARAMETERS.match(n):
            out[i] = COMMUNICATION
        elif _SYNC_OP.search(n) or (is_sync_call(n) and "WaitEvent" not in n):
            out[i] = SYNC
        elif _MEMCPY_API.search(n):
            out[i] = MEMCPY
        elif _WRAPPER.search(n):
            out[i] = WRAPPER
        elif _OPTIMIZER.search(n):
            out[i] = OPTIMIZER
        elif _BACKWARD.search(n):
            out[i] = BACKWARD
        elif _FORWARD.search(n):
            out[i] = FORWARD
    return out


def host_roles(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Role of each host slice in ``idx`` (see the module constants)."""
    by_name = trace.memo("roles.roles_by_name", lambda: _name_roles(trace.names))
    s = trace.slices
    kind = s.kind[idx]
    role = by_name[s.name[idx]].copy()
    runtime = kind == int(Kind.RUNTIME)
    role[runtime & ~np.isin(role, [SYNC, DATA_LOADING, MEMCPY, COMMUNICATION])] = RUNTIME
    role[~runtime & (role == MEMCPY)] = NONE  # a copy *op* is classified by its phase
    role[kind == int(Kind.SYNC)] = SYNC
    role[(role == MEMCPY) & np.isin(idx, _readback_calls(trace))] = SYNC
    plain = role == NONE
    role[plain & (kind == int(Kind.CPU_OP))] = FORWARD
    role[plain & (kind == int(Kind.PYTHON))] = PYTHON
    role[plain & ~np.isin(kind, [int(Kind.CPU_OP), int(Kind.PYTHON), int(Kind.ANNOTATION)])] = (
        OTHER_EVENT)
    return role


def _readback_calls(trace: Trace) -> np.ndarray:
    """Copy calls whose launched copy is device-to-host (sorted slice ids).

    A D2H copy call returns only when the data is on the host, i.e. after
    everything queued before it ran: a synchronisation (``.cpu()``,
    ``.item()``), not host-side staging.
    """
    def build():
        f, s = trace.flows, trace.slices
        launch = f.kind == 0
        src, dst = f.src[launch], f.dst[launch]
        return np.unique(src[s.copy_kind[dst] == int(CopyKind.D2H)])
    return trace.memo("roles.readback", build)


# Lanes of sampled stacks are listed by importers under meta.extra[SAMPLED_LANES] (the
# recording importer's py-spy lanes); older cached recordings are recognised by lane name.
_SAMPLED_NAME = re.compile(r"^py-spy\b")


def sampled_lanes(trace: Trace) -> np.ndarray:
    """Per lane: True where the slices are stack samples (py-spy), not traced calls.

    Sampled stacks say where time went statistically; they have no runtime calls,
    no ops and no exact edges, so they never stand in for a traced main thread.
    """
    def build():
        lanes = trace.lanes
        out = np.zeros(len(lanes), bool)
        listed = [int(i) for i in trace.meta.extra.get(SAMPLED_LANES) or []
                  if isinstance(i, int) and 0 <= i < len(lanes)]
        out[listed] = True
        for i, (name, group) in enumerate(zip(lanes.name, lanes.group)):
            if _SAMPLED_NAME.match(name) or _SAMPLED_NAME.match(group):
                out[i] = True
        return out
    return trace.memo("roles.sampled_lanes", build)


def stream_wait_ids(trace: Trace) -> np.ndarray:
    """Name ids of stream-to-stream waits ("Stream Wait Event", ``cudaStreamWaitEvent``):
    ordering between streams, the host does not block."""
    return trace.memo("roles.wait_ids", lambda: trace.name_ids(_STREAM_WAIT.search))


def step_driver_counts(trace: Trace) -> np.ndarray:
    """Per lane: how many TF/JAX step-dispatch calls it makes (see ``_STEP_DRIVER``)."""
    def build():
        s = trace.slices
        ids = trace.name_ids(_STEP_DRIVER.match)
        hit = np.isin(s.name, ids) & (s.dur > 0)
        return np.bincount(s.lane[hit], minlength=len(trace.lanes))
    return trace.memo("roles.step_drivers", build)


def step_marker_ids(trace: Trace) -> np.ndarray:
    """Name ids of step markers (:data:`STEP_NAME`)."""
    return trace.memo("roles.step_ids", lambda: trace.name_ids(
        lambda n: bool(STEP_NAME.match(n.strip().strip("#").strip()))))


def waits_for(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Per slice of ``idx``: the role of what a thread waits *for* while it runs
    (``DATA_LOADING`` for an input fetch such as ``IteratorGetNextOp::DoCompute``,
    ``COMMUNICATION`` for a collective), NONE otherwise.  Such a slice on another thread
    than the loop's tells what the loop's thread waits for while nothing of its own runs."""
    def build():
        out = np.full(len(trace.names), NONE, np.int8)
        for i, n in enumerate(trace.names):
            if _INPUT_WAIT.search(n):
                out[i] = DATA_LOADING
            elif _COLLECTIVE.search(n):
                out[i] = COMMUNICATION
        return out
    return trace.memo("roles.waits_for", build)[trace.slices.name[idx]]


def copy_memory_kind(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """0 unknown, 1 pageable, 2 pinned host memory, from copy names like ``(Pinned -> Device)``."""
    def build():
        out = np.zeros(len(trace.names), np.int8)
        used = np.unique(trace.slices.name[trace.slices.kind == int(Kind.MEMCPY)])
        for i in used.tolist():
            n = trace.names[i]
            out[i] = 1 if _PAGEABLE.search(n) else 2 if _PINNED.search(n) else 0
        return out
    return trace.memo("roles.copy_mem", build)[trace.slices.name[idx]]



def host_collectives(trace: Trace) -> np.ndarray:
    """Slices of collectives run on host threads (gloo / MPI / UCC ranges such as
    ``gloo:all_reduce``), for runs whose collectives have no device kernel."""
    def build():
        s = trace.slices
        ids = trace.name_ids(_BACKEND_COLLECTIVE.match)
        return np.flatnonzero(np.isin(s.name, ids) & (s.device < 0) & (s.dur > 0))
    return trace.memo("roles.host_collectives", build)


def collective_callers(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Per slice of ``idx`` (one thread's slices), whether it is an op that calls a
    collective: a framework op enclosing a collective call (``c10d::alltoall_base_``,
    ``c10d::allreduce_``) on its thread, as a differentiable collective's autograd
    Function (``torch.distributed.nn``'s ``_AlltoAllSingle``), its backward node run by
    autograd (``_AlltoAllSingleBackward``) or a custom Function around an all-reduce
    (tensor parallelism's ``ReduceFromParallel``) does.  Such an op waits in its
    collective: its time that no op inside it covers is that wait, not its compute.  A
    collective inside a communication range of its own (FSDP's ``FSDP::all_gather``) is
    that range's: the ops above it call the framework's hook, not the collective; and
    DDP's reducer launches its all-reduces from the gradient hooks (``AccumulateGrad``,
    beside its bucket copies) and returns without waiting."""
    s = trace.slices
    out = np.zeros(len(idx), bool)
    ids = trace.memo("roles.collective_ids", lambda: trace.name_ids(_COLLECTIVE.search))
    coll = idx[np.isin(s.name[idx], ids)]
    if not len(coll):
        return out
    up = parents(trace)
    by_name = trace.memo("roles.roles_by_name", lambda: _name_roles(trace.names))
    top = up[coll]  # one inside a communication range is that range's, not its callers'
    held = _ops_above(trace, top[(top >= 0) & (by_name[s.name[top]] != COMMUNICATION)])
    buckets = trace.memo("roles.bucket_ids", lambda: trace.name_ids(_GRADIENT_BUCKETS.match))
    held -= _ops_above(trace, idx[np.isin(s.name[idx], buckets)])
    out[np.isin(idx, np.fromiter(held, np.int64, len(held)))] = True
    return out


def _ops_above(trace: Trace, cur: np.ndarray) -> set[int]:
    """The framework ops among ``cur`` and every slice enclosing them on their thread."""
    s = trace.slices
    up = parents(trace)
    held: set[int] = set()
    while len(cur := np.unique(cur[cur >= 0])):
        held.update(cur[s.kind[cur] == int(Kind.CPU_OP)].tolist())
        cur = up[cur]
    return held


#: Threads of the framework runtimes' compute pools (not tf.data's own threads).
_POOL_LANE = re.compile(r"tf_Compute|tf_XLA|XLA|PjRt|pjrt|Eigen|inter_op|intra_op", re.I)
#: Pool-thread spans that wait or mark rather than compute.
_POOL_IDLE = re.compile(r"Await|ThreadpoolListener::|[Ww]ait|^end: |BlockUntilReady|"
                        r"ExecutorDoneCallback")


def pool_work(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """The slices of ``idx`` that are compute on a runtime pool thread (TF ``tf_Compute``,
    XLA PjRt / Eigen threads): what a main thread inside a step function or a blocking
    read waits for.  Waits and markers of those threads are left out."""
    s = trace.slices
    lanes = np.unique(s.lane[idx])
    pools = [int(x) for x in lanes.tolist() if _POOL_LANE.search(trace.lanes.name[x])
             and not trace.lanes.name[x].startswith("tf_data")]
    if not pools:
        return idx[:0]
    idle = trace.memo("roles.pool_idle", lambda: trace.name_ids(_POOL_IDLE.search))
    keep = np.isin(s.lane[idx], pools) & ~np.isin(s.name[idx], idle) & (
        s.kind[idx] == int(Kind.CPU_OP))
    return idx[keep]
