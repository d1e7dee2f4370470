"""How much slower the work that stays after a host-side fix runs, by what kept it away
and for how long: the measurements behind the cold factors of
``sofa_gui/core/analysis/findings/host_estimate.py``.

    python benchmarks/corpus/rest_warmth.py [--away 0.3,1,2,4,8,16]

(on an idle machine, one intra-op thread).  Each piece of work (a small training step,
an MLP's inference, one matmul, a loop of tiny elementwise ops) runs again and again with
something in between: nothing, ``.item()`` reads of its result, a sleep, or a Python
busy-wait, each for the given milliseconds.  Printed per piece of work: its median time
with nothing in between and, per filler and length, how many times slower it ran.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import torch

F = torch.nn.functional


def train_step():
    """A small MLP's training step on 1536 rows (forward, backward, SGD)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(1536, 32), torch.randn(1536, 1)
    held = {}

    def run():
        out = model(x)
        F.mse_loss(out, y).backward()
        opt.step()
        opt.zero_grad()
        held["out"] = out.detach()
    return run, held


def inference():
    """An MLP's inference on 512 rows: mostly its two matmuls."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8)).eval()
    x, held = torch.randn(512, 128), {}

    def run():
        with torch.no_grad():
            held["out"] = model(x).softmax(1)
    return run, held


def matmul():
    a, b, held = torch.randn(512, 128), torch.randn(128, 256), {}

    def run():
        held["out"] = (a @ b)[:, :1]
    return run, held


def tiny_ops():
    """120 elementwise ops on 8 values: dispatch only."""
    a, held = torch.randn(8), {}

    def run():
        t = a
        for _ in range(60):
            t = t * 1.0001 + 0.0
        held["out"] = t.reshape(8, 1)
    return run, held


def reads(held: dict, ms: float) -> None:
    out, end, k = held["out"], time.perf_counter() + ms / 1e3, 0
    while time.perf_counter() < end:
        out[k % out.shape[0], 0].item()
        k += 1


def sleep(held: dict, ms: float) -> None:
    time.sleep(ms / 1e3)


def busy(held: dict, ms: float) -> None:
    end, x = time.perf_counter() + ms / 1e3, 0
    while time.perf_counter() < end:
        x += 1


WORK = {"train_step": train_step, "inference": inference, "matmul": matmul,
        "tiny_ops": tiny_ops}
FILLERS = {"reads": reads, "sleep": sleep, "busy": busy}


def median_ms(work: str, filler, ms: float, min_s: float = 0.4) -> float:
    """Median time of ``work`` run again and again with ``filler`` for ``ms`` between."""
    run, held = WORK[work]()
    for _ in range(5):
        run()
        filler(held, ms)
    gc.collect()
    times, t0 = [], time.perf_counter()
    while (time.perf_counter() - t0 < min_s or len(times) < 20) and len(times) < 2000:
        a = time.perf_counter()
        run()
        times.append(time.perf_counter() - a)
        filler(held, ms)
    return statistics.median(times) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--away", default="0.3,1,2,4,8,16", help="ms between two runs")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    away = [float(x) for x in args.away.split(",")]
    for work in WORK:
        base = median_ms(work, lambda held, ms: None, 0.0)
        cells = [f"{name}{ms:g}={median_ms(work, fill, ms) / base:.2f}"
                 for name, fill in FILLERS.items() for ms in away]
        print(f"{work:<11} {base:.3f} ms  " + "  ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
