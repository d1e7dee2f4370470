"""Host-side breakdown: what the main thread of each rank spends an iteration on.

Categories, with their overlap priority (first wins where slices nest):

1. ``data_loading`` -- DataLoader ``__next__`` / ``enumerate(DataLoader)``, tf.data
   ``IteratorGetNext`` and similar spans, with everything inside them; a batch's
   conversion from host data (``tf.convert_to_tensor``) with the untraced time before
   it, in which the loop built the batch; JAX's ``jnp.array`` / ``jnp.asarray`` of a
   Python list of samples called by the code that calls the compiled step (the batch
   made a JAX array for it, the list walked in Python); and,
   after the main thread's own slices and what other threads run for it, the loader
   started again between two fetches of one iteration (:mod:`.loader_restarts`: an
   epoch's ``iter(loader)`` starting its workers);
2. ``sync`` -- the host blocked on the device: ``cudaDeviceSynchronize``,
   stream/event syncs, blocking ``cudaMemcpy``, ``aten::item``, and copy calls
   that read back a device-to-host copy (``.cpu()``);
3. ``communication`` -- collectives of any backend on the main thread (``c10d::allreduce_``,
   ``nccl:all_reduce``, ``gloo:*``), and main-thread time with nothing of its own
   running while another thread of the process runs a collective
   (``gloo:all_reduce`` on gloo's thread: the main thread waits for it), the time an op
   that calls a collective and waits in it (a differentiable collective's autograd
   Function, its backward node) spends with no op of its own inside, and DDP's
   copies of the gradients into and out of the buckets the all-reduce sends
   (``reducer::mul_out``, ``reducer::copy_bucket_to_grad``: a loop without DDP has none);
4. ``memcpy`` -- other copy API calls (``cudaMemcpyAsync``...): from pageable
   memory the host stages the data itself before the device copy can start; and, at
   ``data_loading``'s priority, JAX's conversion of a numpy batch already made by the
   code that calls the compiled step (``jnp.asarray(x)``: no list to walk, the array
   copied into a device buffer);
5. ``runtime`` -- other CUDA/HIP runtime and driver calls (kernel launches), and the
   framework's set-up calls (a tf.data pipeline and iterator built, a tf.function traced:
   :data:`.roles.SETUP`);
6. ``optimizer`` -- inside ``Optimizer.step`` / ``zero_grad`` / TF ``ResourceApply*``
   (a step's span holds its ops as a step function does: its time that no op covers,
   while another thread runs a collective, is that collective's, as when
   ``ZeroRedundancyOptimizer`` waits for its broadcasts);
7. ``backward`` -- autograd ops (``*Backward``, ``AccumulateGrad``); when the main
   thread is idle while an autograd thread of the same process runs backward
   ops, that time is backward too (PyTorch runs backward on its own thread);
8. ``forward`` -- remaining framework ops (``aten::*``) and ``forward`` markers, and
   framework step functions (``__inference_*``, ``KernelAndDeviceFunc::Run``) whose ops
   run on pool threads;
9. ``python`` -- Python functions with no op below them (interpreter overhead);
10. ``other`` -- unclassified events and main-thread time with no traced event.

What a thread waits *for* counts even when no op of its own covers the wait: where the
main thread runs nothing but a step function or Python frames (or nothing at all) while
another thread of the process fetches input (``IteratorGetNextOp::DoCompute``) or runs a
collective, that time is ``data_loading`` / ``communication``; while a runtime pool thread
(TF's ``tf_Compute``, XLA's PjRt client and Eigen threads) computes, it is ``forward``
(``np.asarray`` of a jitted result waits for XLA's thread); while the input pipeline's
Python runs on a tf.data thread (``py_function`` / ``numpy_function``, which hold the GIL),
it is ``data_loading``: the main thread cannot run its own Python then, so the Python
between its steps and the return from its eager calls wait for the input's.

Every instant of an iteration window gets exactly one category, so a row sums
to the iteration's wall time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..trace import Kind, LaneKind, Trace
from ..units import lane_title
from . import roles as R
from .codec import register
from .intervals import covered, paint
from .iterations.dispatch import compiled_step_calls
from .loader_restarts import restarts
from .self_time import parents
from .tfdata import pyfunc_ids, tf_data_lanes

HOST_CATEGORIES = ("data_loading", "forward", "backward", "optimizer", "communication",
                   "memcpy", "runtime", "sync", "python", "other")

# Painting layers of the main thread's own slices (priority order) -> category column.
_OWN_ROLES = (R.DATA_LOADING, R.SYNC, R.COMMUNICATION, R.MEMCPY, R.RUNTIME, R.OPTIMIZER,
              R.BACKWARD, R.FORWARD)
#: Roles that mean "the host is busy issuing work" (framework, launches, Python).
WORK_ROLES = (R.RUNTIME, R.OPTIMIZER, R.BACKWARD, R.FORWARD, R.PYTHON, R.WRAPPER)
#: The framework's op calls of a step (what ``calls`` counts).
_OP_ROLES = (R.OPTIMIZER, R.BACKWARD, R.FORWARD)
_ROLE_CATEGORY = {R.DATA_LOADING: "data_loading", R.SYNC: "sync",
                  R.COMMUNICATION: "communication", R.MEMCPY: "memcpy", R.RUNTIME: "runtime",
                  R.OPTIMIZER: "optimizer", R.BACKWARD: "backward", R.FORWARD: "forward",
                  R.PYTHON: "python", R.WRAPPER: "forward", R.OTHER_EVENT: "other"}
#: The categories of :data:`_OP_ROLES`: the columns of the framework's own ops.
OP_CATEGORIES = tuple(_ROLE_CATEGORY[r] for r in _OP_ROLES)
#: After the main thread's own work: what other threads run that it waits for, then the
#: step functions enclosing it, unclassified events, and backward on autograd threads.
_WAITED = (R.DATA_LOADING, R.COMMUNICATION)
#: Model ops that may call a collective and wait in it (:func:`_waiting_callers`).
_CALLER_ROLES = (R.FORWARD, R.BACKWARD)


@dataclass
class HostBreakdown:
    """Main-thread time per iteration and category of one rank.

    ``times[i, c]`` is ns of iteration ``i`` in category ``categories[c]``; each
    row sums to ``ends[i] - starts[i]``; ``bytes[i, c]`` is the bytes moved by the
    copies that the ``memcpy`` / ``sync`` calls of iteration ``i`` launched (0 for
    other columns).  ``role_slices`` holds the main-thread
    slice indexes of the ``data_loading``, ``sync`` and ``memcpy`` categories, and
    ``work`` those of framework work (ops, launches, Python, autograd-thread
    backward), for the device's idle attribution and for evidence.  ``calls[i]`` counts
    the framework op calls (forward, backward, optimizer) started in iteration ``i``:
    ranks with the same counts run the same step.
    """

    rank: int
    label: str
    lane: int
    helper_lanes: list[int]
    starts: np.ndarray
    ends: np.ndarray
    times: np.ndarray
    launches: np.ndarray  # runtime calls started per iteration
    bytes: np.ndarray  # (n_iter, n_cat): bytes of the copies launched by memcpy / sync calls
    role_slices: dict[str, np.ndarray] = field(default_factory=dict)
    work: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    calls: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    categories: tuple[str, ...] = HOST_CATEGORIES

    def column(self, category: str) -> np.ndarray:
        return self.times[:, self.categories.index(category)]


def main_thread(trace: Trace, cpu_lanes: np.ndarray) -> int:
    """The lane that drives the training loop: most step markers, then TF/JAX step
    dispatch calls (the Python thread, not the runtime's thread pools), then traced ops and
    runtime calls (a profiler's record of the loop beats py-spy's sampled stacks of the
    same thread, which have more slices), then most framework slices."""
    steps, drivers, traced, framework, anything = trace.memo("host_side.lane_counts",
                                                             lambda: _lane_counts(trace))
    best = max(cpu_lanes.tolist(), key=lambda ln: (steps[ln], drivers[ln], traced[ln],
                                                   framework[ln], anything[ln], -ln))
    return int(best)


def _lane_counts(trace: Trace) -> tuple:
    """Per lane, what :func:`main_thread` ranks by (asked per rank and by the run facts)."""
    s = trace.slices
    n_lanes = len(trace.lanes)
    steps = np.bincount(s.lane[np.isin(s.name, R.step_marker_ids(trace))], minlength=n_lanes)
    fw = np.isin(s.kind, [int(Kind.CPU_OP), int(Kind.RUNTIME), int(Kind.PYTHON)])
    framework = np.bincount(s.lane[fw], minlength=n_lanes)
    ops = np.bincount(s.lane[np.isin(s.kind, [int(Kind.CPU_OP), int(Kind.RUNTIME)])],
                      minlength=n_lanes)
    traced = np.where(R.sampled_lanes(trace), 0, ops)
    anything = np.bincount(s.lane, minlength=n_lanes)
    return steps, R.step_driver_counts(trace), traced, framework, anything


def cpu_lanes_of_rank(trace: Trace, rank: int) -> np.ndarray:
    lanes = trace.lanes
    return np.flatnonzero((lanes.kind == int(LaneKind.CPU)) & (lanes.rank == rank))


def compute_host(trace: Trace, rank: int, ws: np.ndarray, we: np.ndarray) -> HostBreakdown | None:
    """Host breakdown of ``rank``'s main thread over windows ``ws``/``we`` (None: no CPU lane)."""
    cpu = cpu_lanes_of_rank(trace, rank)
    if len(cpu) == 0:
        return None
    main = main_thread(trace, cpu)
    s = trace.slices
    idx = trace.lane_slices(main)
    role = R.host_roles(trace, idx)
    helpers = _helper_lanes(trace, cpu, main)
    hidx = np.flatnonzero(np.isin(s.lane, helpers)) if helpers else np.zeros(0, np.int64)
    hidx = hidx[s.dur[hidx] > 0]
    hb = hidx[R.host_roles(trace, hidx) == R.BACKWARD]
    waited = R.waits_for(trace, hidx)
    conv, prep = _batch_conversions(trace, idx)
    made, (mlo, mhi) = eager_decoding(trace, main, idx)
    prep = (np.r_[prep[0], mlo], np.r_[prep[1], mhi])
    jconv, jcopy = _jax_batch_conversions(trace, main, idx)
    if len(jconv):
        conv = np.sort(np.concatenate([conv, jconv]))
        prep = (np.r_[prep[0], s.start[jconv]], np.r_[prep[1], s.end[jconv]])
    own, spans = _optimizer_spans(trace, idx, role)
    caller = _waiting_callers(trace, idx, role, hidx)
    mine = np.where(caller, R.NONE, role)
    parts = ([(conv, "data_loading"), (jcopy, "memcpy")]
             + [(own.get(r, idx[mine == r]), _ROLE_CATEGORY[r]) for r in _OWN_ROLES]
             + [(hidx[waited == r], _ROLE_CATEGORY[r]) for r in _WAITED]
             + [(idx[caller], "communication")]
             + [(spans, "optimizer"), (R.pool_work(trace, hidx), "forward"),
                (_input_python(trace, hidx), "data_loading"), (idx[role == R.PYTHON], "python"),
                (idx[role == R.WRAPPER], "forward"), (idx[role == R.OTHER_EVENT], "other"),
                (hb, "backward")])
    layers = [prep] + [(s.start[x], s.end[x]) for x, _ in parts[1:]]
    cats = [cat for _, cat in parts]
    back = restarts(trace, main, ws, we)  # the loader started again: its untraced time
    # after what other threads run for the step
    at = 2 + len(_OWN_ROLES) + len(_WAITED) + 3
    layers.insert(at, (back.gap_start, back.gap_end))
    cats.insert(at, "data_loading")
    p = paint(layers, ws, we)
    times = np.zeros((len(ws), len(HOST_CATEGORIES)), np.int64)
    for li, cat in enumerate(cats):
        times[:, HOST_CATEGORIES.index(cat)] += p.per_window[:, li]
    times[:, HOST_CATEGORIES.index("other")] += p.per_window[:, -1]
    launch = idx[role == R.RUNTIME]
    lw = window_of(s.start[launch], ws, we)
    launches = np.bincount(lw[lw >= 0], minlength=len(ws)).astype(np.int64)
    role_slices = {_ROLE_CATEGORY[r]: idx[role == r] for r in (R.DATA_LOADING, R.SYNC,
                                                                R.MEMCPY, R.COMMUNICATION)}
    role_slices["data_loading"] = np.sort(np.concatenate([role_slices["data_loading"], conv,
                                                          made]))
    role_slices["memcpy"] = np.sort(np.concatenate([role_slices["memcpy"], jcopy]))
    for r in _WAITED:  # what other threads run while the main thread waits for it
        cat = _ROLE_CATEGORY[r]
        role_slices[cat] = np.sort(np.concatenate([role_slices[cat], hidx[waited == r]]))
    work = np.sort(np.concatenate([idx[np.isin(role, WORK_ROLES)], hb]), kind="stable")
    ops = np.concatenate([idx[np.isin(role, _OP_ROLES)], hb])
    cw = window_of(s.start[ops], ws, we)
    calls = np.bincount(cw[cw >= 0], minlength=len(ws)).astype(np.int64)
    nbytes = np.zeros_like(times)
    for cat in ("memcpy", "sync"):
        nbytes[:, HOST_CATEGORIES.index(cat)] = _launched_bytes(trace, role_slices[cat], ws, we)
    return HostBreakdown(
        rank=rank, label=lane_title(trace.lanes.name[main], trace.lanes.group[main]), lane=main,
        helper_lanes=[int(h) for h in helpers], starts=ws, ends=we, times=times,
        launches=launches, bytes=nbytes, role_slices=role_slices, work=work, calls=calls)


def _waiting_callers(trace: Trace, idx: np.ndarray, role: np.ndarray,
                     hidx: np.ndarray) -> np.ndarray:
    """Per main-thread slice of ``idx``: a forward or backward op that calls a collective
    (:func:`.roles.collective_callers`: a differentiable collective's autograd Function,
    its backward node run by autograd, a custom Function around an all-reduce) and waits
    in it: a collective run by a thread of the process (``gloo:all_to_all`` on gloo's
    thread) starts and ends inside it.  Its time that no op inside it covers is that wait,
    before and while the backend's thread runs the collective: communication, not compute
    (its ops keep their own category).  DDP's reducer launches its all-reduces from
    ``AccumulateGrad`` and returns: they end after it, it does not wait."""
    s = trace.slices
    caller = R.collective_callers(trace, idx) & np.isin(role, _CALLER_ROLES)
    hc = np.intersect1d(R.host_collectives(trace), hidx)
    if not caller.any() or not len(hc):
        return np.zeros(len(idx), bool)
    hc = hc[np.argsort(s.start[hc], kind="stable")]
    starts, ends = s.start[hc], s.end[hc]
    at = np.flatnonzero(caller)
    lo = np.searchsorted(starts, s.start[idx[at]], "left")
    hi = np.searchsorted(starts, s.end[idx[at]], "right")
    waits = [b > a and ends[a:b].min() <= e for a, b, e in zip(lo, hi, s.end[idx[at]])]
    caller[at[~np.array(waits, bool)]] = False
    return caller


def _optimizer_spans(trace: Trace, idx: np.ndarray, role: np.ndarray) -> tuple[dict, np.ndarray]:
    """The optimizer's own slices (its ops and every op run inside its ``Optimizer.step`` /
    ``zero_grad`` spans) and those spans themselves.

    A span encloses the step as a step function does: the time in it that none of its ops
    covers is the thread waiting, and where another thread runs a collective then, the
    step waits for that collective (``ZeroRedundancyOptimizer`` broadcasts each updated
    shard after its step and waits for the broadcasts inside it), so the spans paint after
    what other threads run for the step, and only their ops as the optimizer's own work.
    """
    s = trace.slices
    opt = idx[role == R.OPTIMIZER]
    annotated = s.kind[opt] == int(Kind.ANNOTATION)
    spans = opt[annotated]
    ops = idx[np.isin(role, _OP_ROLES) & (s.kind[idx] != int(Kind.ANNOTATION))]
    inner = ops[covered(s.start[ops], s.start[spans], s.end[spans])] if len(spans) else ops[:0]
    return {R.OPTIMIZER: np.union1d(opt[~annotated], inner)}, spans


def _input_python(trace: Trace, hidx: np.ndarray) -> np.ndarray:
    """The slices of ``hidx`` that run the input pipeline's Python (``py_function`` /
    ``numpy_function`` ops on tf.data's threads): they hold the GIL, so a main thread that
    runs no op of its own then waits for it (to run its Python between steps, to return
    from an eager call) on the input."""
    s = trace.slices
    keep = np.isin(s.name[hidx], pyfunc_ids(trace)) & np.isin(s.lane[hidx],
                                                              tf_data_lanes(trace))
    return hidx[keep]


#: Host data made a tensor by the loop (``tf.convert_to_tensor`` / ``tf.constant`` of a
#: batch built in Python).
BATCH_CONVERSION = re.compile(r"^tf\.constant$|^tf\.convert_to_tensor$|^_?EagerConst$")
#: Eager ops that run the loop's code or write a variable: the first of them after a
#: conversion says what the converted tensor is for.
_EAGER_RUN = re.compile(r"^EagerLocalExecute: ")
_VARIABLE_WRITE = re.compile(r"^EagerLocalExecute: Assign(Add|Sub)?VariableOp$")
_STATE_MATH_OPS = (r"ReadVariableOp|Mul|AddV2|Add|AddN|Sub|RealDiv|Div|DivNoNan|Neg|Sqrt"
                   r"|Rsqrt|Square|SquaredDifference|Pow|Exp|Log|Log1p|Maximum|Minimum|Abs"
                   r"|Sign|Reciprocal|ClipByValue|Cast|Identity")
#: Eager ops whose constant argument TensorFlow makes itself from a Python value: a
#: reduction's axes (``tf.reduce_all(done)`` converts ``range(rank)``) and a fill's value
#: (``tf.zeros_like``, ``tf.fill``).  A conversion the next eager op of which is one of
#: them is that argument, not a batch.
_ARGUMENT_OPS = re.compile(r"^EagerLocalExecute: (All|Any|Sum|Mean|Max|Min|Prod|Fill)$")
#: TensorFlow's elementwise arithmetic and variable reads run eagerly: what an update of a
#: variable from its own value and others' is made of (``ema.assign(decay * ema + (1 -
#: decay) * w)``, ``v.assign_sub(lr * m)``): no read of data, no matmul, no function call.
_STATE_MATH = re.compile(rf"^EagerLocalExecute: ({_STATE_MATH_OPS})$")


def tf_eager_ids(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Name ids of TensorFlow's eager ops (``EagerLocalExecute: ...``): all of them, the
    variable writes, and the state arithmetic and variable reads (``_STATE_MATH``); each
    read once per trace."""
    return (trace.memo("host_side.eager_run_ids", lambda: trace.name_ids(_EAGER_RUN.match)),
            trace.memo("host_side.variable_write_ids",
                       lambda: trace.name_ids(_VARIABLE_WRITE.match)),
            trace.memo("host_side.state_math_ids", lambda: trace.name_ids(_STATE_MATH.match)))


def _batch_conversions(trace: Trace, idx: np.ndarray) -> tuple[np.ndarray, tuple]:
    """(the main thread's outermost conversions of host data to tensors, the intervals
    they and the untraced time before each cover).  A loop that builds its batch in
    Python and converts it records only the conversion: the time from the thread's last
    event before it to the conversion is the batch being built (nothing the thread
    records runs then), so it is input preparation with the conversion itself.  A
    conversion whose tensor the next eager op writes into a variable
    (``AssignVariableOp``: Keras's ``train_on_batch`` resetting its metrics, a loop's
    ``variable.assign(value)``), or that only elementwise arithmetic on variables' values
    separates from the next variable write (a Python number in ``ema.assign(decay * ema +
    (1 - decay) * w)``), sets state, not a batch: it is not input; nor is one that the
    next eager op takes as its axes or fill value (:data:`_ARGUMENT_OPS`)."""
    s = trace.slices
    names = trace.memo("host_side.conversion_ids",
                       lambda: trace.name_ids(BATCH_CONVERSION.match))
    idx = idx[np.argsort(s.start[idx], kind="stable")]
    conv = np.flatnonzero(np.isin(s.name[idx], names) & (s.depth[idx] == s.depth[idx].min())
                          ) if len(names) and len(idx) else np.zeros(0, np.int64)
    conv = conv[~_writes_variable(trace, idx, conv) & ~_makes_argument(trace, idx, conv)]
    if not len(conv):
        return conv, (np.zeros(0, np.int64), np.zeros(0, np.int64))
    reach = np.maximum.accumulate(s.end[idx])  # latest end among the events up to each
    before = np.where(conv > 0, reach[np.maximum(conv - 1, 0)], s.start[idx[conv]])
    lo = np.where(conv > 0, np.minimum(before, s.start[idx[conv]]), s.start[idx[conv]])
    return idx[conv], (lo.astype(np.int64), s.end[idx[conv]].astype(np.int64))


#: ``jnp.array`` / ``jnp.asarray`` as JAX's Python tracer records them.
JAX_CONVERSION = re.compile(r"^\$array_constructors\.py:\d+ (array|asarray)$")
#: Frames one ``jnp.array`` call records at least when it walks a list of elements (every
#: element's dtype, weak type and tree checked: 10,000-13,000 for a list of 512 images);
#: one numpy array converted, even through a tree of one leaf (a dtype given), records
#: 70-130.
MIN_WALK_EVENTS = 1000


def _jax_batch_conversions(trace: Trace, lane: int,
                           idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The thread's ``jnp.array`` / ``jnp.asarray`` calls (Python tracer frames) made by a
    frame that also calls the compiled step (the jitted function with the most compiled
    work, :func:`.iterations.dispatch.compiled_step_calls`): the loop's code converting
    host data into the arrays it passes to the step, as (those that walk a Python
    structure, those that copy one array).  A conversion that walks a list of samples
    (at least :data:`MIN_WALK_EVENTS` frames inside it: every element's dtype and tree
    checked, one copy per element, in Python) is the batch's making; one given a numpy
    batch already made walks nothing (with a dtype it flattens a tree of one leaf) and
    only copies it into a device buffer: a host-to-device copy, as ``jax.device_put``
    is.  A conversion inside a library call (JAX's indexing converting
    an index) or inside the step's own code has another caller and is left to its
    caller's role."""
    s = trace.slices
    names = trace.memo("host_side.jax_conversion_ids",
                       lambda: trace.name_ids(JAX_CONVERSION.match))
    conv = idx[np.isin(s.name[idx], names)] if len(names) else idx[:0]
    if not len(conv):
        return conv.astype(np.int64), conv.astype(np.int64)
    par = parents(trace)
    callers = par[compiled_step_calls(trace, lane)]
    conv = conv[np.isin(par[conv], callers[callers >= 0])].astype(np.int64)
    walks = events_inside(trace, lane, conv) >= MIN_WALK_EVENTS
    return conv[walks], conv[~walks]


def events_inside(trace: Trace, lane: int, calls: np.ndarray) -> np.ndarray:
    """Per call of ``lane``, the events of the lane it covers, itself included."""
    s = trace.slices
    st = np.sort(s.start[trace.lane_slices(lane)])
    return (np.searchsorted(st, s.end[calls], side="left")
            - np.searchsorted(st, s.start[calls], side="left")).astype(np.int64)


def _writes_variable(trace: Trace, idx: np.ndarray, conv: np.ndarray) -> np.ndarray:
    """Per conversion ``idx[conv]`` (``idx`` in start order): whether the first eager op
    the thread runs after it, past elementwise arithmetic and variable reads
    (:func:`tf_eager_ids`), is a variable write."""
    _, write, math = tf_eager_ids(trace)
    return np.isin(_next_eager_op(trace, idx, conv, past=math), write)


def _next_eager_op(trace: Trace, idx: np.ndarray, conv: np.ndarray,
                   past: np.ndarray | None = None) -> np.ndarray:
    """Per conversion ``idx[conv]`` (``idx`` in start order): the name id of the first
    eager op the thread runs after it, past those named in ``past``; -1 where none.
    What a converted value is for shows in the op that takes it next."""
    out = np.full(len(conv), -1, np.int64)
    s = trace.slices
    ops = idx[np.isin(s.name[idx], tf_eager_ids(trace)[0])] if len(conv) else idx[:0]
    if not len(ops):
        return out
    names = s.name[ops]
    keep = np.flatnonzero(~np.isin(names, past)) if past is not None else np.arange(len(ops))
    nxt = np.searchsorted(s.start[ops], s.end[idx[conv]], side="left")
    stop = np.searchsorted(keep, nxt, side="left")
    has = stop < len(keep)
    out[has] = names[keep[stop[has]]]
    return out


#: TensorFlow ops that decode or parse stored data into tensors (images, audio, CSV rows,
#: ``tf.train.Example`` records) or read a file: what a ``tf.data`` map runs to make the
#: samples; run eagerly by the loop, they make its batch there.
_EAGER_DECODE = re.compile(
    r"^EagerLocalExecute: (Decode(Jpeg|AndCropJpeg|Png|Image|Bmp|Gif|Webp|Raw|CSV|Wav|"
    r"ProtoV2|Base64)|Parse(Single)?(Sequence)?Example(V2)?|ReadFile)$")


def eager_decoding(trace: Trace, main: int, idx: np.ndarray) -> tuple[np.ndarray, tuple]:
    """(the main thread's outermost slices in them, the intervals) in which the thread
    makes the compiled step's input eagerly:
    from the end of one call of the compiled step (:func:`compiled_step_calls`, with the
    call that encloses it, a ``tf.function``'s own span) to the start of the next, where the
    thread runs an eager decoding op (:data:`_EAGER_DECODE`) in between.  Files decoded,
    resized and scaled one by one in a Python loop, then stacked and passed to the
    compiled model: the ops and the Python between them make the batch the call consumes
    (what a ``tf.data`` map would run on its own threads), input work, not the model's
    per-op overhead."""
    z = np.zeros(0, np.int64)
    none = (z, (z, z.copy()))
    decode = trace.memo("host_side.eager_decode_ids",
                        lambda: trace.name_ids(_EAGER_DECODE.match))
    if not len(decode) or not len(idx):
        return none
    s = trace.slices
    ops = idx[np.isin(s.name[idx], decode)]
    calls = compiled_step_calls(trace, main)
    if not len(ops) or not len(calls):
        return none
    top = idx[s.depth[idx] == s.depth[idx].min()]
    top = top[np.argsort(s.start[top], kind="stable")]
    k = np.searchsorted(s.start[top], s.start[calls], side="right") - 1
    held = (k >= 0) & (s.end[top[np.maximum(k, 0)]] >= s.end[calls])
    lo = np.where(held, s.start[top[np.maximum(k, 0)]], s.start[calls]).astype(np.int64)
    hi = np.where(held, s.end[top[np.maximum(k, 0)]], s.end[calls]).astype(np.int64)
    begin = np.r_[int(s.start[idx].min()), hi[:-1]]
    w = np.searchsorted(lo, s.start[ops], side="left")  # the call each decoding op precedes
    ok = w < len(lo)
    w = np.unique(w[ok][s.start[ops[ok]] >= begin[w[ok]]])
    if not len(w):
        return none
    inside = covered(s.start[top], begin[w], lo[w])
    return top[inside].astype(np.int64), (begin[w], lo[w])


def _makes_argument(trace: Trace, idx: np.ndarray, conv: np.ndarray) -> np.ndarray:
    """Per conversion ``idx[conv]`` (``idx`` in start order): whether the first eager op
    the thread runs after it is one of :data:`_ARGUMENT_OPS` (the conversion is that op's
    axes or fill value)."""
    takes = trace.memo("host_side.argument_op_ids",
                       lambda: trace.name_ids(_ARGUMENT_OPS.match))
    return np.isin(_next_eager_op(trace, idx, conv), takes)


def _launched_bytes(trace: Trace, calls: np.ndarray, ws, we) -> np.ndarray:
    """Bytes of the device copies that ``calls`` launched (launch flows), per window."""
    f, s = trace.flows, trace.slices
    out = np.zeros(len(ws), np.int64)
    if not len(calls) or not len(f):
        return out
    launch = f.kind == 0
    hit = np.isin(f.src, calls) & launch & (s.kind[f.dst] == int(Kind.MEMCPY))
    src, dst = f.src[hit], f.dst[hit]
    w = window_of(s.start[src], ws, we)
    ok = w >= 0
    np.add.at(out, w[ok], np.maximum(s.bytes[dst[ok]], 0))
    return out


def _helper_lanes(trace: Trace, cpu: np.ndarray, main: int) -> list[int]:
    """Other traced threads of the main thread's process (autograd engine threads, a
    collective backend's threads, tf.data and runtime pools); sampled stacks of the same
    process are not (they would count its time twice)."""
    pid = trace.lanes.pid[main]
    sampled = R.sampled_lanes(trace)
    return [int(ln) for ln in cpu
            if ln != main and trace.lanes.pid[ln] == pid and not sampled[ln]]


def window_of(t: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Window index containing each time, or -1."""
    if len(ws) == 0:
        return np.full(len(t), -1, np.int64)
    w = np.searchsorted(ws, t, side="right") - 1
    ok = (w >= 0) & (t < we[np.maximum(w, 0)])
    return np.where(ok, w, -1)


register(HostBreakdown)  # result types the analysis cache may store
