"""What a model's forward and backward cost when called under ``torch.func.vmap`` of
``functional_call`` on stacked parameters, over the same calls run eagerly: the
measurement behind ``STACKED_CALL_COST`` of
``sofa_gui/core/analysis/findings/chained_calls.py``.

    python benchmarks/corpus/stacked_cost.py [--copies 1,8]

(on an idle machine, one intra-op thread).  For each small model, its forward and backward
on one batch run eagerly, then on its parameters stacked for ``--copies`` models
(``torch.func.stack_module_state``) with one ``vmap`` of ``functional_call`` and one
backward.  Printed per model: the eager call's median time and, per number of copies, the
stacked call's and how many times the eager one's it takes.  The stacked call for one copy
is the per-call cost of the stacking itself: 2.6x on the two small MLPs, whose calls are
mostly their fixed cost, 1.0-1.8x on a small conv net and a wider MLP, whose calls hold
more math.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap


def models():
    """(name, a function making the model, the input's shape)."""
    yield ("MLP 20-64-64-1, batch 32",
           lambda: nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                 nn.Linear(64, 1)), (32, 20))
    yield ("MLP of six 32-wide tanh layers, batch 16",
           lambda: nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(32, 32), nn.Tanh())],
                                 nn.Linear(32, 1)), (16, 32))
    yield ("MLP 784-128-128-10, batch 64",
           lambda: nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 128),
                                 nn.ReLU(), nn.Linear(128, 10)), (64, 784))
    yield ("conv net 1-8-8 channels on 16x16, batch 16",
           lambda: nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(),
                                 nn.Flatten(), nn.Linear(8 * 12 * 12, 10)), (16, 1, 16, 16))


def median_us(fn, n: int = 60) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def eager(make, x):
    model = make()

    def run():
        model(x).pow(2).mean().backward()
        model.zero_grad()
    return run


def stacked(make, x, copies: int):
    params, _ = stack_module_state([make() for _ in range(copies)])
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    base = make().to("meta")
    call = vmap(lambda p, xb: functional_call(base, p, (xb,)), in_dims=(0, None))

    def run():
        out = call(params, x)
        out.pow(2).mean(dim=tuple(range(1, out.dim()))).sum().backward()
        for p in params.values():
            p.grad = None
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", default="1,8")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for name, make, shape in models():
        x = torch.randn(*shape)
        base = median_us(eager(make, x))
        cells = []
        for k in (int(c) for c in args.copies.split(",")):
            t = median_us(stacked(make, x, k))
            cells.append(f"{k} stacked {t:.0f} µs ({t / base:.2f}x)")
        print(f"{name}: eager {base:.0f} µs; " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
