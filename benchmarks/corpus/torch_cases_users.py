"""Held-out PyTorch cases written as users write ordinary loops, without looking at the
advisor's rules: two loader workers starved by a Python-heavy ``__getitem__`` (JSON
records hashed into features), loader workers started afresh every short epoch
(``persistent_workers=False``), a tiny vision transformer answering images one at a
time, and a conv net trained in bf16 with the batch cast by hand every step.
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, ce_step, facts

F = torch.nn.functional


# -- input: two workers starved by a Python-heavy __getitem__ ---------------------------------
HASH_DIM = 2048
EVENT_WORDS = [f"tok{k}" for k in range(3000)]


def event_record(k: int) -> str:
    """One raw log event as the JSON line a service writes: a user, a device and a free
    text field of 80..240 words."""
    rng = np.random.default_rng(k)
    words = [EVENT_WORDS[j] for j in rng.integers(0, len(EVENT_WORDS), 80 + k % 161)]
    return json.dumps({"user": int(rng.integers(1 << 20)), "device": f"d{k % 17}",
                       "text": " ".join(words), "label": int(k % 3)})


def hashed_features(line: str) -> tuple[list[float], int]:
    """Parse one JSON event, hash its fields, words and word bigrams into
    :data:`HASH_DIM` buckets (the hashing trick, in Python), L2-normalise."""
    rec = json.loads(line)
    vec = [0.0] * HASH_DIM
    words = rec["text"].lower().split()
    keys = [f"user={rec['user']}", f"device={rec['device']}", *words,
            *(f"{a}_{b}" for a, b in zip(words, words[1:]))]
    for key in keys:
        h = zlib.crc32(key.encode())
        vec[h % HASH_DIM] += 1.0 if h & 1 << 31 else -1.0
    norm = sum(v * v for v in vec) ** 0.5 or 1.0
    return [v / norm for v in vec], rec["label"]


class EventLog(Dataset):
    """Raw JSON lines; each item parsed and hashed into features when it is read."""

    def __init__(self, n: int):
        self.lines = [event_record(k) for k in range(n)]

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, k):
        vec, label = hashed_features(self.lines[k])
        return torch.tensor(vec), label


def hashed_cache(data: EventLog) -> TensorDataset:
    """The same features hashed once, ahead of training (the fix)."""
    rows = [hashed_features(line) for line in data.lines]
    return TensorDataset(torch.tensor([v for v, _ in rows]),
                         torch.tensor([label for _, label in rows]))


EVENTS: list[EventLog] = []


def epochs(loader: DataLoader):
    """The batches of epoch after epoch, as ``for epoch ...: for x, y in loader`` yields
    them (a loader's workers start with each epoch's iterator and stop at its end)."""
    while True:
        yield from loader


def epoch_loop(loader: DataLoader, model, opt) -> Loop:
    """Fetch the next batch of the epochs (phase ``input``), one cross-entropy step."""
    batches = epochs(loader)

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        ce_step(model, opt, x, y)
    return Loop(step, batches.close)


@case("pt_train_getitem_nw2_starved", "pytorch", "training", 8,
      facts("training", dataloader_workers=2, optimizer="adam"), split="tuned",
      warmup=3, fix="hash the features once into a tensor cache",
      tags=["dataloader", "workers", "starved", "json"])
def pt_train_getitem_nw2_starved(variant):
    """A small MLP event classifier trained from ``DataLoader(num_workers=2)`` whose
    ``__getitem__`` parses a JSON line and hashes its words and bigrams into 2048
    features in Python: the two workers together make a batch slower than the step
    uses it, so the loop waits for them (input-bound); the fix hashes the features
    once into a tensor cache."""
    torch.manual_seed(0)
    if not EVENTS:
        EVENTS.append(EventLog(1024))
    data = hashed_cache(EVENTS[0]) if variant == "fix" else EVENTS[0]
    model = torch.nn.Sequential(torch.nn.Linear(HASH_DIM, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(data, batch_size=32, shuffle=True,
                        num_workers=0 if variant == "fix" else 2)
    return epoch_loop(loader, model, opt)


# -- input: loader workers started again every short epoch ------------------------------------
class Patches(Dataset):
    """Small image patches with a light flip-and-normalise per item (cheap for a worker)."""

    def __init__(self, n: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 3, 32, 32, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, k):
        img = self.x[k].flip(2) if k % 2 else self.x[k]
        return (img - img.mean()) / (img.std() + 1e-6), self.y[k]


def patch_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 8 * 8, 10))


@case("pt_train_workers_respawn_epochs", "pytorch", "training", 8,
      facts("training", dataloader_workers=2, optimizer="sgd"),
      fix="persistent_workers=True", tags=["dataloader", "workers", "epochs"])
def pt_train_workers_respawn_epochs(variant):
    """A small CNN trained for many short epochs (4 batches of 32 each) from
    ``DataLoader(num_workers=2)`` with the default ``persistent_workers=False``: every
    epoch's ``iter(loader)`` starts two worker processes again, and the epoch's first
    batch waits for them; ``persistent_workers=True`` is the fix."""
    torch.manual_seed(0)
    model = patch_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(Patches(4 * 32), batch_size=32, shuffle=True, num_workers=2,
                        persistent_workers=variant == "fix")
    return epoch_loop(loader, model, opt)


# -- host overhead: a tiny vision transformer answering one image at a time -------------------
class Attention(torch.nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1) * self.scale).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, n, d))


class ViTBlock(torch.nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.n1, self.n2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.att = Attention(dim, heads)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.att(self.n1(x))
        return x + self.mlp(self.n2(x))


class TinyViT(torch.nn.Module):
    """32x32 images in 8x8 patches (16 tokens and a class token), 3 blocks of width 64."""

    def __init__(self, dim: int = 64, depth: int = 3, heads: int = 4, classes: int = 10):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, dim, 8, stride=8)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = torch.nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        self.blocks = torch.nn.Sequential(*(ViTBlock(dim, heads) for _ in range(depth)))
        self.norm, self.head = torch.nn.LayerNorm(dim), torch.nn.Linear(dim, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


@case("pt_infer_vit_batch1", "pytorch", "inference", 3, facts("inference", batch=1),
      fix="classify the step's 8 images in one batch",
      share_from_fix="host_overhead", per_item=8, fix_per_item=8,
      tags=["vit", "batch1", "no_dataloader"])
def pt_infer_vit_batch1(variant):
    """A tiny vision transformer (3 blocks, width 64, 17 tokens) classifying the 8 images
    that arrive each step one at a time (batch 1, ``torch.inference_mode``): a few
    hundred small ops per image, so per-op overhead is most of the step; one batch of
    the 8 images is the fix."""
    torch.manual_seed(0)
    model = TinyViT().eval()
    images = torch.randn(64, 3, 32, 32, generator=torch.Generator().manual_seed(1))

    def step(i):
        batch = images[(8 * i) % 64:(8 * i) % 64 + 8]
        with torch.inference_mode():
            if variant == "fix":
                return model(batch).argmax(1).tolist()
            return [int(model(batch[k:k + 1]).argmax(1)) for k in range(8)]
    return Loop(step)


# -- compute: a conv net trained in bf16, the batch cast by hand ------------------------------
def bf16_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 8 * 8, 10))


@case("pt_train_bf16_manual_casts", "pytorch", "training", 6,
      facts("training", precision="bf16", dataloader_workers=0, optimizer="sgd"),
      split="holdout", also=("fp32",), tags=["bf16", "casts", "dataloader"])
def pt_train_bf16_manual_casts(variant):
    """A CNN converted with ``model.to(torch.bfloat16)`` and trained on fp32 batches from a
    DataLoader (``num_workers=0``, tensors in memory): every step casts the images to
    bf16 by hand and the logits back to fp32 for the loss (timed as copies); the same
    model in fp32 is measured beside it (``fp32``)."""
    torch.manual_seed(0)
    dtype = torch.float32 if variant == "fp32" else torch.bfloat16
    model = bf16_cnn().to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    data = TensorDataset(torch.randn(32 * 16, 3, 32, 32, generator=g),
                         torch.randint(0, 10, (32 * 16,), generator=g))
    batches = epochs(DataLoader(data, batch_size=32, shuffle=True))

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        with CLOCK("copy"):
            x = x.to(dtype)
        out = model(x)
        with CLOCK("copy"):
            out = out.float()
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step)
