"""Held-out PyTorch cases of programs as forum questions about slow training or inference
write them, written without looking at the advisor's rules: an autoencoder's evaluation
loop that collects every reconstruction with ``torch.cat`` onto a growing tensor, a
training loop that adds an L2 penalty summed over ``model.parameters()`` in Python to the
loss, and a CNN trained "reproducibly" (seeded, ``torch.use_deterministic_algorithms``)
whose asker suspects the determinism while the step is the model's compute.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- memory copies: reconstructions gathered with torch.cat onto a growing tensor -------------
VAL_BATCHES, VAL_BATCH = 100, 64


class AutoEncoder(nn.Module):
    """A dense autoencoder of flattened 32x32 RGB images: 3072-256-64-256-3072."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(3072, 256), nn.ReLU(), nn.Linear(256, 64))
        self.decoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 3072),
                                     nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


@case("pt_infer_cat_growing_preds", "pytorch", "inference", 2 * VAL_BATCHES,
      facts("inference", dataloader_workers=0), split="tuned", warmup=VAL_BATCHES,
      fix="append each batch's outputs to a list and torch.cat them once per pass",
      tags=["forum", "torch_cat", "evaluation"])
def pt_infer_cat_growing_preds(variant):
    """An autoencoder's evaluation pass as a forum question writes it: the model in
    ``eval()`` under ``torch.no_grad()`` over a ``DataLoader`` of 6,400 flattened 32x32
    images (batches of 64, no workers), each batch's reconstructions and inputs gathered
    with ``all_out = torch.cat((all_out, out), 0)`` onto tensors that grow through the
    pass, the per-image error computed from them when the pass ends.  Every batch copies
    all the outputs gathered so far.  The fix appends to Python lists and concatenates
    once at the end of the pass."""
    torch.manual_seed(0)
    model = AutoEncoder().eval()
    images = torch.rand(VAL_BATCHES * VAL_BATCH, 3072,
                        generator=torch.Generator().manual_seed(4))
    loader = DataLoader(TensorDataset(images), batch_size=VAL_BATCH)
    batches = epochs(loader)
    state = {"out": [], "inp": []} if variant == "fix" else {
        "out": torch.empty(0, 3072), "inp": torch.empty(0, 3072)}
    errors = []

    def step(i):
        with CLOCK("input"):
            x = next(batches)[0]
        with torch.no_grad():
            out = model(x)
        with CLOCK("copy"):
            if variant == "fix":
                state["out"].append(out)
                state["inp"].append(x)
            else:
                state["out"] = torch.cat((state["out"], out), 0)
                state["inp"] = torch.cat((state["inp"], x), 0)
            if (i + 1) % VAL_BATCHES == 0:  # the pass ends: its outputs in one tensor
                if variant == "fix":
                    outs, inps = torch.cat(state["out"], 0), torch.cat(state["inp"], 0)
                    state["out"], state["inp"] = [], []
                else:
                    outs, inps = state["out"], state["inp"]
                    state["out"], state["inp"] = torch.empty(0, 3072), torch.empty(0, 3072)
        if (i + 1) % VAL_BATCHES == 0:
            with torch.no_grad():
                errors.append(((outs - inps) ** 2).mean(dim=1))
        return out
    return Loop(step, batches.close)


# -- host overhead: an L2 penalty summed over model.parameters() in Python --------------------
L2_LAMBDA = 1e-4


def deep_mlp(width: int = 128, depth: int = 16) -> nn.Sequential:
    """A deep narrow MLP on 64 features: ``depth`` Linear-ReLU blocks, ten classes."""
    layers: list[nn.Module] = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


@case("pt_train_l2_param_loop", "pytorch", "training", 8,
      facts("training", optimizer="sgd", dataloader_workers=0), split="tuned", warmup=5,
      fix="weight_decay in torch.optim.SGD instead of the Python L2 sum",
      share_from_fix="host_overhead", tags=["forum", "python_loop", "regularization"])
def pt_train_l2_param_loop(variant):
    """Training of a deep narrow MLP (17 Linear layers of 128, ReLU, 34 parameter tensors)
    with SGD (lr 0.05, momentum 0.9) on batches of 64 from a shuffled ``DataLoader`` of
    in-memory tensors, the loss given an L2 penalty as forum answers write it:
    ``l2 = sum(p.pow(2.0).sum() for p in model.parameters())`` and
    ``loss = loss + l2_lambda * l2``, so every parameter adds its own small ops forward
    and backward.  The fix passes ``weight_decay=2 * l2_lambda`` to ``torch.optim.SGD``
    (the same update), applied in the optimizer's fused step."""
    torch.manual_seed(0)
    model = deep_mlp()
    decay = 2 * L2_LAMBDA if variant == "fix" else 0.0
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=decay)
    g = torch.Generator().manual_seed(6)
    x, y = torch.randn(8192, 64, generator=g), torch.randint(0, 10, (8192,), generator=g)
    batches = epochs(DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True))

    def step(i):
        with CLOCK("input"):
            xb, yb = next(batches)
        loss = F.cross_entropy(model(xb), yb)
        if variant != "fix":
            l2 = sum(p.pow(2.0).sum() for p in model.parameters())
            loss = loss + L2_LAMBDA * l2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)


# -- compute: a seeded, deterministic CNN (the suspicion is wrong) ---------------------------
def seed_everything(seed: int) -> None:
    """What reproducibility answers tell the asker to do."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def seed_worker(worker_id: int) -> None:
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


class SmallCNN(nn.Module):
    """Two conv-ReLU-conv-ReLU-pool stages (32 and 64 channels) and a 2-layer head on
    32x32 RGB images."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1),
            nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(),
                                  nn.Linear(256, 10))

    def forward(self, x):
        return self.head(self.features(x))


@case("pt_train_deterministic_cnn", "pytorch", "training", 4,
      facts("training", optimizer="sgd", dataloader_workers=0, deterministic=True),
      split="holdout", warmup=3,
      fix="torch.use_deterministic_algorithms(False), cudnn.benchmark on",
      tags=["forum", "deterministic", "suspicion_wrong"])
def pt_train_deterministic_cnn(variant):
    """A small CNN (four 3x3 convolutions of 32 and 64 channels, two max-pools, a 256-unit
    head) trained with SGD on 32x32 RGB images (2,048 in memory, a shuffled
    ``DataLoader`` of batches of 16 with a seeded generator and ``worker_init_fn``) after
    the reproducibility recipe: ``random``, ``numpy`` and ``torch`` seeded,
    ``cudnn.deterministic = True``, ``cudnn.benchmark = False`` and
    ``torch.use_deterministic_algorithms(True)``.  The asker suspects the determinism;
    the fix turns it off (``use_deterministic_algorithms(False)``, ``cudnn.benchmark``
    on), which changes nothing on the CPU: the step is the model's convolutions."""
    seed_everything(0)
    torch.use_deterministic_algorithms(variant != "fix")
    if variant == "fix":
        torch.backends.cudnn.deterministic = False
        torch.backends.cudnn.benchmark = True
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    images = torch.rand(2048, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (2048,), generator=g)
    batches = epochs(DataLoader(TensorDataset(images, labels), batch_size=16, shuffle=True,
                                worker_init_fn=seed_worker, generator=g))

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def close():
        batches.close()
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False
        torch.backends.cudnn.benchmark = False
    return Loop(step, close)
