"""Held-out PyTorch cases of more everyday programs, written without looking at the
advisor's rules: a focal loss computed per sample in a Python loop over the batch, an
exponential moving average of the weights updated parameter by parameter each step, and
a CNN trained with ``torch.set_num_threads(1)`` left on from debugging.
"""

from __future__ import annotations

import os

import torch

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts
from corpus.torch_cases_daily import batch_at, clocked_step

F = torch.nn.functional


def rows(n: int, width: int, classes: int, seed: int):
    """Feature rows and labels held in memory."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, width, generator=g), torch.randint(0, classes, (n,), generator=g)


def focal_loss(logits, y, gamma: float = 2.0):
    """The focal loss of a batch, vectorised: ``(1 - p_t) ** gamma * -log p_t``, mean."""
    logp = F.log_softmax(logits, dim=1).gather(1, y[:, None]).squeeze(1)
    return (-(1 - logp.exp()) ** gamma * logp).mean()


# -- per-op overhead: a focal loss computed sample by sample in a Python loop ----------------
@case("pt_train_per_sample_loss_loop", "pytorch", "training", 3,
      facts("training", optimizer="adam"), split="tuned", warmup=3,
      fix="the focal loss computed on the whole batch at once",
      share_from_fix="host_overhead", tags=["python_loop", "custom_loss"])
def pt_train_per_sample_loss_loop(variant):
    """A 128-256-256-10 MLP classifier trained with Adam on batches of 32 rows from
    memory, its focal loss written as a Python loop over the batch (each sample's
    ``log_softmax``, probability and weight computed on its own row, the 32 losses
    stacked and averaged): the loss's forward and backward are hundreds of tiny ops;
    the same loss computed on the whole batch at once is the fix."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs, ys = rows(4096, 128, 10, seed=5)

    def step(i):
        with CLOCK("input"):
            x, y = batch_at(xs, ys, 32, i)
        logits = model(x)
        if variant == "fix":
            loss = focal_loss(logits, y)
        else:
            loss = torch.stack([focal_loss(logits[j:j + 1], y[j:j + 1])
                                for j in range(len(y))]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- an EMA of the weights updated parameter by parameter -----------------------------------
def residual_mlp(width: int = 256, blocks: int = 6, classes: int = 10):
    """An MLP of ``blocks`` LayerNorm-Linear-GELU-Linear residual blocks."""
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.up, self.down = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width,
                                                                                    width)

        def forward(self, x):
            return x + self.down(F.gelu(self.up(self.norm(x))))
    return torch.nn.Sequential(torch.nn.Linear(64, width), *(Block() for _ in range(blocks)),
                               torch.nn.LayerNorm(width), torch.nn.Linear(width, classes))


@case("pt_train_ema_param_loop", "pytorch", "training", 4,
      facts("training", optimizer="adamw"), split="tuned", warmup=3,
      fix="AdamW(fused=True) and the average updated with one torch._foreach_lerp_",
      also=("ema_foreach", "adamw_fused"), share_from_fix="host_overhead",
      tags=["ema", "python_loop"])
def pt_train_ema_param_loop(variant):
    """A residual MLP (6 LayerNorm-Linear-GELU-Linear blocks, 256 wide) trained with
    AdamW's default per-tensor loop on batches of 128 rows from memory, keeping an
    exponential moving average of its weights for evaluation: after every optimizer step
    a Python loop over the 42 parameters does ``ema.mul_(0.999).add_(p, alpha=0.001)``
    under ``torch.no_grad()``.  The per-op overhead is what batching both per-tensor
    loops saves (the fix: ``AdamW(fused=True)`` and one ``torch._foreach_lerp_`` over the
    average); each alone is measured beside it (``ema_foreach``, ``adamw_fused``)."""
    torch.manual_seed(0)
    model = residual_mlp()
    ema = [p.detach().clone() for p in model.parameters()]
    fused = variant in ("fix", "adamw_fused")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=fused or None)
    one_lerp = variant in ("fix", "ema_foreach")
    xs, ys = rows(4096, 64, 10, seed=6)

    def step(i):
        loss = clocked_step(model, opt, lambda: batch_at(xs, ys, 128, i))
        with torch.no_grad():
            params = [p.detach() for p in model.parameters()]
            if one_lerp:
                torch._foreach_lerp_(ema, params, 0.001)
            else:
                for e, p in zip(ema, params):
                    e.mul_(0.999).add_(p, alpha=0.001)
        return loss
    return Loop(step)


# -- compute: a CNN trained on one intra-op thread, set by torch.set_num_threads(1) --------
class Threads:
    """The step callable of a loop run with ``n`` intra-op threads: sets them when built
    and gives back the generator's single thread when released."""

    def __init__(self, loop: Loop, n: int):
        self.loop = loop
        torch.set_num_threads(n)

    def __call__(self, i):
        return self.loop(i)

    def close(self):
        torch.set_num_threads(1)
        self.loop.close()


def conv_net(classes: int = 10):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 8 * 8, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, classes))


@case("pt_train_single_thread_cnn", "pytorch", "training", 4,
      facts("training", optimizer="sgd"), split="tuned", warmup=3,
      fix="the default intra-op threads (2 on this machine)",
      tags=["threads", "set_num_threads"])
def pt_train_single_thread_cnn(variant):
    """A three-conv CNN trained with SGD and momentum on batches of 64 32x32 images held
    in memory, in a script that still calls ``torch.set_num_threads(1)`` (left from
    debugging): every conv and matmul runs on one core of the machine's two; the default
    thread count (one per core) is the fix."""
    torch.manual_seed(0)
    model = conv_net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(7)
    xs, ys = torch.randn(512, 3, 32, 32, generator=g), torch.randint(0, 10, (512,), generator=g)

    def step(i):
        return clocked_step(model, opt, lambda: batch_at(xs, ys, 64, i))
    return Threads(Loop(step), (os.cpu_count() or 2) if variant == "fix" else 1)
