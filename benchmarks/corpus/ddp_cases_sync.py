"""Held-out DDP cases written without looking at the advisor's rules (captured and measured
by ``run_ddp.py`` on 2 CPU ranks over gloo): an MLP classifier whose loop gathers every
rank's predictions and labels with ``dist.all_gather`` for a global accuracy read with
``.item()`` every step, and a small transformer encoder trained with DDP and
``ZeroRedundancyOptimizer`` sharding Adam's state over the ranks.

:func:`register` registers the cases with the DDP generator's facts and returns each
case's model builder (for the all-reduce of its gradients alone).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from corpus.common import case
from corpus.ddp_cases_blind import train_loop

nn = torch.nn


def mnist_mlp() -> nn.Module:
    """784-512-256-10 with ReLU: 0.5 M parameters."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                         nn.ReLU(), nn.Linear(256, 10))


class TinyEncoder(nn.Module):
    """Token embedding (1000, 128), 2 transformer encoder layers (4 heads, 256 wide), mean
    pooling and a 4-way head: 0.4 M parameters."""

    def __init__(self, vocab: int = 1000, dim: int = 128):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 256, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 4)

    def forward(self, tokens):
        return self.head(self.enc(self.emb(tokens)).mean(1))


def rank_batches(n: int, make) -> list:
    """``n`` batches of this rank's own data (``make(generator)`` draws one)."""
    g = torch.Generator().manual_seed(51 + dist.get_rank())
    return [make(g) for _ in range(n)]


def register(facts: dict) -> dict:
    """Register this module's cases; {case: its model builder}."""

    @case("pt_ddp_gloo_metric_all_gather", "pytorch", "training", 10,
          {**facts, "optimizer": "sgd"}, split="holdout",
          fix="the correct counts summed on each rank and all-reduced every 50th step",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "all_gather", "item", "metrics"])
    def pt_ddp_gloo_metric_all_gather(variant):
        """DDP over gloo on 2 CPU ranks training an MNIST-sized MLP (784-512-256-10, SGD
        with momentum) on batches of 64, as a distributed-training tutorial logs its
        accuracy: after each optimizer step the loop gathers every rank's predicted
        classes and labels with ``dist.all_gather`` into lists of tensors, concatenates
        them and reads the global accuracy with ``.item()``.  The fix tried counts the
        correct predictions on each rank and all-reduces the counts every 50th step; the
        communication share is what the loop without DDP and without the gather
        (``bare``) saves."""
        torch.manual_seed(0)
        net = mnist_mlp()
        model = net if variant == "bare" else DDP(net)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        data = rank_batches(4, lambda g: (torch.randn(64, 1, 28, 28, generator=g),
                                          torch.randint(0, 10, (64,), generator=g)))
        world = dist.get_world_size()
        counts, log = torch.zeros(2), []

        def step(i):
            x, y = data[i % len(data)]
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            pred = out.argmax(1)
            if variant == "run":
                preds = [torch.empty_like(pred) for _ in range(world)]
                labels = [torch.empty_like(y) for _ in range(world)]
                dist.all_gather(preds, pred)
                dist.all_gather(labels, y)
                log.append((torch.cat(preds) == torch.cat(labels)).float().mean().item())
            else:
                counts.add_(torch.stack([(pred == y).sum().float(), torch.tensor(64.0)]))
                if variant == "fix" and i % 50 == 0:
                    dist.all_reduce(counts)
                    log.append((counts[0] / counts[1]).item())
                    counts.zero_()
            return loss
        return step

    @case("pt_ddp_gloo_zero_adam", "pytorch", "training", 3,
          {**facts, "optimizer": "adam",
           "optimizer_sharding": "ZeroRedundancyOptimizer"}, split="tuned",
          fix="plain torch.optim.Adam on each rank (no optimizer-state sharding)",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "zero", "optimizer_sharding", "transformer"])
    def pt_ddp_gloo_zero_adam(variant):
        """DDP over gloo on 2 CPU ranks training a small transformer text classifier (an
        embedding of 1000 tokens, 2 encoder layers of 128 with 4 heads, 0.4 M parameters)
        on batches of 4 sequences of 64 tokens, with Adam wrapped in
        ``ZeroRedundancyOptimizer`` as the sharding tutorial shows: each rank keeps half
        of Adam's state, updates its half of the parameters and broadcasts them to the
        other rank after every step.  The fix tried is plain Adam on each rank; the
        communication share is what the loop without DDP and with plain Adam (``bare``)
        saves."""
        torch.manual_seed(0)
        net = TinyEncoder()
        model = net if variant == "bare" else DDP(net)
        if variant == "run":
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                          lr=1e-3)
        else:
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        data = rank_batches(4, lambda g: (torch.randint(0, 1000, (4, 64), generator=g),
                                          torch.randint(0, 4, (4,), generator=g)))
        return train_loop(model, opt, data)

    return {"pt_ddp_gloo_metric_all_gather": mnist_mlp, "pt_ddp_gloo_zero_adam": TinyEncoder}
