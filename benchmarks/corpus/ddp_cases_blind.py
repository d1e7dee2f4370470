"""DDP cases written without looking at the advisor's rules (captured and measured by
``run_ddp.py`` on 2 CPU ranks over gloo): a BatchNorm CNN wrapped with
``find_unused_parameters=True`` though every parameter is used (held out), and a deep MLP
whose gradients DDP all-reduces in 1 MB buckets (``bucket_cap_mb=1``; tuned since the
bucket-size estimate was read on it).

:func:`register` registers the cases with the DDP generator's facts and returns each
case's model builder (for the all-reduce of its gradients alone).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from corpus.common import case

nn = torch.nn


class SmallResNet(nn.Module):
    """A CIFAR-style network: a stem and two residual stages of conv-BN-ReLU blocks."""

    def __init__(self, width: int = 16, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        self.block1 = self._block(width)
        self.down = nn.Sequential(nn.Conv2d(width, 2 * width, 3, 2, 1, bias=False),
                                  nn.BatchNorm2d(2 * width), nn.ReLU())
        self.block2 = self._block(2 * width)
        self.head = nn.Linear(2 * width, classes)

    @staticmethod
    def _block(c: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                             nn.ReLU(), nn.Conv2d(c, c, 3, padding=1, bias=False),
                             nn.BatchNorm2d(c))

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block1(x))
        x = self.down(x)
        x = torch.relu(x + self.block2(x))
        return self.head(x.mean((2, 3)))


def deep_mlp() -> nn.Module:
    """784-768, eight 768-768 ReLU layers, a 10-way head: 5.3 M parameters, 21 MB of fp32
    gradients, each of its weights 2.4 MB."""
    layers = [nn.Linear(784, 768), nn.ReLU()]
    for _ in range(8):
        layers += [nn.Linear(768, 768), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(768, 10))


def rank_batches(n: int, batch: int, shape: tuple[int, ...], seed: int) -> list:
    g = torch.Generator().manual_seed(seed + dist.get_rank())
    return [(torch.randn(batch, *shape, generator=g), torch.randint(0, 10, (batch,),
                                                                      generator=g))
            for _ in range(n)]


def train_loop(model: nn.Module, opt, data: list):
    def step(i):
        images, labels = data[i % len(data)]
        loss = nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def register(facts: dict) -> dict:
    """Register this module's cases; {case: its model builder}."""

    @case("pt_ddp_gloo_find_unused_bn", "pytorch", "training", 6,
          {**facts, "optimizer": "sgd"}, split="holdout",
          fix="find_unused_parameters=False", share_from_fix="communication",
          share_variant="bare", tags=["ddp", "gloo", "find_unused_parameters", "batchnorm"])
    def pt_ddp_gloo_find_unused_bn(variant):
        """DDP over gloo on 2 CPU ranks training a small residual CNN with BatchNorm (a
        16-wide stem, two residual stages, 28 K parameters) on batches of 32
        CIFAR-sized images with SGD and momentum, wrapped with
        ``find_unused_parameters=True`` though every parameter is used (DDP walks the
        autograd graph after every forward) and the default ``broadcast_buffers=True``
        (rank 0's BatchNorm statistics broadcast before every forward).  The fix is
        ``find_unused_parameters=False``; the communication share is what the loop without
        DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = SmallResNet()
        if variant == "bare":
            model = net
        else:
            model = DDP(net, find_unused_parameters=variant != "fix")
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return train_loop(model, opt, rank_batches(4, 32, (3, 32, 32), 11))

    @case("pt_ddp_gloo_small_buckets", "pytorch", "training", 6,
          {**facts, "optimizer": "sgd"}, split="tuned",
          fix="the default 25 MB buckets", share_from_fix="communication",
          share_variant="bare", tags=["ddp", "gloo", "bucket_cap_mb"])
    def pt_ddp_gloo_small_buckets(variant):
        """DDP over gloo on 2 CPU ranks training a deep MLP (784-768, eight 768-768 ReLU layers,
        10 classes: 5.3 M parameters) with SGD and momentum on batches of 8 rows, wrapped with
        ``bucket_cap_mb=1`` (advice read for overlapping the all-reduce with the backward): each
        2.4 MB weight's gradient closes a bucket of its own, 9 all-reduces a step where the
        default makes 2. The fix is DDP's default 25 MB buckets; the communication share is what
        the loop without DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = deep_mlp()
        if variant == "bare":
            model = net
        else:
            model = DDP(net, bucket_cap_mb=25 if variant == "fix" else 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        return train_loop(model, opt, rank_batches(4, 8, (784,), 12))

    return {"pt_ddp_gloo_find_unused_bn": SmallResNet,
            "pt_ddp_gloo_small_buckets": deep_mlp}
