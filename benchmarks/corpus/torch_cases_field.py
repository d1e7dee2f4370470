"""Held-out PyTorch cases written as users write ordinary loops, without looking at the
advisor's rules: two loader workers running a Python image transform that keep up with
a CNN, an inference server answering requests one at a time with ``torch.no_grad()`` and
a ``.cpu().numpy()`` per output, a transformer-style MLP trained with gradient clipping
and a one-cycle schedule, and a weighted sampler drawing every batch with Python's
``random.choices`` in the main process.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset, WeightedRandomSampler

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts
from corpus.torch_cases_users import epoch_loop, epochs

F = torch.nn.functional


# -- compute: two workers running a Python transform keep up with a CNN ------------------------
class JitterCrop:
    """A hand-written augmentation: a random 28x28 crop of a 32x32 HWC uint8 image,
    a per-channel brightness jitter and a flip, channel by channel in numpy and Python."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def __call__(self, img: np.ndarray) -> torch.Tensor:
        top, left = self.rng.randrange(5), self.rng.randrange(5)
        crop = img[top:top + 28, left:left + 28].astype(np.float32) / 255.0
        chans = []
        for c in range(3):
            ch = crop[:, :, c] * (1.0 + self.rng.uniform(-0.2, 0.2))
            chans.append((ch - ch.mean()) / (ch.std() + 1e-3))
        out = np.stack(chans)
        if self.rng.random() < 0.5:
            out = out[:, :, ::-1]
        return torch.from_numpy(np.ascontiguousarray(out))


class Photos(Dataset):
    """Raw uint8 images in memory, augmented when an item is read."""

    def __init__(self, n: int, transform):
        rng = np.random.default_rng(7)
        self.x = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
        self.y = rng.integers(0, 10, n)
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, k):
        return self.transform(self.x[k]), int(self.y[k])


def wide_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64 * 7 * 7, 10))


@case("pt_train_transform_nw2_keeps_up", "pytorch", "training", 6,
      facts("training", dataloader_workers=2, optimizer="sgd"), split="holdout",
      warmup=3, tags=["dataloader", "workers", "transform"])
def pt_train_transform_nw2_keeps_up(variant):
    """A CNN trained on 32x32 photos through ``DataLoader(num_workers=2)`` whose dataset
    applies a hand-written crop-jitter-flip transform per image in numpy and Python:
    the two workers make a batch of 32 far faster than the convolutions use it, so the
    loop is compute-bound."""
    torch.manual_seed(0)
    model = wide_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(Photos(1024, JitterCrop()), batch_size=32, shuffle=True,
                        num_workers=2, persistent_workers=True)
    return epoch_loop(loader, model, opt)


def shut_down_with(loop: Loop, loader: DataLoader) -> Loop:
    """The loop, closing its persistent loader workers too when it is released."""
    first = loop.close_fn

    def close():
        first()
        it = getattr(loader, "_iterator", None)
        if it is not None:
            it._shutdown_workers()
    loop.close_fn = close
    return loop


# -- an inference server: a request at a time, each output read with .cpu().numpy() ------------
class IntentModel(torch.nn.Module):
    """A shared MLP trunk over a 256-feature query with three heads: intent logits, slot
    scores and a 64-wide embedding."""

    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                         torch.nn.Linear(512, 256), torch.nn.GELU())
        self.intent = torch.nn.Linear(256, 20)
        self.slots = torch.nn.Linear(256, 12)
        self.embed = torch.nn.Linear(256, 64)

    def forward(self, x):
        h = self.trunk(x)
        return {"intent": self.intent(h).softmax(-1), "slots": self.slots(h).sigmoid(),
                "embedding": F.normalize(self.embed(h), dim=-1)}


def respond(out: dict, row: int | None = None) -> dict:
    """The JSON-ready answer of one request from the model's numpy outputs."""
    pick = (lambda a: a) if row is None else (lambda a: a[row])
    intent = pick(out["intent"])
    return {"intent": int(intent.argmax()), "confidence": float(intent.max()),
            "slots": [int(k) for k in np.flatnonzero(pick(out["slots"]) > 0.5)],
            "embedding": pick(out["embedding"]).round(4).tolist()}


@case("pt_infer_server_numpy_outputs", "pytorch", "inference", 4,
      facts("inference", batch=1), split="tuned", warmup=3,
      fix="answer the step's 16 requests as one batch, one .numpy() per output",
      share_from_fix="host_overhead", per_item=16, fix_per_item=16,
      tags=["server", "batch1", "numpy", "no_dataloader"])
def pt_infer_server_numpy_outputs(variant):
    """An intent-classification server answering the 16 queries that arrive each step one
    at a time: ``with torch.no_grad()`` the three-headed model runs on one query, then
    every output is turned into numpy with ``.cpu().numpy()`` (timed as sync) and the
    answer built from it; answering the 16 as one batch, with one ``.numpy()`` per
    output, is the fix."""
    torch.manual_seed(0)
    model = IntentModel().eval()
    queries = torch.randn(256, 256, generator=torch.Generator().manual_seed(3))

    def step(i):
        batch = queries[(16 * i) % 256:(16 * i) % 256 + 16]
        if variant == "fix":
            with torch.no_grad():
                out = model(batch)
            with CLOCK("sync"):
                arrays = {k: v.cpu().numpy() for k, v in out.items()}
            return [respond(arrays, r) for r in range(16)]
        answers = []
        for r in range(16):
            with torch.no_grad():
                out = model(batch[r:r + 1])
            with CLOCK("sync"):
                arrays = {k: v.cpu().numpy()[0] for k, v in out.items()}
            answers.append(respond(arrays))
        return answers
    return Loop(step)


# -- compute: gradient clipping and a one-cycle schedule --------------------------------------
class ResidualMLP(torch.nn.Module):
    """Pre-norm residual MLP blocks (a transformer's feed-forward halves) over 128
    features."""

    def __init__(self, dim: int = 128, depth: int = 6, classes: int = 10):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(dim), torch.nn.Linear(dim, 4 * dim),
                                torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
            for _ in range(depth))
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


@case("pt_train_clip_onecycle", "pytorch", "training", 8,
      facts("training", dataloader_workers=0, optimizer="adamw"), split="tuned",
      warmup=3, share_from_fix="host_overhead", share_variant="fused", also=("foreach",),
      tags=["clip_grad_norm", "lr_scheduler", "dataloader"])
def pt_train_clip_onecycle(variant):
    """A six-block residual MLP trained with ``AdamW`` on batches of 128 from a shuffled
    in-memory DataLoader (``num_workers=0``): each step clips the gradients with
    ``torch.nn.utils.clip_grad_norm_(..., 1.0)``, steps the optimizer and a
    ``OneCycleLR`` schedule, and keeps the loss for logging: compute-bound. What
    ``AdamW(fused=True)`` saves is the share of the default per-tensor loop's overhead
    (``AdamW(foreach=True)`` is measured beside it)."""
    torch.manual_seed(0)
    model = ResidualMLP()
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}}.get(variant, {})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05, **impl)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=100_000)
    g = torch.Generator().manual_seed(4)
    data = TensorDataset(torch.randn(128 * 16, 128, generator=g),
                         torch.randint(0, 10, (128 * 16,), generator=g))
    batches, losses = epochs(DataLoader(data, batch_size=128, shuffle=True)), []

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.detach())
        del losses[:-50]
    return Loop(step, batches.close)


# -- input: a weighted sampler drawing every batch with random.choices --------------------------
class ChoicesBatchSampler:
    """Class-balanced batches drawn with ``random.choices(population, weights, k=...)``
    from the weights normalised to probabilities: Python sums the 100,000 weights,
    divides each and accumulates them again for every batch."""

    def __init__(self, weights: list[float], batch: int, batches: int, seed: int = 0):
        self.weights, self.batch, self.batches = weights, batch, batches
        self.population = range(len(weights))
        self.rng = random.Random(seed)

    def __len__(self):
        return self.batches

    def __iter__(self):
        for _ in range(self.batches):
            total = sum(self.weights)
            probs = [w / total for w in self.weights]
            yield self.rng.choices(self.population, weights=probs, k=self.batch)


def imbalanced(n: int = 100_000, seed: int = 5):
    """Feature rows of 10 classes in a long-tailed mix, and the per-row weights that
    balance them."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=g) ** 3 * 10).long()
    counts = torch.bincount(y, minlength=10).float()
    return TensorDataset(torch.randn(n, 64, generator=g), y), (1.0 / counts[y]).tolist()


BALANCED: list = []


@case("pt_train_sampler_choices", "pytorch", "training", 8,
      facts("training", dataloader_workers=2, optimizer="adam"), split="tuned",
      warmup=4, fix="torch's WeightedRandomSampler (one torch.multinomial per epoch)",
      tags=["dataloader", "workers", "sampler"])
def pt_train_sampler_choices(variant):
    """An MLP trained on a long-tailed 100,000-row table through
    ``DataLoader(num_workers=2, batch_sampler=...)`` whose hand-written batch sampler
    balances the classes with ``random.choices(range(n), weights=p, k=64)`` on the
    weights normalised afresh for every batch: the sampler runs in the main process and
    walks the 100,000 weights three times a batch, so the loop waits on it while the
    workers idle; torch's ``WeightedRandomSampler`` is the fix."""
    torch.manual_seed(0)
    if not BALANCED:
        BALANCED.append(imbalanced())
    data, weights = BALANCED[0]
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if variant == "fix":
        sampler = WeightedRandomSampler(weights, 64 * 1000,
                                        generator=torch.Generator().manual_seed(0))
        loader = DataLoader(data, batch_size=64, sampler=sampler, num_workers=2)
    else:
        loader = DataLoader(data, batch_sampler=ChoicesBatchSampler(weights, 64, 1000),
                            num_workers=2)
    return epoch_loop(loader, model, opt)
