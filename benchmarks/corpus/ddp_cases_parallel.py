"""Held-out distributed cases written without looking at the advisor's rules (captured and
measured by ``run_ddp.py`` on 2 CPU ranks over gloo), model parallelism written by hand as
tutorials write it: a two-stage GPipe pipeline passing activations and gradients with
``dist.send`` / ``dist.recv`` over micro-batches, a Megatron-style tensor-parallel MLP
(column-split then row-split linears, an ``all_reduce`` in every block's forward and
backward), a mixture-of-experts layer with one expert per rank exchanging its tokens with
``all_to_all_single`` twice a forward, and DDP whose loop gathers a dict of metrics from
every rank with ``dist.all_gather_object`` each step.

:func:`register` registers the cases with the DDP generator's facts and returns each
case's model builder (for the all-reduce of its gradients alone).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch.nn.parallel import DistributedDataParallel as DDP

from corpus.common import CLOCK, case
from corpus.ddp_cases_blind import rank_batches, train_loop

nn = torch.nn
F = nn.functional


def shared_batches(n: int, batch: int, d_in: int, seed: int) -> list:
    """``n`` global batches every rank draws alike (a pipeline's or a tensor-parallel
    group's ranks see the same batch)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, d_in, generator=g), torch.randint(0, 10, (batch,), generator=g))
            for _ in range(n)]


# -- pipeline: two stages over send / recv -----------------------------------------------------
def pipe_stages(d_in: int = 512, width: int = 1024) -> list[nn.Module]:
    """The MLP cut in two: stage 0 ``d_in-width-width``, stage 1 ``width-width-10``."""
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(d_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU()),
            nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))]


def pipe_model() -> nn.Module:
    return nn.Sequential(*pipe_stages())


def gpipe_step(stage: nn.Module, opt, chunks: int, width: int):
    """One GPipe step: all micro-batches forward, then all backward, then the update."""
    rank = dist.get_rank()

    def step(x, y):
        if rank == 0:
            outs = []
            for xb in x.chunk(chunks):
                h = stage(xb)
                with CLOCK("comm"):
                    dist.send(h.detach(), 1)
                outs.append(h)
            for h in outs:
                grad = torch.empty_like(h)
                with CLOCK("comm"):
                    dist.recv(grad, 1)
                h.backward(grad)
        else:
            ins, losses = [], []
            for yb in y.chunk(chunks):
                h = torch.empty(len(yb), width)
                with CLOCK("comm"):
                    dist.recv(h, 0)
                h.requires_grad_()
                losses.append(F.cross_entropy(stage(h), yb) / chunks)
                ins.append(h)
            for h, loss in zip(ins, losses):
                loss.backward()
                with CLOCK("comm"):
                    dist.send(h.grad, 0)
        opt.step()
        opt.zero_grad()
    return step


# -- tensor parallel: Megatron's f and g ---------------------------------------------------
class CopyToParallel(torch.autograd.Function):
    """Megatron's ``f``: identity forward, all-reduce of the input's gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        with CLOCK("comm"):
            dist.all_reduce(grad)
        return grad


class ReduceFromParallel(torch.autograd.Function):
    """Megatron's ``g``: all-reduce of the partial sums forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        with CLOCK("comm"):
            dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ParallelMLPBlock(nn.Module):
    """Pre-norm MLP block whose ``dim -> 4 dim`` linear is split by columns and whose
    ``4 dim -> dim`` linear by rows over ``parts`` ranks (``parts=1``: the whole block)."""

    def __init__(self, dim: int, parts: int):
        super().__init__()
        self.parts = parts
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim // parts)
        self.fc2 = nn.Linear(4 * dim // parts, dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        h = self.norm(x)
        if self.parts > 1:
            h = CopyToParallel.apply(h)
        out = self.fc2(F.gelu(self.fc1(h)))
        if self.parts > 1:
            out = ReduceFromParallel.apply(out)
        return x + out + self.bias


def tp_mlp(parts: int = 1, dim: int = 256, depth: int = 2) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(128, dim), *(ParallelMLPBlock(dim, parts) for _ in range(depth)),
                         nn.LayerNorm(dim), nn.Linear(dim, 10))


# -- expert parallel: a Switch-style MoE layer ---------------------------------------------
class MoELayer(nn.Module):
    """Top-1 routing over ``world`` experts of ``dim -> hidden -> dim``, each token sent to
    its expert's rank with ``all_to_all_single`` (``capacity`` slots per expert, overflow
    dropped) and back; ``local=True`` keeps every expert on the rank (no exchange)."""

    def __init__(self, dim: int, hidden: int, world: int, local: bool):
        super().__init__()
        self.world, self.local = world, local
        self.gate = nn.Linear(dim, world)
        n = world if local else 1
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(dim, hidden), nn.GELU(),
                                                   nn.Linear(hidden, dim)) for _ in range(n))

    def forward(self, x):
        tokens, dim = x.shape
        cap = tokens // self.world * 5 // 4
        prob, expert = F.softmax(self.gate(x), -1).max(-1)
        slots = torch.zeros(self.world, cap, dim)
        where = []
        for e in range(self.world):
            idx = (expert == e).nonzero().squeeze(1)[:cap]
            slots[e, :len(idx)] = x[idx]
            where.append(idx)
        if self.local:
            done = torch.stack([self.experts[e](slots[e]) for e in range(self.world)])
        else:
            sent = slots.reshape(self.world * cap, dim)
            with CLOCK("comm"):
                got = dist_fn.all_to_all_single(torch.empty_like(sent), sent)
            mine = self.experts[0](got)
            with CLOCK("comm"):
                back = dist_fn.all_to_all_single(torch.empty_like(mine), mine)
            done = back.reshape(self.world, cap, dim)
        out = torch.zeros_like(x)
        for e, idx in enumerate(where):
            out = out.index_add(0, idx, done[e, :len(idx)])
        return x + out * prob.unsqueeze(1)


class MoENet(nn.Module):
    def __init__(self, world: int = 2, local: bool = False, dim: int = 128, hidden: int = 512):
        super().__init__()
        self.inp = nn.Linear(64, dim)
        self.moe = MoELayer(dim, hidden, world, local)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.moe(F.relu(self.inp(x))))


def register(facts: dict) -> dict:
    """Register this module's cases; {case: its model builder}."""

    @case("pt_ddp_gloo_gpipe_send_recv", "pytorch", "training", 5,
          {**facts, "optimizer": "sgd", "parallelism": "pipeline"}, split="holdout",
          fix="data parallel: DDP of the whole MLP, half of each batch on each rank",
          tags=["pipeline", "gloo", "send_recv", "micro_batches"])
    def pt_ddp_gloo_gpipe_send_recv(variant):
        """A two-stage GPipe pipeline over gloo on 2 CPU ranks: an MLP (512-1024-1024 on
        rank 0, 1024-1024-10 on rank 1, SGD) trained on batches of 128 rows cut in 4
        micro-batches; rank 0 runs every micro-batch forward and sends its activations
        with ``dist.send``, rank 1 receives them, runs its stage and the loss, then the
        backward sends each micro-batch's input gradient back, and rank 0 waits for them
        before its own backward.  Rank 0's time in ``send`` / ``recv`` (its wait for rank
        1, the pipeline's bubble) is timed as communication.  The fix tried is data
        parallelism: DDP of the whole MLP with 64 of the 128 rows on each rank."""
        stages = pipe_stages()
        rank = dist.get_rank()
        data = shared_batches(4, 128, 512, 31)
        if variant == "fix":
            model = DDP(nn.Sequential(*stages))
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            return train_loop(model, opt, [(x.chunk(2)[rank], y.chunk(2)[rank])
                                           for x, y in data])
        opt = torch.optim.SGD(stages[rank].parameters(), lr=0.01)
        run = gpipe_step(stages[rank], opt, 4, 1024)
        return lambda i: run(*data[i % len(data)])

    @case("pt_ddp_gloo_tensor_parallel_mlp", "pytorch", "training", 3,
          {**facts, "optimizer": "adamw", "parallelism": "tensor"}, split="tuned",
          fix="data parallel: DDP of the whole MLP, half of each batch on each rank",
          tags=["tensor_parallel", "megatron", "gloo", "all_reduce"])
    def pt_ddp_gloo_tensor_parallel_mlp(variant):
        """A Megatron-style tensor-parallel MLP over gloo on 2 CPU ranks: an input
        projection, 2 pre-norm blocks of 256 whose 256-1024 linear is split by columns and
        whose 1024-256 linear by rows between the ranks (each rank 512 of the 1024 hidden
        units), so every block all-reduces its output in the forward (Megatron's ``g``)
        and its input's gradient in the backward (``f``), trained with AdamW on batches of
        512 rows both ranks share.  The all-reduces are timed as communication.  The fix
        tried is data parallelism: DDP of the whole MLP with 256 of the 512 rows on each
        rank."""
        world, rank = dist.get_world_size(), dist.get_rank()
        data = shared_batches(4, 512, 128, 41)
        if variant == "fix":
            model = DDP(tp_mlp(1))
            data = [(x.chunk(world)[rank], y.chunk(world)[rank]) for x, y in data]
        else:
            model = tp_mlp(world)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        return train_loop(model, opt, data)

    @case("pt_ddp_gloo_moe_all_to_all", "pytorch", "training", 5,
          {**facts, "optimizer": "adam", "parallelism": "expert"}, split="tuned",
          share_from_fix="communication", share_variant="bare",
          tags=["moe", "expert_parallel", "all_to_all", "gloo"])
    def pt_ddp_gloo_moe_all_to_all(variant):
        """A mixture-of-experts classifier over gloo on 2 CPU ranks, expert-parallel as
        the Switch Transformer writes it: an input projection, a top-1 gate over 2 experts
        (128-512-128 each), one expert on each rank, every rank's 1024 tokens a step put in
        capacity-padded slots per expert and exchanged with ``all_to_all_single`` (the
        differentiable one of ``torch.distributed.nn``) there and back, the replicated
        layers' gradients all-reduced by hand after the backward; Adam.  No fix claimed;
        the communication share is what the same loop with both experts on each rank and
        no collective (``bare``) saves."""
        world = dist.get_world_size()
        torch.manual_seed(0)
        net = MoENet(world, local=variant == "bare")
        replicated = [p for n, p in net.named_parameters() if not n.startswith("moe.experts")]
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        data = rank_batches(4, 1024, (64,), 51)

        def step(i):
            x, y = data[i % len(data)]
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            if variant != "bare":
                for p in replicated:
                    dist.all_reduce(p.grad)
                    p.grad /= world
            opt.step()
            return loss
        return step

    @case("pt_ddp_gloo_all_gather_object_metrics", "pytorch", "training", 6,
          {**facts, "optimizer": "sgd"}, split="holdout",
          fix="the metrics dicts gathered every 50th step",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "all_gather_object", "pickle", "metrics"])
    def pt_ddp_gloo_all_gather_object_metrics(variant):
        """DDP over gloo on 2 CPU ranks training an MLP classifier (256-512-512-10, SGD
        with momentum) on batches of 512, logging as many training scripts do: after each
        step every rank puts its loss, accuracy, learning rate and step in a Python dict
        and ``dist.all_gather_object`` gathers the dicts (pickled, their sizes all-gathered,
        then the bytes) so rank 0 can average them.  The fix tried gathers every 50th step;
        the communication share is what the loop without DDP and without the gather
        (``bare``) saves."""
        torch.manual_seed(0)
        net = gather_mlp()
        model = net if variant == "bare" else DDP(net)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        data = rank_batches(4, 512, (256,), 61)
        world, log = dist.get_world_size(), []

        def step(i):
            x, y = data[i % len(data)]
            out = model(x)
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            metrics = {"loss": loss.item(), "acc": (out.argmax(1) == y).float().mean().item(),
                       "lr": opt.param_groups[0]["lr"], "step": i}
            if variant == "run" or (variant == "fix" and i % 50 == 0):
                gathered = [None] * world
                dist.all_gather_object(gathered, metrics)
                if dist.get_rank() == 0:
                    log.append({k: sum(m[k] for m in gathered) / world for k in metrics})
            return loss
        return step

    return {"pt_ddp_gloo_gpipe_send_recv": pipe_model,
            "pt_ddp_gloo_tensor_parallel_mlp": tp_mlp,
            "pt_ddp_gloo_moe_all_to_all": MoENet,
            "pt_ddp_gloo_all_gather_object_metrics": gather_mlp}


def gather_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))
