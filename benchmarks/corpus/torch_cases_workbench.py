"""Held-out PyTorch training programs as their users write them at the workbench, written
without looking at the advisor's rules: stochastic weight averaging of a small CNN whose
averaged model's batch-norm statistics are recomputed with ``update_bn`` over the training
loader after every epoch; a tabular MLP trained under CPU ``torch.autocast`` with
``dtype=torch.float16`` and a ``GradScaler``, as the GPU mixed-precision recipe writes it;
continual learning with experience replay whose buffer of the last 8,000 images is grown
with ``torch.cat`` and cut back to its capacity every step;
and differentially private training of a small CNN whose clipped per-sample gradients come
from one ``torch.func.vmap(grad(...))`` over the batch.
"""

from __future__ import annotations

import torch
from torch.func import functional_call, grad, vmap
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn
from torch.utils.data import DataLoader, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts

nn = torch.nn
F = torch.nn.functional


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- compute, periodic: SWA with update_bn after every epoch -----------------------------------
class SmallCNN(nn.Module):
    """Two conv-BN-ReLU blocks (32 and 64 channels, the second strided), global average
    pooling and a linear classifier: 28x28 grayscale images to 10 classes."""

    def __init__(self):
        super().__init__()
        blocks, cin = [], 1
        for cout, stride in ((32, 1), (64, 2)):
            blocks += [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                       nn.ReLU(inplace=True)]
            cin = cout
        self.features = nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(self.features(x))


SWA_BATCHES = 6  # batches an epoch of the 384-image training set


@case("pt_train_swa_update_bn_epochs", "pytorch", "training", SWA_BATCHES,
      facts("training", optimizer="sgd", dataloader_workers=0, batch=64), split="holdout",
      warmup=3, fix="update_bn once, after the last epoch (the SWA tutorial's order)",
      tags=["swa", "update_bn", "periodic", "batch_norm"])
def pt_train_swa_update_bn_epochs(variant):
    """The stochastic-weight-averaging phase of training a small batch-norm CNN on a
    384-image data set (28x28 grayscale, 10 classes, held in memory; a shuffled
    ``DataLoader`` of batches of 64, no workers): SGD with momentum under ``SWALR``, and
    after each 6-batch epoch ``swa_model.update_parameters(model)``, ``swa_scheduler.step()``
    and ``torch.optim.swa_utils.update_bn(train_loader, swa_model)``, a forward pass of the
    averaged model over the whole training set to recompute its batch-norm statistics, so
    the averaged model is ready to evaluate or save every epoch.  The fix calls
    ``update_bn`` once, after the last epoch, as the PyTorch SWA tutorial does."""
    torch.manual_seed(0)
    model = SmallCNN()
    swa_model = AveragedModel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    swa_scheduler = SWALR(opt, swa_lr=0.01, anneal_epochs=2)
    data = TensorDataset(torch.randn(SWA_BATCHES * 64, 1, 28, 28, generator=_gen(1)),
                         torch.randint(0, 10, (SWA_BATCHES * 64,), generator=_gen(2)))
    train_loader = DataLoader(data, batch_size=64, shuffle=True)
    state = {"it": iter(train_loader)}

    def step(i):
        with CLOCK("input"):
            x, y = next(state["it"])
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (i + 1) % len(train_loader) == 0:  # the epoch's end
            with CLOCK("periodic"):
                swa_model.update_parameters(model)
                swa_scheduler.step()
                if variant != "fix":
                    update_bn(train_loader, swa_model)
            with CLOCK("input"):
                state["it"] = iter(train_loader)
        return loss
    return Loop(step)


# -- compute: CPU autocast with float16 -------------------------------------------------------
class TabularResMLP(nn.Module):
    """A residual MLP for tabular data: 96 numeric features projected to width 256, two
    pre-norm residual blocks (LayerNorm, Linear 256-512, GELU, Linear 512-256), a 2-class
    head."""

    def __init__(self, features: int = 96, width: int = 256, blocks: int = 2):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(),
                          nn.Linear(2 * width, width)) for _ in range(blocks))
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2))

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


@case("pt_train_autocast_fp16_cpu", "pytorch", "training", 5,
      facts("training", optimizer="adamw", precision="fp16", batch=128), split="holdout",
      warmup=2, fix="autocast with dtype=torch.bfloat16, no GradScaler", also=("fp32",),
      tags=["amp", "autocast", "fp16", "grad_scaler"])
def pt_train_autocast_fp16_cpu(variant):
    """A churn classifier (a residual MLP on 96 numeric features, width 256, 2 blocks)
    trained with AdamW on batches of 128 rows held in memory, in the mixed-precision recipe
    copied from GPU code: ``torch.autocast(device_type="cpu", dtype=torch.float16)`` around
    the forward and the loss, ``torch.amp.GradScaler("cpu")`` scaling the loss, unscaling
    and stepping.  The fix autocasts to ``torch.bfloat16`` (no scaler needed); training
    in fp32 (autocast off) is measured beside it."""
    torch.manual_seed(0)
    model = TabularResMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    rows = torch.randn(4096, 96, generator=_gen(3))
    labels = (rows[:, :8].sum(1) + 0.5 * torch.randn(4096, generator=_gen(4)) > 0).long()
    dtype = torch.bfloat16 if variant == "fix" else torch.float16
    scaler = torch.amp.GradScaler("cpu", enabled=variant == "run")

    def step(i):
        with CLOCK("input"):
            k = (128 * i) % 4096
            x, y = rows[k:k + 128], labels[k:k + 128]
        with torch.autocast(device_type="cpu", dtype=dtype, enabled=variant != "fp32"):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return Loop(step)


# -- memory copies: a replay buffer grown with torch.cat and cut to its capacity --------------
CAPACITY = 8000


def replay_mlp() -> nn.Sequential:
    """The continual-learning literature's MNIST network: 784-256-256-10 with ReLUs."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                         nn.ReLU(), nn.Linear(256, 10))


@case("pt_train_replay_buffer_cat", "pytorch", "training", 6,
      facts("training", optimizer="sgd", batch=64), split="holdout", warmup=3,
      fix="a preallocated (8000, 1, 28, 28) ring buffer, the batch written as one slice",
      tags=["continual_learning", "replay", "torch_cat"])
def pt_train_replay_buffer_cat(variant):
    """Continual learning with experience replay on a stream of 28x28 digits: each step
    takes the stream's next 32 images, adds 32 drawn at random from a replay buffer of
    the last 8,000 images seen, and trains a 784-256-256-10 MLP on the 64 with SGD; the
    buffer is then updated as ``buf_x = torch.cat([buf_x, x])[-8000:]`` (and the same
    for the labels), a new 25 MB tensor each step.  The fix preallocates the buffer and
    writes each batch into it as a slice through a wrapping pointer."""
    torch.manual_seed(0)
    model = replay_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    stream_x = torch.rand(4096, 1, 28, 28, generator=_gen(9))
    stream_y = torch.randint(0, 10, (4096,), generator=_gen(10))
    buf = {"x": torch.rand(CAPACITY, 1, 28, 28, generator=_gen(11)),
           "y": torch.randint(0, 10, (CAPACITY,), generator=_gen(12)), "ptr": 0}

    def remember(x, y):
        if variant == "fix":
            ptr = buf["ptr"]
            buf["x"][ptr:ptr + x.size(0)] = x
            buf["y"][ptr:ptr + y.size(0)] = y
            buf["ptr"] = (ptr + x.size(0)) % CAPACITY
        else:
            buf["x"] = torch.cat([buf["x"], x])[-CAPACITY:]
            buf["y"] = torch.cat([buf["y"], y])[-CAPACITY:]

    def step(i):
        with CLOCK("input"):
            k = (32 * i) % 4096
            x, y = stream_x[k:k + 32], stream_y[k:k + 32]
            pick = torch.randint(0, CAPACITY, (32,))
            bx, by = torch.cat([x, buf["x"][pick]]), torch.cat([y, buf["y"][pick]])
        loss = F.cross_entropy(model(bx), by)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with CLOCK("copy"):
            remember(x, y)
        return loss
    return Loop(step)


# -- compute: DP-SGD with per-sample gradients from vmap(grad) ---------------------------------
class DPNet(nn.Module):
    """Opacus's MNIST example network (no batch norm, as differential privacy needs): two
    strided conv-tanh-maxpool blocks (16 8x8 and 32 4x4 filters) and a 512-32-10 tanh
    head."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 8, 2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
            nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten())
        self.classifier = nn.Sequential(nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


CLIP, SIGMA = 1.0, 1.0


@case("pt_train_dpsgd_vmap_cnn", "pytorch", "training", 5,
      facts("training", optimizer="sgd", batch=64), split="tuned", warmup=2,
      tags=["dp_sgd", "per_sample_gradients", "vmap", "torch_func"])
def pt_train_dpsgd_vmap_cnn(variant):
    """Differentially private SGD of Opacus's small MNIST CNN on 28x28 digits (batches of 64
    from a tensor held in memory), the per-sample gradients as the ``torch.func`` tutorial
    takes them: one ``vmap(grad(loss), in_dims=(None, 0, 0))`` over ``functional_call``,
    each sample's gradient clipped to norm 1.0 with one batched norm, the clipped sum
    noised (sigma 1.0) and set as ``.grad`` for an SGD step.  Nothing but the model's
    per-sample work in the step: no fix."""
    torch.manual_seed(0)
    model = DPNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(2048, 1, 28, 28, generator=_gen(7))
    labels = torch.randint(0, 10, (2048,), generator=_gen(8))
    names = [n for n, _ in model.named_parameters()]

    def loss_one(params, xi, yi):
        out = functional_call(model, params, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample_grads = vmap(grad(loss_one), in_dims=(None, 0, 0))

    def step(i):
        with CLOCK("input"):
            k = (64 * i) % 2048
            x, y = images[k:k + 64], labels[k:k + 64]
        params = {n: p.detach() for n, p in model.named_parameters()}
        grads = per_sample_grads(params, x, y)
        norms = torch.stack([grads[n].flatten(1).norm(dim=1) for n in names]).norm(dim=0)
        scale = (CLIP / (norms + 1e-6)).clamp(max=1.0)
        for n, p in model.named_parameters():
            clipped = torch.einsum("b,b...->...", scale, grads[n])
            p.grad = (clipped + SIGMA * CLIP * torch.randn_like(clipped)) / x.size(0)
        opt.step()
        return norms
    return Loop(step)
