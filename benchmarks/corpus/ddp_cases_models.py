"""Held-out distributed cases written without looking at the advisor's rules (captured and
measured by ``run_ddp.py`` on 2 CPU ranks over gloo): a residual MLP sharded with FSDP2's
``fully_shard`` per block, a click-through model whose large ``nn.Embedding(sparse=True)``
table has its sparse gradients all-reduced by DDP, a VGG-style CNN wrapped with
``static_graph=True`` and ``gradient_as_bucket_view=True`` where nothing is wrong, and a
DDP model compiled with ``torch.compile``.  (``SyncBatchNorm`` does not run on CPU: it
refuses modules off a GPU.)

:func:`register` registers the cases with the DDP generator's facts and returns each
case's model builder (for the all-reduce of its gradients alone).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from corpus.common import case
from corpus.ddp_cases_blind import rank_batches, train_loop

nn = torch.nn


class ResBlock(nn.Module):
    """Pre-norm residual MLP block: LayerNorm, Linear(d, 2d), GELU, Linear(2d, d)."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class ResMLP(nn.Module):
    """An input projection, ``depth`` residual blocks of ``dim``, a 10-way head."""

    def __init__(self, dim: int = 384, depth: int = 6, d_in: int = 256):
        super().__init__()
        self.inp = nn.Linear(d_in, dim)
        self.blocks = nn.ModuleList(ResBlock(dim) for _ in range(depth))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class ClickModel(nn.Module):
    """A click-through model: an item table of 100 K ids (32 wide, ``sparse=True``), each
    sample's 64 ids (its click history) looked up and mean-pooled, 16 dense features beside
    them, an MLP 48-256-128-1 over both."""

    def __init__(self, items: int = 100_000, dim: int = 32, dense: int = 16):
        super().__init__()
        self.items = nn.Embedding(items, dim, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(dim + dense, 256), nn.ReLU(), nn.Linear(256, 128),
                                 nn.ReLU(), nn.Linear(128, 1))

    def forward(self, ids, feats):
        return self.mlp(torch.cat([self.items(ids).mean(1), feats], 1)).squeeze(1)


def vgg_small() -> nn.Module:
    """Three VGG stages of two 3x3 conv-BN-ReLU layers (16, 32, 64 channels) with max
    pooling, global average pooling and a 10-way head: 73 K parameters."""
    layers, c_in = [], 3
    for c in (16, 32, 64):
        for _ in range(2):
            layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                       nn.ReLU(inplace=True)]
            c_in = c
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def click_batches(n: int, batch: int) -> list:
    """``n`` batches of this rank's clicks: (item ids, dense features, labels)."""
    g = torch.Generator().manual_seed(61 + dist.get_rank())
    # popular items come up more often: ids drawn from a skewed distribution
    return [((torch.rand(batch, 64, generator=g) ** 3 * 100_000).long(),
             torch.randn(batch, 16, generator=g),
             torch.randint(0, 2, (batch,), generator=g).float()) for _ in range(n)]


def register(facts: dict) -> dict:
    """Register this module's cases; {case: its model builder}."""

    @case("pt_ddp_gloo_fsdp2_fully_shard", "pytorch", "training", 3,
          {**facts, "optimizer": "adamw", "sharding": "fully_shard"}, split="tuned",
          fix="DDP in place of fully_shard (the model fits on each rank)",
          share_from_fix="communication", share_variant="bare", also=("fused", "foreach"),
          also_share=("host_overhead", "fused"), tags=["fsdp", "fully_shard", "gloo", "sharding"])
    def pt_ddp_gloo_fsdp2_fully_shard(variant):
        """FSDP2 over gloo on 2 CPU ranks training a residual MLP (3 pre-norm blocks of 256,
        0.86 M parameters) with AdamW on batches of 64 rows, sharded as the FSDP2 tutorial
        writes it: ``fully_shard`` on each block, then on the whole model, so every
        forward all-gathers each block's parameters and every backward gathers them again
        and reduce-scatters the gradients.  The fix tried is plain DDP (the model fits on
        each rank); the communication share is what the loop without any wrapper
        (``bare``) saves.  The same sharded loop with AdamW's ``fused=True`` step
        (``fused``) and with its ``foreach=True`` step (``foreach``) is timed beside it: on
        a CPU the default is the loop of per-parameter ops, each dispatched through the
        sharded parameters' tensor subclass; the host-overhead share is what the fused
        step saves."""
        torch.manual_seed(0)
        model = ResMLP(256, 3)
        if variant in ("run", "fused", "foreach"):
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
        elif variant == "fix":
            model = DDP(model)
        impl = {variant: True} if variant in ("fused", "foreach") else {}
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **impl)
        return train_loop(model, opt, rank_batches(4, 64, (256,), 71))

    @case("pt_ddp_gloo_sparse_embedding", "pytorch", "training", 6,
          {**facts, "optimizer": "adam"}, split="tuned",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "sparse_gradients", "embedding", "recsys"])
    def pt_ddp_gloo_sparse_embedding(variant):
        """DDP over gloo on 2 CPU ranks training a click-through model whose item table
        (100 K ids, 32 wide: 3.2 M of its 3.3 M parameters) is an
        ``nn.Embedding(sparse=True)`` updated by ``SparseAdam`` and whose MLP is updated by
        Adam, on batches of 128 samples of 64 item ids and 16 dense features: DDP
        all-reduces the table's sparse gradient (gloo gathers every rank's indices and
        values) beside the MLP's dense bucket.  No fix claimed; the communication share is
        what the loop without DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = ClickModel()
        model = net if variant == "bare" else DDP(net)
        sparse_opt = torch.optim.SparseAdam(list(net.items.parameters()), lr=1e-3)
        dense_opt = torch.optim.Adam(net.mlp.parameters(), lr=1e-3)
        data = click_batches(4, 128)

        def step(i):
            ids, feats, clicks = data[i % len(data)]
            loss = nn.functional.binary_cross_entropy_with_logits(model(ids, feats), clicks)
            sparse_opt.zero_grad()
            dense_opt.zero_grad()
            loss.backward()
            sparse_opt.step()
            dense_opt.step()
            return loss
        return step

    @case("pt_ddp_gloo_static_graph_views", "pytorch", "training", 5,
          {**facts, "optimizer": "sgd"}, split="holdout",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "static_graph", "gradient_as_bucket_view", "cnn"])
    def pt_ddp_gloo_static_graph_views(variant):
        """DDP over gloo on 2 CPU ranks training a VGG-style CNN (three stages of two 3x3
        conv-BN-ReLU layers, 16-32-64 channels, 73 K parameters) on batches of 16
        CIFAR-sized images with SGD and momentum, wrapped with ``static_graph=True`` and
        ``gradient_as_bucket_view=True`` as the DDP performance notes suggest: nothing is
        wrong, the convolutions take the step.  No fix claimed; the communication share
        is what the loop without DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = vgg_small()
        if variant == "bare":
            model = net
        else:
            model = DDP(net, static_graph=True, gradient_as_bucket_view=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return train_loop(model, opt, rank_batches(4, 16, (3, 32, 32), 81))

    @case("pt_ddp_gloo_compiled_resmlp", "pytorch", "training", 5,
          {**facts, "optimizer": "adamw", "compiled": "torch.compile"}, split="holdout",
          share_from_fix="communication", share_variant="bare",
          also=("eager",), tags=["ddp", "gloo", "torch_compile", "ddp_optimizer"])
    def pt_ddp_gloo_compiled_resmlp(variant):
        """DDP over gloo on 2 CPU ranks training a residual MLP (4 pre-norm blocks of 256,
        1.1 M parameters) with AdamW on batches of 128 rows, compiled as the DDP-with-
        compile recipe writes it: ``torch.compile(DDP(model))`` (Dynamo's DDP optimizer
        splits the graph at the gradient buckets so the all-reduce overlaps the
        backward).  No fix claimed; the communication share is what the compiled loop
        without DDP (``bare``) saves, and the same DDP loop uncompiled (``eager``) is
        timed beside it."""
        torch.manual_seed(0)
        net = ResMLP(256, 4)
        model = net if variant == "bare" else DDP(net)
        if variant != "eager":
            model = torch.compile(model)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
        return train_loop(model, opt, rank_batches(4, 128, (256,), 91))

    return {"pt_ddp_gloo_fsdp2_fully_shard": lambda: ResMLP(256, 3),
            "pt_ddp_gloo_sparse_embedding": ClickModel,
            "pt_ddp_gloo_static_graph_views": vgg_small,
            "pt_ddp_gloo_compiled_resmlp": lambda: ResMLP(256, 4)}
