"""How many DataLoader workers a single-process loader should get on the cores the run has
free, how many intra-op threads its main process should keep, and the step that leaves.

Shares are of the BEFORE step (1.0): ``load`` the loading the workers take over, ``rest``
everything else, ``paced`` the part of ``rest`` that runs on the host's CPU (all of it on
a CPU-only run; on a device run only the device's waits for the host), ``hand`` what the
main process spends receiving each batch from a worker, ``slow`` how much slower a core
computes while another one is busy. With ``n`` workers on ``cores`` free cores (the
main process's core included: a main thread that waits for a batch leaves its core to
the workers) the step is the longest of

* the main process's own work: ``rest + (slow - 1) paced + hand``;
* one batch per worker turn: each batch costs a worker ``slow * load + hand`` (it loads
  beside busy cores and sends what the main process receives), ``n`` workers share them;
* all of that CPU work spread over the free cores:
  ``(slow * paced + hand + slow * load + hand) / cores``. Both sides of the hand-over
  are CPU work (measured by the processes' CPU time: a worker spends about as much more
  per batch than in-process loading as the main process spends receiving it).

More workers than the model needs only add processes, so the plan is the fewest workers
whose step is within :data:`ENOUGH` of the best. The workers' mean use of the cores is
``(slow * load + hand) / step``; the main process keeps the cores they leave as intra-op
threads (at least one): PyTorch's default of one thread per core would oversubscribe
them, and an OpenMP team whose threads share cores with busy workers waits at every
barrier (on a 2-core machine one worker beside a 2-thread main process ran the step
1.5x slower than one worker beside a 1-thread one). Fewer main threads can make the
main's own compute slower; that is not counted, and the basis says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: A plan with more workers must beat the fewer-worker one by more than this.
ENOUGH = 0.02


@dataclass(frozen=True)
class LoaderPlan:
    """``workers`` DataLoader workers, ``main_threads`` intra-op threads of the main
    process, the ``speedup`` the model gives them and the ``limit`` that sets the step."""

    workers: int
    main_threads: int
    speedup: float
    limit: str

    def settings(self) -> dict[str, int]:
        return {"num_workers": self.workers, "main_threads": self.main_threads}


def step_with(n: int, load: float, rest: float, paced: float, hand: float, slow: float,
              cores: float) -> tuple[float, str]:
    """(step share with ``n`` workers, what limits it); see the module docstring."""
    batch = slow * load + hand
    parts = (("the main process's own work", rest + (slow - 1.0) * paced + hand),
             ("the workers' loading", batch / n),
             ("the free cores", (slow * paced + hand + batch) / max(cores, 1e-6)))
    limit, step = max(parts, key=lambda p: p[1])
    return step, limit


def plan(load: float, rest: float, paced: float, hand: float, slow: float,
         cores: float) -> LoaderPlan:
    """The fewest workers whose step is within :data:`ENOUGH` of the best on ``cores``
    free cores (1 .. the cores rounded up), and the main threads they leave."""
    top = max(1, math.ceil(cores - 1e-9))
    steps = [step_with(n, load, rest, paced, hand, slow, cores) for n in range(1, top + 1)]
    best = min(s for s, _ in steps)
    n = next(i for i, (s, _) in enumerate(steps, 1) if s <= best * (1.0 + ENOUGH))
    step, limit = steps[n - 1]
    used = (slow * load + hand) / max(step, 1e-9)
    threads = max(1, int(math.floor(cores - used + 0.5)))
    return LoaderPlan(n, threads, 1.0 / max(step, 1e-9), limit)
