"""Held-out PyTorch cases around data loading and inference, written without looking at
the advisor's rules: two loader workers rotating, cropping and noising each image with
NumPy in ``__getitem__`` for a small CNN, sliding-window inference over a long signal one
window at a time, a retrieval service that embeds a batch of queries and ranks a document
matrix with ``torch.topk``, and an evaluation pass whose hand-written, torchmetrics-style
metric objects update a confusion matrix sample by sample.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- input: per-item NumPy augmentation in two loader workers ----------------------------------
def rotation_grid(size: int, angle: float) -> tuple[np.ndarray, np.ndarray]:
    """Source rows and columns of a nearest-neighbour rotation of a size x size image by
    ``angle`` radians about its centre (clipped at the border)."""
    c = (size - 1) / 2
    yy, xx = np.meshgrid(np.arange(size) - c, np.arange(size) - c, indexing="ij")
    cos, sin = math.cos(angle), math.sin(angle)
    src_y = np.clip(np.rint(cos * yy - sin * xx + c), 0, size - 1).astype(np.intp)
    src_x = np.clip(np.rint(sin * yy + cos * xx + c), 0, size - 1).astype(np.intp)
    return src_y, src_x


class RotatedPatches(Dataset):
    """144x144 RGB images (uint8, in memory) augmented per item with NumPy as a user
    writes it without OpenCV: a random rotation of up to 30 degrees, a random 128x128
    crop halved to 64x64 (2x2 means), a horizontal flip, brightness and contrast jitter,
    per-pixel Gaussian noise and per-channel normalisation."""

    def __init__(self, n: int = 1024, seed: int = 11):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, (n, SRC, SRC, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, n)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, k):
        rng = np.random.default_rng()
        img = self.images[k].astype(np.float32) / 255.0
        src_y, src_x = rotation_grid(SRC, math.radians(rng.uniform(-30, 30)))
        img = img[src_y, src_x]
        top, left = rng.integers(0, SRC - 127, 2)
        img = img[top:top + 128, left:left + 128].reshape(64, 2, 64, 2, 3).mean(axis=(1, 3))
        if rng.random() < 0.5:
            img = img[:, ::-1]
        mean = img.mean()
        img = (img - mean) * rng.uniform(0.7, 1.3) + mean * rng.uniform(0.7, 1.3)
        img = img + rng.normal(0.0, 0.05, img.shape).astype(np.float32)
        img = (np.clip(img, 0.0, 1.0) - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), \
            int(self.labels[k])


SRC = 144
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


class BatchRotatedPatches(RotatedPatches):
    """The same images and augmentation, made a batch at a time: ``__getitems__`` (which
    the DataLoader's workers call with the batch's indices) augments the batch with torch
    ops, as kornia or torchvision's v2 transforms do on a batch: one ``affine_grid`` /
    ``grid_sample`` (bilinear, to 64x64) for rotation, crop, flip and halving, jitter by
    broadcast factors, noise with ``randn_like``."""

    def __getitems__(self, ks):
        b = len(ks)
        x = torch.from_numpy(self.images[ks]).permute(0, 3, 1, 2).float().div_(255)
        ang = torch.empty(b).uniform_(-math.pi / 6, math.pi / 6)
        flip = torch.where(torch.rand(b) < 0.5, -1.0, 1.0)
        shift = torch.randint(0, SRC - 127, (b, 2)).float()
        cos, sin, scale = torch.cos(ang), torch.sin(ang), 128 / SRC
        theta = torch.stack([torch.stack([scale * cos * flip, -scale * sin,
                                          (shift[:, 0] - 8) * 2 / SRC], 1),
                             torch.stack([scale * sin * flip, scale * cos,
                                          (shift[:, 1] - 8) * 2 / SRC], 1)], 1)
        grid = F.affine_grid(theta, [b, 3, 64, 64], align_corners=False)
        x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        x = (x - mean) * torch.empty(b, 1, 1, 1).uniform_(0.7, 1.3) + \
            mean * torch.empty(b, 1, 1, 1).uniform_(0.7, 1.3)
        x = (x + 0.05 * torch.randn_like(x)).clamp_(0.0, 1.0)
        x = (x - torch.from_numpy(MEAN).view(1, 3, 1, 1)) / torch.from_numpy(STD).view(1, 3, 1, 1)
        return list(zip(x.unbind(0), self.labels[ks].tolist()))


class SmallCNN(nn.Module):
    """Two strided conv-ReLU blocks (8 and 16 channels), global average pooling and a
    linear classifier."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


AUG_BATCH = 32


@case("pt_train_numpy_rotate_nw2", "pytorch", "training", 8,
      facts("training", dataloader_workers=2, optimizer="sgd"), split="tuned", warmup=4,
      fix="the Dataset augments each batch at once with torch ops (__getitems__)",
      also=("num_workers=4",), tags=["dataloader", "workers", "augment", "numpy"])
def pt_train_numpy_rotate_nw2(variant):
    """A small CNN trained with SGD and momentum on 64x64 crops from a
    ``DataLoader(batch_size=32, shuffle=True, num_workers=2, persistent_workers=True)``
    whose ``__getitem__`` augments each 144x144 image with NumPy: a nearest-neighbour
    rotation of up to 30 degrees through an index grid, a random 128x128 crop halved to
    64x64, a flip, brightness and contrast
    jitter, Gaussian noise and normalisation.  The fix keeps the loader and its two
    workers and has the Dataset augment each batch at once with torch ops in
    ``__getitems__`` (``affine_grid`` / ``grid_sample``); four workers, what a user tries
    first, are measured beside."""
    torch.manual_seed(0)
    data = BatchRotatedPatches() if variant == "fix" else RotatedPatches()
    loader = DataLoader(data, batch_size=AUG_BATCH, shuffle=True, drop_last=True,
                        num_workers=4 if variant == "num_workers=4" else 2,
                        persistent_workers=True)
    batches = epochs(loader)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)


# -- host overhead: sliding-window inference one window at a time ------------------------------
class SignalNet(nn.Module):
    """A 1-D CNN labelling windows of a 3-channel sensor signal (4 classes)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(3, 16, 7, padding=3), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
            nn.Flatten(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


WINDOW, HOP = 128, 64


@case("pt_infer_sliding_window_signal", "pytorch", "inference", 4,
      facts("inference"), split="tuned", warmup=3,
      fix="the windows made with unfold and labelled in one batch",
      share_from_fix="host_overhead", tags=["sliding_window", "python_loop", "batch1"])
def pt_infer_sliding_window_signal(variant):
    """Activity recognition over a recording: each step labels the next 4,160 samples of a
    3-channel accelerometer signal with a 1-D CNN under ``torch.no_grad()``, window by
    window (128 samples, hop 64: 64 windows), each window sliced, ``unsqueeze(0)``-ed,
    run through the model and its class read with ``.argmax().item()`` into a Python
    list.  The fix makes the windows with ``unfold`` and labels them in one batch, the
    classes read with one ``.tolist()``."""
    torch.manual_seed(0)
    model = SignalNet().eval()
    signal = torch.randn(3, 64 * 4160 + WINDOW, generator=torch.Generator().manual_seed(3))
    span = HOP * 64

    def step(i):
        start = (i % 64) * span
        chunk = signal[:, start:start + span + WINDOW - HOP]
        with torch.no_grad():
            if variant == "fix":
                windows = chunk.unfold(1, WINDOW, HOP).permute(1, 0, 2)
                return model(windows).argmax(1).tolist()
            labels = []
            for s in range(0, span, HOP):
                out = model(chunk[:, s:s + WINDOW].unsqueeze(0))
                labels.append(out.argmax().item())
            return labels
    return Loop(step)


# -- compute: a retrieval service ranking documents with topk ----------------------------------
class QueryEncoder(nn.Module):
    """Mean of token embeddings (``nn.EmbeddingBag``) through a 2-layer MLP to 128
    dimensions, L2-normalised."""

    def __init__(self, vocab: int = 30000, dim: int = 128):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, 256, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, dim))

    def forward(self, tokens, offsets):
        return F.normalize(self.mlp(self.emb(tokens, offsets)), dim=1)


@case("pt_infer_retrieval_topk", "pytorch", "inference", 6, facts("inference"),
      split="holdout", warmup=3, tags=["retrieval", "topk", "server"])
def pt_infer_retrieval_topk(variant):
    """A semantic search service: each step embeds a batch of 32 queries (8 to 24 tokens,
    flattened with offsets into an ``nn.EmbeddingBag`` encoder) under
    ``torch.inference_mode()``, scores them against 50,000 normalised 128-dimensional
    document embeddings with one matmul, takes ``torch.topk(k=10)`` and returns each
    query's document ids and scores as Python lists (one ``.tolist()`` each).  Nothing
    but the service's work in the step."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(9)
    encoder = QueryEncoder().eval()
    docs = F.normalize(torch.randn(50000, 128, generator=g), dim=1)
    doc_ids = [f"doc-{k:05d}" for k in range(50000)]
    lengths = torch.randint(8, 25, (256,), generator=g)
    tokens = torch.randint(0, 30000, (int(lengths.sum()),), generator=g)
    starts = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])

    def step(i):
        first = (32 * i) % 256
        lo, hi = int(starts[first]), int(starts[first + 31] + lengths[first + 31])
        offsets = starts[first:first + 32] - lo
        with torch.inference_mode():
            q = encoder(tokens[lo:hi], offsets)
            scores, idx = torch.topk(q @ docs.T, k=10, dim=1)
        return [[(doc_ids[j], s) for j, s in zip(row_i, row_s)]
                for row_i, row_s in zip(idx.tolist(), scores.tolist())]
    return Loop(step)


# -- host overhead or compute: evaluation with hand-written metric objects ---------------------
class ConfusionMatrix:
    """A torchmetrics-style metric written by hand: ``update(preds, target)`` per batch,
    ``compute()`` at the end; the matrix is counted sample by sample."""

    def __init__(self, classes: int):
        self.mat = torch.zeros(classes, classes, dtype=torch.long)

    def update(self, preds, target):
        for t, p in zip(target, preds):
            self.mat[t, p] += 1

    def compute(self):
        return self.mat


class MeanMetric:
    """A running mean (loss), kept as a tensor."""

    def __init__(self):
        self.total, self.count = torch.zeros(()), 0

    def update(self, value, n):
        self.total += value * n
        self.count += n

    def compute(self):
        return self.total / self.count


class BincountConfusion(ConfusionMatrix):
    """The same matrix from one ``torch.bincount`` of ``target * C + preds`` a batch."""

    def update(self, preds, target):
        c = self.mat.size(0)
        self.mat += torch.bincount(target * c + preds, minlength=c * c).view(c, c)


@case("pt_infer_metric_objects_eval", "pytorch", "inference", 6,
      facts("inference"), split="tuned", warmup=3,
      fix="the confusion matrix counted with one torch.bincount a batch",
      share_from_fix="host_overhead", tags=["metrics", "python_loop", "evaluation"])
def pt_infer_metric_objects_eval(variant):
    """An evaluation pass of a 128-512-256-10 MLP classifier over 4,096 feature rows held
    in memory (batches of 256) under ``torch.no_grad()`` with hand-written,
    torchmetrics-style metric objects: a ``MeanMetric`` for the loss and a 10-class
    ``ConfusionMatrix`` whose ``update`` loops over the batch's (target, prediction) pairs
    and adds one to ``mat[t, p]`` per sample; per-class precision, recall and F1 are
    computed from the matrix at each batch for the progress bar.  The fix counts the
    matrix with one ``torch.bincount`` per batch."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                          nn.Linear(256, 10)).eval()
    rows = torch.randn(4096, 128, generator=torch.Generator().manual_seed(5))
    labels = torch.randint(0, 10, (4096,), generator=torch.Generator().manual_seed(6))
    confusion = BincountConfusion(10) if variant == "fix" else ConfusionMatrix(10)
    loss_avg = MeanMetric()

    def step(i):
        k = (256 * i) % 4096
        x, y = rows[k:k + 256], labels[k:k + 256]
        with torch.no_grad():
            logits = model(x)
            loss_avg.update(F.cross_entropy(logits, y), y.numel())
            confusion.update(logits.argmax(1), y)
            mat = confusion.compute().float()
            tp = mat.diag()
            precision = tp / mat.sum(0).clamp(min=1)
            recall = tp / mat.sum(1).clamp(min=1)
            f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-8)
        return loss_avg.compute(), f1.mean()
    return Loop(step)
