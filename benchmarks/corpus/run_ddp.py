"""DistributedDataParallel cases of the diagnosis corpus: 2 CPU ranks over gloo.

    nice python benchmarks/corpus/run_ddp.py [--only CASE ...]

Two processes (``torch.multiprocessing.spawn``), one rank each, a DDP-wrapped MLP with
SGD.  Per capture each rank writes its own ``torch.profiler`` trace,
``tests/data/corpus/<case>/capture-K/rankR.json.gz`` (the profiler records the process
group as ``distributedInfo``).  Truth is measured without the profiler on every rank in
lockstep (``benchmarks/corpus/common.py``: every rank runs the step count the ranks
agree on, enough for each round to last ``ROUND_S``): rank 0's figures are the case's,
rank 1's are kept under ``ranks``.  In the straggler case rank 1 prepares its batches
with slow Python work outside the framework's ops, about as long as the balanced step;
the others wait for it in DDP's gloo all-reduce.  The communication share is what the
same loop without DDP (``bare``: no collective) saves on rank 0; in the straggler case
the balanced run is the fix.  In the uneven-lengths case the straggler is made by
the data: rank 1 gets the long sequences of a length-bucketed split, and the fix is the
same sequences shuffled across the ranks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

F = torch.nn.functional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gen_torch_loops import D_IN, mlp, train_step  # noqa: E402

from corpus import (  # noqa: E402
    ddp_cases_blind,
    ddp_cases_field,
    ddp_cases_hooks,
    ddp_cases_models,
    ddp_cases_parallel,
    ddp_cases_sync,
    ddp_cases_wild,
)
from corpus.common import CASES, CLOCK, CORPUS, case, measure, report_line, write_truth  # noqa: E402
from corpus.run_torch import capture  # noqa: E402

WORLD = 2
#: Rank 1's slow batch preparation in the straggler case, ms per step: about the balanced
#: step (tens of ms of forward, backward and all-reduce), so the measured fix is a ratio of
#: two steps the machine's noise does not dominate.
STRAGGLE_MS = 30.0
DDP_FACTS = {"framework": "pytorch", "device": "cpu", "mode": "training", "ranks": WORLD,
             "collectives": "gloo", "optimizer": "sgd"}


def slow_input(ms: float, rng) -> None:
    """Python/numpy work standing in for a slow decoder on one rank."""
    t_end = time.perf_counter() + ms / 1e3
    a = rng.standard_normal(4096).astype(np.float32)
    while time.perf_counter() < t_end:
        a = np.sort(a) * 0.999


def deep_mlp(width: int, hidden: int) -> torch.nn.Module:
    """``hidden`` ReLU layers of ``width`` units over the input features, one output."""
    layers = [torch.nn.Linear(D_IN, width), torch.nn.ReLU()]
    for _ in range(hidden - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


#: Each MLP case's model and batch size.
MODELS = {"pt_ddp_gloo_straggler": (lambda: deep_mlp(1024, 3), 128),
          "pt_ddp_gloo_balanced": (lambda: mlp(1024), 64)}


def ddp_loop(name: str, straggle_ms: float, wrap: bool = True):
    """Case ``name``'s loop; ``wrap=False`` is the same work without DDP (no collective at
    all)."""
    torch.manual_seed(0)
    build, batch = MODELS[name]
    model = DDP(build()) if wrap else build()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rng = np.random.default_rng(dist.get_rank())
    slow = straggle_ms if dist.get_rank() == 1 else 0.0

    def step(i):
        with CLOCK("input"):
            x, y = torch.randn(batch, D_IN), torch.randn(batch, 1)
            if slow:
                slow_input(slow, rng)
        train_step(model, opt, x, y)
    return step


@case("pt_ddp_gloo_straggler", "pytorch", "training", 12, DDP_FACTS,
      fix="balance rank 1's input (no straggler)", share_from_fix="communication",
      share_variant="bare", tags=["ddp", "gloo", "straggler"])
def pt_ddp_gloo_straggler(variant):
    """DDP over gloo on 2 CPU ranks training an MLP (3 hidden layers of 1024, batch 128,
    tens of ms a step); rank 1 spends about as long again making its batch in Python, so
    rank 0 waits for it in the gradient all-reduce every step."""
    return ddp_loop("pt_ddp_gloo_straggler", 0.0 if variant == "fix" else STRAGGLE_MS,
                    wrap=variant != "bare")


@case("pt_ddp_gloo_balanced", "pytorch", "training", 12, DDP_FACTS, split="holdout",
      share_from_fix="communication", share_variant="bare", tags=["ddp", "gloo"])
def pt_ddp_gloo_balanced(variant):
    """DDP over gloo on 2 CPU ranks with the same work on both (an MLP of 1024 hidden
    units, batch 64): no straggler; on an idle machine the all-reduce of its 1 MB of
    gradients takes about as long as its forward and backward."""
    return ddp_loop("pt_ddp_gloo_balanced", 0.0, wrap=variant != "bare")


def seq_model() -> torch.nn.Module:
    """A transformer encoder layer over token features, mean-pooled, a linear head."""
    return torch.nn.Sequential(torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True),
                               MeanPool(), torch.nn.Linear(64, 1))


class MeanPool(torch.nn.Module):
    def forward(self, x):
        return x.mean(1)


#: Sequence lengths per rank: sorted by length and split in two contiguous halves, rank 1
#: gets the long ones; shuffled before the split, both ranks get the mean length.
LENGTHS = {"run": (32, 160), "fix": (96, 96), "bare": (32, 160)}


def seq_loop(variant: str):
    """16 sequences per rank and step, of the length :data:`LENGTHS` gives the rank."""
    torch.manual_seed(0)
    net = seq_model()
    model = net if variant == "bare" else DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    length = LENGTHS[variant][dist.get_rank()]
    g = torch.Generator().manual_seed(dist.get_rank())
    data = [(torch.randn(16, length, 64, generator=g), torch.randn(16, 1, generator=g))
            for _ in range(4)]

    def step(i):
        with CLOCK("input"):
            x, y = data[i % 4]
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


@case("pt_ddp_gloo_uneven_lengths", "pytorch", "training", 6,
      {**DDP_FACTS, "optimizer": "adam"}, split="holdout",
      fix="shuffle the lengths across ranks (both ranks the same token count)",
      share_from_fix="communication", share_variant="bare",
      tags=["ddp", "gloo", "straggler", "variable_length"])
def pt_ddp_gloo_uneven_lengths(variant):
    """DDP over gloo on 2 CPU ranks training a transformer encoder layer on sequences
    bucketed by length and split between the ranks unshuffled: rank 0 gets 16 sequences
    of 32 tokens a step, rank 1 16 of 160, so rank 0 waits for rank 1 in the gradient
    all-reduce every step (a straggler made by the data, not by a slow loader)."""
    return seq_loop(variant)


# -- held-out cases written as users write them ----------------------------------------------
def wide_mlp(width: int = 512) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 10))


def accum_cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(32 * 16, 10))


def large_mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 10))


def class_batches(n: int, batch: int, shape: tuple[int, ...]) -> list:
    """``n`` batches of (inputs, class labels) of this rank's own data."""
    g = torch.Generator().manual_seed(dist.get_rank())
    return [(torch.randn(batch, *shape, generator=g),
             torch.randint(0, 10, (batch,), generator=g)) for _ in range(n)]


def ce_update(model, opt, x, y) -> None:
    """One cross-entropy step: forward, backward (DDP's all-reduce), optimizer."""
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


@case("pt_ddp_gloo_rank0_eval", "pytorch", "training", 10, DDP_FACTS, split="holdout",
      share_from_fix="communication", share_variant="bare",
      tags=["ddp", "gloo", "periodic_eval", "rank0_only"])
def pt_ddp_gloo_rank0_eval(variant):
    """DDP over gloo on 2 CPU ranks training a 3-layer MLP classifier on batches of 512;
    after every 5th step rank 0 alone evaluates the unwrapped model on 4 validation
    batches of 512 (as ``if rank == 0: evaluate(model.module)`` is written), and rank 1
    waits for it in the next step's gradient all-reduce."""
    torch.manual_seed(0)
    net = wide_mlp()
    model = net if variant == "bare" else DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = class_batches(8, 512, (256,))
    data, val = batches[:4], batches[4:]

    def step(i):
        ce_update(model, opt, *data[i % 4])
        if dist.get_rank() == 0 and i % 5 == 4:
            with CLOCK("periodic"):
                net.eval()
                with torch.no_grad():
                    acc = [float((net(vx).argmax(1) == vy).float().mean()) for vx, vy in val]
                net.train()
                return acc
        return None
    return step


@case("pt_ddp_gloo_no_sync_accum", "pytorch", "training", 6,
      {**DDP_FACTS, "optimizer": "adam"}, split="holdout",
      share_from_fix="communication", share_variant="bare",
      tags=["ddp", "gloo", "grad_accum", "no_sync"])
def pt_ddp_gloo_no_sync_accum(variant):
    """DDP over gloo on 2 CPU ranks training a small CNN with gradient accumulation: 4
    micro-batches of 16 images per optimizer step, the first 3 under ``model.no_sync()``
    so the gradients are all-reduced once per step: compute-bound."""
    torch.manual_seed(0)
    net = accum_cnn()
    model = net if variant == "bare" else DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    micro = class_batches(8, 16, (3, 32, 32))

    def step(i):
        for k in range(4):
            x, y = micro[(4 * i + k) % 8]
            ctx = model.no_sync() if k < 3 and variant != "bare" else contextlib.nullcontext()
            with ctx:
                (F.cross_entropy(model(x), y) / 4).backward()
        opt.step()
        opt.zero_grad()
    return step


@case("pt_ddp_gloo_large_allreduce", "pytorch", "training", 5, DDP_FACTS, split="tuned",
      share_from_fix="communication", share_variant="bare",
      tags=["ddp", "gloo", "large_model"])
def pt_ddp_gloo_large_allreduce(variant):
    """DDP over gloo on 2 CPU ranks fine-tuning a wide MLP (about 21 M parameters, 84 MB
    of fp32 gradients) on small batches of 4: each step all-reduces the gradients
    in DDP's 25 MB buckets over TCP, a large share of a step whose compute is short."""
    torch.manual_seed(0)
    net = large_mlp()
    model = net if variant == "bare" else DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = class_batches(4, 4, (1024,))

    def step(i):
        ce_update(model, opt, *data[i % 4])
    return step


#: The model of each case that builds its own (for the all-reduce of its gradients alone).
OWN_MODELS = {"pt_ddp_gloo_rank0_eval": wide_mlp, "pt_ddp_gloo_no_sync_accum": accum_cnn,
          "pt_ddp_gloo_large_allreduce": large_mlp, **ddp_cases_blind.register(DDP_FACTS),
          **ddp_cases_wild.register(DDP_FACTS), **ddp_cases_field.register(DDP_FACTS),
          **ddp_cases_sync.register(DDP_FACTS), **ddp_cases_models.register(DDP_FACTS),
          **ddp_cases_parallel.register(DDP_FACTS),
          **ddp_cases_hooks.register(DDP_FACTS)}


def grad_numel(name: str) -> int:
    if name in OWN_MODELS:
        model = OWN_MODELS[name]()
    else:
        model = seq_model() if name in SEQ_CASES else MODELS[name][0]()
    return sum(p.numel() for p in model.parameters())


SEQ_CASES = ("pt_ddp_gloo_uneven_lengths",)


def allreduce_alone_ms(name: str, n: int = 10) -> float:
    """Median time of a gloo all-reduce of a buffer the size of the case's gradients."""
    buf = torch.zeros(grad_numel(name))
    times = []
    for _ in range(n):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        times.append(time.perf_counter() - t0)
    return round(sorted(times)[n // 2] * 1e3, 3)


def most_steps(n: int) -> int:
    """The step count every rank runs in a round: the most any rank asks for."""
    t = torch.tensor([n])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def worker(rank: int, names: list[str], captures: int, rounds: int, out: str, port: int):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    for name in names:
        c, t0 = CASES[name], time.perf_counter()
        # no captures asked: the case's captures stay as they are and truth.json lists them
        caps = sorted(p.name for p in (Path(out) / name).glob("capture-*")) if not captures else []
        for k in range(1, captures + 1):
            folder = Path(out) / name / f"capture-{k}"
            capture(c, folder / f"rank{rank}.json.gz")
            caps.append(folder.name)
        measured = measure(c, rounds, agree=most_steps)
        measured["allreduce_alone_ms"] = allreduce_alone_ms(name)
        got = [None] * WORLD
        dist.all_gather_object(got, measured)
        if rank == 0:
            measured["ranks"] = {str(r): {k: got[r][k] for k in ("step_ms", "phases_ms")}
                                 for r in range(WORLD)}
            write_truth(c, measured, caps, f"benchmarks/corpus/run_ddp.py --only {name}",
                        {"torch": torch.__version__, "backend": "gloo", "world": WORLD},
                        Path(out))
            print(report_line(c, measured, time.perf_counter() - t0), flush=True)
    dist.barrier()  # no rank leaves while another still talks to it
    dist.destroy_process_group()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [n for n in CASES if n.startswith("pt_ddp")]
    ap.add_argument("--only", nargs="*", choices=names)
    ap.add_argument("--captures", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=CORPUS)
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args(argv)
    mp.spawn(worker, args=(args.only or names, args.captures, args.rounds, str(args.out),
                           args.port), nprocs=WORLD)
    return 0


if __name__ == "__main__":
    sys.exit(main())
