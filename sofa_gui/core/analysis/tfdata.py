"""tf.data input-pipeline analysis: how long each step waits for input, and which stage
of the pipeline makes it wait.

TensorFlow records every ``GetNext`` of every dataset iterator as an event named
``Iterator::<Kind>`` (``Iterator::Prefetch``, ``Iterator::MapAndBatch``,
``Iterator::Generator``...) with stats ``id`` and ``parent_id`` (the consumer's id),
``name`` (the dataset op, e.g. ``ParallelMapDatasetV2:10``), ``parallelism``,
``autotune``, ``buffer_limit``. From those:

* the **stage tree** (ids and parent ids), each stage with its events' total time and
  its **own time**: the time not spent inside a nested child stage's ``GetNext`` on
  the same thread. For an asynchronous stage (prefetch, parallel map) the own time is
  how long its consumer blocked on its buffer;
* the **bottleneck**: of the stages holding at least half of the largest own time, the
  deepest (a prefetch that waits is a symptom, the producer under it the cause);
* whether the pipeline **prefetches**, **caches**, runs in **parallel**, and whether
  its elements come from **Python** (``from_generator``, or ``PyFunc``/``EagerPyFunc``
  ops of ``py_function`` / ``numpy_function``), which the GIL keeps to one core;
* per iteration, the **input wait**: the time the main thread spends inside
  ``IteratorGetNext`` or in a step function while another thread of its process runs
  it (``IteratorGetNextOp::DoCompute`` under Keras' ``multi_step_on_iterator``).

This follows the TensorFlow profiler's own tf.data bottleneck analysis (the iterator
with the longest self time on the blocking path) with a simpler, stated rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..trace import Trace
from ..units import fmt_ns
from .codec import register
from .intervals import measure_in, union
from .results import us

ITERATOR_PREFIX = "Iterator::"
#: Stages within this fraction of the largest own time compete for "bottleneck"; the
#: deepest of them wins.
BOTTLENECK_FRACTION = 0.5
#: At most this many iterator events are decoded (their stats give the stage ids).
MAX_EVENTS = 500_000

_PYFUNC = re.compile(r"^(PyFunc|EagerPyFunc|PyFuncStateless)$")
_GET_NEXT = re.compile(r"IteratorGetNext")
_PARALLEL_NAME = re.compile(r"Parallel(Map|Interleave|Batch)|ParallelMap|MapAndBatch", re.I)
_PREFETCH = re.compile(r"^Prefetch", re.I)
_CACHE = re.compile(r"Cache", re.I)
_MAP_LIKE = re.compile(r"Map|Interleave|Batch|Generator|FlatMap", re.I)
#: Stages that ``num_parallel_calls`` parallelises (``map``, ``interleave``; a map fused
#: with its batch).
_PARALLELISABLE = re.compile(r"^(Map|MapAndBatch|Interleave)$")


@dataclass
class Stage:
    """One dataset iterator of the pipeline."""

    id: int
    parent: int | None
    kind: str  # "Prefetch", "MapAndBatch", "Generator", ... (after "Iterator::")
    dataset: str  # the dataset op, e.g. "ParallelMapDatasetV2:10"
    count: int = 0
    total_ns: int = 0
    own_ns: int = 0
    lanes: set = field(default_factory=set)
    first: int = -1  # a clickable event (its longest)
    stats: dict = field(default_factory=dict)
    depth: int = 0
    children: list = field(default_factory=list)

    @property
    def parallelism(self) -> int | None:
        p = self.stats.get("parallelism")
        return p if isinstance(p, int) and not isinstance(p, bool) else None

    @property
    def parallel(self) -> bool:
        p = self.parallelism
        if p is not None:
            return p > 1 or p == -1
        return bool(_PARALLEL_NAME.search(self.dataset)) and "MapAndBatch" not in self.kind

    @property
    def python(self) -> bool:
        return self.kind == "Generator" or "GeneratorDataset" in self.dataset

    @property
    def asynchronous(self) -> bool:
        """A stage whose elements another thread makes (prefetch, parallel, map-and-batch):
        its own time is how long its consumer waited on its buffer, not work."""
        return bool(_PREFETCH.match(self.kind)) or "MapAndBatch" in self.kind or self.parallel

    @property
    def label(self) -> str:
        what = self.kind
        if self.python:
            what += " (from_generator: Python)"
        elif self.parallelism is not None:
            auto = self.stats.get("autotune") in ("true", True)
            what += f" (parallelism {'autotuned, ' if auto else ''}{self.parallelism})"
        return what

    def to_dict(self) -> dict:
        return {"id": str(self.id), "parent": None if self.parent is None else str(self.parent),
                "stage": self.kind, "dataset": self.dataset, "depth": self.depth,
                "events": self.count, "total_us": us(self.total_ns), "own_us": us(self.own_ns),
                "parallelism": self.parallelism, "parallel": self.parallel,
                "python": self.python, "lanes": sorted(self.lanes)}


@dataclass
class InputPipeline:
    """The tf.data pipeline of a run and how much it holds the steps up."""

    stages: dict[int, Stage]
    roots: list[int]
    bottleneck: int | None
    prefetch: bool
    injected_prefetch: bool  # the only prefetch is tf.data's automatic one
    cache: bool
    parallel: bool
    python: str  # "" or what runs Python: "from_generator", "py_function/numpy_function"
    python_ns: int  # time in PyFunc ops on tf.data threads
    worker_busy_ns: int  # time tf.data worker threads spend in work (top-level events)
    worker_threads: int  # threads of tf.data's private pool
    wait_ns: np.ndarray  # per iteration: main-thread time in IteratorGetNext
    iter_ns: np.ndarray  # per iteration: wall time
    cpu_budget: int | None = None  # tf.data's CPU budget (cores it may use)

    def ordered(self) -> list[Stage]:
        """Stages root first, depth-first (the order of the tree view)."""
        out = []

        def walk(i):
            out.append(self.stages[i])
            for c in sorted(self.stages[i].children, key=lambda c: self.stages[c].kind):
                walk(c)
        for r in self.roots:
            walk(r)
        return out

    @property
    def wait_share(self) -> float:
        total = float(self.iter_ns.sum())
        return float(self.wait_ns.sum()) / total if total else 0.0

    @property
    def asynchronous(self) -> bool:
        """Whether elements are made beside the consumer (a prefetch, a parallel or fused
        map-and-batch stage, or map functions on tf.data's own threads)."""
        return any(st.asynchronous for st in self.stages.values()) or self.worker_busy_ns > 0

    @property
    def work_ns(self) -> int:
        """Time the pipeline spends making elements: the own time of its synchronous
        stages (an asynchronous stage's own time is its consumer blocked on the buffer)
        plus its worker threads' work.  A wait longer than this is not input work: the
        thread that makes the elements did not get a core (CPU contention)."""
        sync = sum(st.own_ns for st in self.stages.values()
                   if not st.asynchronous and st.kind != "Root")
        return int(sync + self.worker_busy_ns)

    @property
    def explained(self) -> float:
        """Fraction of the main thread's wait the pipeline's work can account for (0..1)."""
        wait = float(self.wait_ns.sum())
        return min(self.work_ns / wait, 1.0) if wait > 0 else 1.0

    @property
    def bottleneck_stage(self) -> Stage | None:
        return None if self.bottleneck is None else self.stages[self.bottleneck]

    @property
    def serial_map(self) -> Stage | None:
        """The bottleneck stage where it is a ``map`` or ``interleave`` of dataset ops that
        runs serially, whatever else runs in parallel: one branch of a ``zip`` mapped
        without ``num_parallel_calls`` (tf.data's own map parallelisation leaves a map
        with a stateful op serial: a random flip) makes every element wait for it, one at
        a time, though the other branches' maps run in parallel."""
        b = self.bottleneck_stage
        if b is None or b.parallel or b.python or not _PARALLELISABLE.match(b.kind):
            return None
        return b

    def state(self) -> str:
        """Where the pipeline stands on the study's ladder, in words."""
        slow = self.serial_map
        parts = ["Python input (" + self.python + ")" if self.python else "tf.data ops",
                 ("parallel" if slow is None else f"parallel but its slowest stage serial "
                  f"({slow.kind})") if self.parallel else "serial",
                 ("prefetch (inserted by tf.data)" if self.injected_prefetch else "prefetch")
                 if self.prefetch else "no prefetch",
                 "cache" if self.cache else "no cache"]
        return ", ".join(parts)

    def sentence(self) -> str:
        """One line for findings: the pipeline and its bottleneck stage."""
        b = self.bottleneck_stage
        text = f"tf.data pipeline: {self.state()}."
        if b is not None:
            text += (f" Bottleneck stage: {b.label} ({b.dataset}), {fmt_ns(b.own_ns)} of own "
                     f"time in {b.count} GetNext calls.")
        if self.worker_threads:
            text += (f" Its {self.worker_threads} worker thread"
                     f"{'s' if self.worker_threads > 1 else ''} kept {self.cores_used:.1f} "
                     f"cores busy on average")
            text += (f" (tf.data's CPU budget: {self.cpu_budget})." if self.cpu_budget
                     else ".")
        return text

    @property
    def cores_used(self) -> float:
        """Average number of cores the tf.data worker threads kept busy."""
        span = float(self.iter_ns.sum())
        return self.worker_busy_ns / span if span else 0.0

    def to_dict(self) -> dict:
        b = self.bottleneck_stage
        return {
            "state": self.state(), "prefetch": self.prefetch,
            "injected_prefetch": self.injected_prefetch, "cache": self.cache,
            "parallel": self.parallel, "python": self.python or None,
            "python_us": us(self.python_ns), "cpu_budget": self.cpu_budget,
            "worker_threads": self.worker_threads, "worker_busy_us": us(self.worker_busy_ns),
            "worker_cores_used": round(self.cores_used, 3),
            "bottleneck": None if b is None else {"stage": b.kind, "dataset": b.dataset,
                                                  "own_us": us(b.own_ns), "python": b.python},
            "wait_share": round(self.wait_share, 4),
            "wait_us": [us(int(x)) for x in self.wait_ns],
            "stages": [s.to_dict() for s in self.ordered()],
            "summary": self.sentence(),
        }


def iterator_slices(trace: Trace) -> np.ndarray:
    ids = trace.name_ids(lambda n: n.startswith(ITERATOR_PREFIX))
    if not len(ids):
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.isin(trace.slices.name, ids))


def analyze_input_pipeline(trace: Trace, starts=None, ends=None,
                           main_lane: int | None = None) -> InputPipeline | None:
    """The tf.data pipeline seen in ``trace`` within the iteration windows (the whole trace
    when none); None when the trace has no ``Iterator::`` events."""
    cache = trace.memo("tfdata", dict)
    key = (None if starts is None else (np.asarray(starts, np.int64).tobytes(),
                                        np.asarray(ends, np.int64).tobytes()), main_lane)
    if key not in cache:
        cache[key] = _analyze(trace, starts, ends, main_lane)
    return cache[key]


def _analyze(trace: Trace, starts, ends, main_lane) -> InputPipeline | None:
    idx = iterator_slices(trace)
    if not len(idx):
        return None
    s = trace.slices
    if starts is None or not len(starts):
        starts = np.array([trace.start_ns], np.int64)
        ends = np.array([trace.end_ns], np.int64)
    lo, hi = int(starts[0]), int(ends[-1])
    inside = idx[(s.start[idx] >= lo) & (s.start[idx] < hi)]
    stages = _stages(trace, inside[:MAX_EVENTS])
    if not stages:
        return None
    roots = _link(stages)
    own_max = max(st.own_ns for st in stages.values())
    cands = [st for st in stages.values() if st.own_ns >= BOTTLENECK_FRACTION * own_max > 0]
    best = max(cands, key=lambda st: (st.depth, st.own_ns)) if cands else None
    prefetches = [st for st in stages.values() if _PREFETCH.match(st.kind)]
    pyfunc_ns, busy_ns, threads = _worker_time(trace, lo, hi)
    python = ("from_generator" if any(st.python for st in stages.values())
              else "py_function/numpy_function" if pyfunc_ns else "")
    wait, wall = _input_wait(trace, starts, ends, main_lane)
    root_stats = next((st.stats for st in stages.values() if st.kind == "Root"), {})
    budget = root_stats.get("cpu_budget")
    return InputPipeline(
        stages=stages, roots=roots, bottleneck=None if best is None else best.id,
        prefetch=bool(prefetches),
        injected_prefetch=bool(prefetches) and all(
            st.dataset.startswith("inject/prefetch") for st in prefetches),
        cache=any(_CACHE.search(st.kind) or _CACHE.search(st.dataset)
                  for st in stages.values()),
        parallel=any(st.parallel for st in stages.values() if _MAP_LIKE.search(st.kind)),
        python=python, python_ns=pyfunc_ns, worker_busy_ns=busy_ns, worker_threads=threads,
        wait_ns=wait, iter_ns=wall,
        cpu_budget=budget if isinstance(budget, int) and budget > 0 else None)


def _stages(trace: Trace, idx: np.ndarray) -> dict[int, Stage]:
    """Stages by iterator id, with counts, total and own time (nested child GetNext
    calls on the same thread subtracted)."""
    s = trace.slices
    stages: dict[int, Stage] = {}
    of_slice = {}
    for j in idx.tolist():
        a = trace.args.get(int(s.args[j]))
        sid = a.get("id")
        if not isinstance(sid, int):
            continue
        st = stages.get(sid)
        if st is None:
            parent = a.get("parent_id")
            st = stages[sid] = Stage(
                sid, parent if isinstance(parent, int) else None,
                trace.name_of(j)[len(ITERATOR_PREFIX):], str(a.get("name", "")),
                stats=a)
        st.count += 1
        dur = int(s.dur[j])
        st.total_ns += dur
        st.own_ns += dur
        st.lanes.add(int(s.lane[j]))
        if st.first < 0 or dur > int(s.dur[st.first]):
            st.first = j
        of_slice[j] = st
    _subtract_nested(trace, of_slice)
    return _merge_repeats(stages)


def _merge_repeats(stages: dict[int, Stage]) -> dict[int, Stage]:
    """One stage per place in the pipeline: ``repeat()`` and ``flat_map`` make a new
    iterator (a new id) for their input each epoch or element; those are merged by
    (merged parent, kind, dataset)."""
    key_of: dict[int, tuple] = {}

    def key(i: int, hops: int = 0) -> tuple:
        if i not in key_of:
            st = stages[i]
            up = key(st.parent, hops + 1) if st.parent in stages and hops < 64 else None
            key_of[i] = (up, st.kind, st.dataset)
        return key_of[i]
    merged: dict[tuple, Stage] = {}
    for i, st in stages.items():
        m = merged.get(key(i))
        if m is None:
            merged[key(i)] = st
            continue
        m.count += st.count
        m.total_ns += st.total_ns
        m.own_ns += st.own_ns
        m.lanes |= st.lanes
        if st.total_ns and (m.first < 0 or st.total_ns > m.total_ns):
            m.first = st.first
    canon = {k: st.id for k, st in merged.items()}
    out = {}
    for st in merged.values():
        if st.parent in stages:
            st.parent = canon[key(st.parent)]
        out[st.id] = st
    return out


def _subtract_nested(trace: Trace, of_slice: dict) -> None:
    """Each iterator event's time inside its nearest enclosing iterator event (same lane)
    is not the enclosing stage's own time."""
    s = trace.slices
    by_lane: dict[int, list[int]] = {}
    for j in of_slice:
        by_lane.setdefault(int(s.lane[j]), []).append(j)
    for js in by_lane.values():
        js.sort(key=lambda j: (int(s.start[j]), -int(s.dur[j])))
        stack: list[int] = []
        for j in js:
            while stack and int(s.end[stack[-1]]) <= int(s.start[j]):
                stack.pop()
            if stack:
                parent = of_slice[stack[-1]]
                parent.own_ns -= int(s.dur[j])
            stack.append(j)
    for st in {id(st): st for st in of_slice.values()}.values():
        st.own_ns = max(st.own_ns, 0)


def _link(stages: dict[int, Stage]) -> list[int]:
    """Children lists and depths from parent ids; the roots (no known parent)."""
    roots = []
    for st in stages.values():
        if st.parent in stages:
            stages[st.parent].children.append(st.id)
        else:
            roots.append(st.id)
    roots.sort(key=lambda i: -stages[i].total_ns)
    todo = [(r, 0) for r in roots]
    seen = set()
    while todo:
        i, d = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        stages[i].depth = d
        todo.extend((c, d + 1) for c in stages[i].children)
    return roots


def pyfunc_ids(trace: Trace) -> np.ndarray:
    """Name ids of the ops that run a map's Python (``py_function`` / ``numpy_function``)."""
    return trace.memo("tfdata.pyfunc_ids", lambda: trace.name_ids(_PYFUNC.match))


def tf_data_lanes(trace: Trace, workers_only: bool = False) -> np.ndarray:
    """Lanes of tf.data threads; ``workers_only``: those of its private thread pool, which
    run the map functions (the iterator threads mostly wait on them)."""
    prefix = "tf_data_private_threadpool" if workers_only else "tf_data"
    return np.flatnonzero([n.startswith(prefix) for n in trace.lanes.name])


def _worker_time(trace: Trace, lo: int, hi: int) -> tuple[int, int, int]:
    """(ns in PyFunc ops, ns of top-level work, thread count) on tf.data worker threads."""
    s = trace.slices
    lanes = tf_data_lanes(trace, workers_only=True)
    if not len(lanes):
        return 0, 0, 0
    sel = np.flatnonzero(np.isin(s.lane, lanes) & (s.start >= lo) & (s.start < hi))
    py = pyfunc_ids(trace)
    pyfunc = int(s.dur[sel[np.isin(s.name[sel], py)]].sum()) if len(py) else 0
    top = sel[(s.depth[sel] == 0) & (s.dur[sel] > 0)]
    busy = 0
    for lane in np.unique(s.lane[top]).tolist():
        mine = top[s.lane[top] == lane]
        a, b = union(s.start[mine], s.end[mine])
        busy += int((b - a).sum())
    return pyfunc, busy, len(lanes)


def _input_wait(trace: Trace, starts, ends, main_lane) -> tuple[np.ndarray, np.ndarray]:
    """Per window: the time the main thread waits in IteratorGetNext calls (its own, or
    those another thread of its process runs for its step), and the wall."""
    ws, we = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    wall = we - ws
    s = trace.slices
    ids = trace.name_ids(_GET_NEXT.search)
    if main_lane is None or not len(ids):
        return np.zeros(len(ws), np.int64), wall
    lanes = np.flatnonzero(trace.lanes.pid == trace.lanes.pid[main_lane])
    mine = np.flatnonzero(np.isin(s.name, ids) & np.isin(s.lane, lanes))
    a, b = union(s.start[mine], s.end[mine])
    return measure_in(a, b, ws, we).astype(np.int64), wall


register(InputPipeline, Stage)  # result types the analysis cache may store
