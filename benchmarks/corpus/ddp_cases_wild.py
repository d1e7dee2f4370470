"""Held-out DDP cases written without looking at the advisor's rules (captured and measured
by ``run_ddp.py`` on 2 CPU ranks over gloo): an MLP whose gradients DDP compresses to fp16
with the ``fp16_compress_hook`` communication hook, and a small CNN wrapped with
``static_graph=True`` whose loop, as the ImageNet example writes it, waits at a
``dist.barrier()`` and all-reduces its loss and accuracy for the log, read with ``.item()``,
every step.

:func:`register` registers the cases with the DDP generator's facts and returns each
case's model builder (for the all-reduce of its gradients alone).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from corpus.common import case
from corpus.ddp_cases_blind import rank_batches, train_loop

nn = torch.nn


def wide_mlp() -> nn.Module:
    """784-1536-1536-10 with ReLU: 3.6 M parameters, 14 MB of fp32 gradients."""
    return nn.Sequential(nn.Linear(784, 1536), nn.ReLU(), nn.Linear(1536, 1536), nn.ReLU(),
                         nn.Linear(1536, 10))


def small_cnn() -> nn.Module:
    """Two conv-BN-ReLU-pool stages (16, 32 channels) and a linear head: 10 K parameters."""
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def reduce_tensor(t: torch.Tensor) -> torch.Tensor:
    """The ImageNet example's helper: the mean of ``t`` over the ranks."""
    rt = t.clone()
    dist.all_reduce(rt, op=dist.ReduceOp.SUM)
    return rt / dist.get_world_size()


class AverageMeter:
    """Running average for the progress log, as the ImageNet example keeps it."""

    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val: float, n: int = 1) -> None:
        self.sum += val * n
        self.count += n


def register(facts: dict) -> dict:
    """Register this module's cases; {case: its model builder}."""

    @case("pt_ddp_gloo_fp16_compress_hook", "pytorch", "training", 6,
          {**facts, "optimizer": "sgd"}, split="tuned",
          fix="no communication hook (fp32 all-reduce)", share_from_fix="communication",
          share_variant="bare", tags=["ddp", "gloo", "comm_hook", "fp16_compress"])
    def pt_ddp_gloo_fp16_compress_hook(variant):
        """DDP over gloo on 2 CPU ranks training an MLP (784-1536-1536-10: 3.6 M parameters,
        14 MB of fp32 gradients) with SGD and momentum on batches of 32 rows, with
        ``register_comm_hook(None, default_hooks.fp16_compress_hook)`` (gradient
        compression read as the way to cut communication): each bucket is cast to fp16,
        all-reduced and cast back.  The fix tried is no hook, DDP's fp32 all-reduce; the
        communication share is what the loop without DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = wide_mlp()
        if variant == "bare":
            model = net
        else:
            model = DDP(net)
            if variant != "fix":
                model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        return train_loop(model, opt, rank_batches(4, 32, (784,), 21))

    @case("pt_ddp_gloo_barrier_reduce_log", "pytorch", "training", 8,
          {**facts, "optimizer": "sgd"}, split="holdout",
          fix="metrics reduced and logged every 50 steps, no barrier",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "barrier", "metric_allreduce", "item", "static_graph"])
    def pt_ddp_gloo_barrier_reduce_log(variant):
        """DDP over gloo on 2 CPU ranks training a small CNN with BatchNorm (two conv
        stages, 10 K parameters) on batches of 16 CIFAR-sized images, SGD with momentum,
        wrapped with ``static_graph=True``; after each update the loop, as the ImageNet
        example writes it, calls ``dist.barrier()``, all-reduces the loss and the top-1
        accuracy with ``reduce_tensor`` and adds them to running meters with ``.item()``.
        The fix reduces and logs every 50th step without the barrier; the communication
        share is what the loop without DDP, barrier or reductions (``bare``) saves."""
        torch.manual_seed(0)
        net = small_cnn()
        model = net if variant == "bare" else DDP(net, static_graph=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        data = rank_batches(4, 16, (3, 32, 32), 22)
        losses, top1 = AverageMeter(), AverageMeter()

        def step(i):
            images, labels = data[i % len(data)]
            output = model(images)
            loss = nn.functional.cross_entropy(output, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            acc = (output.argmax(1) == labels).float().mean() * 100
            if variant == "bare":
                losses.update(loss.item(), images.size(0))
                top1.update(acc.item(), images.size(0))
            elif variant == "run" or i % 50 == 0:
                if variant == "run":
                    dist.barrier()
                losses.update(reduce_tensor(loss.detach()).item(), images.size(0))
                top1.update(reduce_tensor(acc).item(), images.size(0))
            return loss
        return step

    return {"pt_ddp_gloo_fp16_compress_hook": wide_mlp,
            "pt_ddp_gloo_barrier_reduce_log": small_cnn}
