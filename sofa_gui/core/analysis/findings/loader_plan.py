"""How many DataLoader workers a single-process loader should get on the cores the run has
free, how many intra-op threads its main process should keep, the step that leaves, and
whether any worker count helps at all.

Shares are of the BEFORE step as it runs without the profiler (1.0,
:class:`LoaderCosts`; :mod:`.loader_step` reads it): ``load`` the loading the
workers take over, ``rest`` everything else, ``paced`` the part of ``rest`` that runs on
the host's CPU (all of it on a CPU-only run; on a device run only the device's waits for
the host), ``recv`` what the main process spends receiving the step's batches from the
workers, ``send`` what the workers spend on them beyond the loading itself, ``slow`` how
much slower a core computes while another one is busy.  A worker's batch is paid on both
sides: the main process unpickles it, fetches one shared-memory descriptor per tensor
from the worker and faults its pages in; the worker collates into fresh shared memory,
pickles it and serves the descriptors (``recorder.calibrate.batch_handover`` measures
both).  With ``n`` workers on ``cores`` free cores (the main process's core included: a
main thread that waits for a batch leaves its core to the workers) the step is the
longest of

* the main process's own work: ``rest + (slow - 1) paced + recv``;
* one batch per worker turn: ``(slow * load + send) / n``;
* all of that CPU work spread over the free cores:
  ``(slow * paced + recv + slow * load + send) / (cores * turns)``, where ``turns`` is 1
  while the processes (main and workers) fit the cores and :data:`TURNS` once they
  outnumber them: they then take turns on the cores, and the hand-offs leave cores idle.

More workers than the model needs only add processes, so the plan is the fewest workers
whose step is within :data:`ENOUGH` of the best.  A plan whose step is not at least
:data:`HELPS` shorter than the BEFORE step promises nothing: no worker count helps on
this machine (a loop whose loading is cheap beside what each batch's hand-over costs, or
a machine without a core to spare), and the plan says so (``workers`` 0).  The workers'
mean use of the cores is ``(slow * load + send) / step``; the main process keeps the
cores they leave as intra-op threads (at least one): PyTorch's default of one thread per
core would oversubscribe them, and an OpenMP team whose threads share cores with busy
workers waits at every barrier (on a 2-core machine one worker beside a 2-thread main
process ran the step 1.5x slower than one worker beside a 1-thread one).  Fewer main
threads can make the main's own compute slower; that is not counted, and the basis says
so.  Not counted either: the main process's wait for a busy worker's GIL while it fetches
the descriptors (a thread of the worker serves them; a worker running Python lets it have
the GIL at CPython's switch interval: measured 5-8 ms per tensor beside one worker running
a Python tokenizer or collate, 1-2 ms beside numpy augmentation, which lets go of the GIL
inside its operations); the trace does not tell the two kinds of loading apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: A plan with more workers must beat the fewer-worker one by more than this.
ENOUGH = 0.02
#: A worker count helps when the model's speed-up with it reaches this: smaller gains are
#: inside what the machine moves a loop with workers by (rounds of the same loop with two
#: workers on an idle 2-core machine part by 20-60%) and what the hand-over's cost varies.
HELPS = 1.10
#: The share of the free cores' time that does work while the loader's processes
#: outnumber the cores: measured 0.86-0.94 (the processes' CPU time over cores x wall)
#: with two workers beside the main process on an idle 2-core machine
#: (``pt_train_input_nw0`` of the diagnosis corpus); a stated assumption.
TURNS = 0.90


@dataclass(frozen=True)
class LoaderCosts:
    """A step's parts as shares of the BEFORE step (see the module docstring)."""

    load: float
    rest: float
    paced: float
    recv: float
    send: float
    slow: float


@dataclass(frozen=True)
class LoaderPlan:
    """``workers`` DataLoader workers (0: none helps), ``main_threads`` intra-op threads
    of the main process, ``best`` the worker count the model gives the shortest step (even
    when it does not help), ``speedup`` the model's figure for it and ``limit`` what sets
    its step."""

    workers: int
    main_threads: int
    speedup: float
    limit: str
    best: int
    each: tuple[float, ...] = ()  # the model's speed-up with 1, 2, ... workers

    @property
    def helps(self) -> bool:
        return self.workers > 0

    def figures(self) -> str:
        """"1 worker 0.95x, 2 workers 1.12x": what the model gives each count."""
        return ", ".join(f"{n} worker{'s' if n != 1 else ''} {x:.2f}x"
                         for n, x in enumerate(self.each, 1))

    def settings(self) -> dict[str, int]:
        if not self.helps:
            return {"num_workers": 0}
        return {"num_workers": self.workers, "main_threads": self.main_threads}


def step_with(n: int, c: LoaderCosts, cores: float) -> tuple[float, str]:
    """(step share with ``n`` workers, what limits it); see the module docstring."""
    batch = c.slow * c.load + c.send
    turns = 1.0 if n + 1 <= cores + 1e-9 else TURNS
    parts = (("the main process's own work", c.rest + (c.slow - 1.0) * c.paced + c.recv),
             ("the workers' loading", batch / n),
             ("the free cores",
              (c.slow * c.paced + c.recv + batch) / (max(cores, 1e-6) * turns)))
    limit, step = max(parts, key=lambda p: p[1])
    return step, limit


def plan(c: LoaderCosts, cores: float) -> LoaderPlan:
    """The fewest workers whose step is within :data:`ENOUGH` of the best on ``cores``
    free cores (1 .. the cores rounded up), and the main threads they leave; no workers
    when even that one's speed-up stays under :data:`HELPS`."""
    top = max(1, math.ceil(cores - 1e-9))
    steps = [step_with(n, c, cores) for n in range(1, top + 1)]
    best = min(s for s, _ in steps)
    n = next(i for i, (s, _) in enumerate(steps, 1) if s <= best * (1.0 + ENOUGH))
    step, limit = steps[n - 1]
    each = tuple(1.0 / max(s, 1e-9) for s, _ in steps)
    used = (c.slow * c.load + c.send) / max(step, 1e-9)
    threads = max(1, int(math.floor(cores - used + 0.5)))
    return LoaderPlan(n if each[n - 1] >= HELPS else 0, threads, each[n - 1], limit, n, each)
