"""Held-out PyTorch cases of routine programs, written without looking at the advisor's
rules: a Dataset that ``np.load``-s one small ``.npy`` file per sample through
``DataLoader(num_workers=0)``, a transformer encoder served with ``torch.no_grad()``
forgotten, per-layer gradient norms read with one ``.item()`` each for logging and
clipping, and random crops and flips made sample by sample in Python before the model.
"""

from __future__ import annotations

import atexit
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_daily import batch_at, clocked_step, shuffled_epochs
from corpus.torch_cases_more_daily import residual_mlp, rows
from corpus.torch_cases_users import patch_cnn

F = torch.nn.functional


# -- input: one .npy file loaded per sample, num_workers=0 -----------------------------------
class NpyFolder(Dataset):
    """Samples stored one per ``.npy`` file (a 3x32x32 float32 array each) in a folder, as
    a preprocessing script leaves them; an item opens and loads its file."""

    FOLDER: list[Path] = []

    def __init__(self, n: int = 1024):
        if not self.FOLDER:
            folder = Path(tempfile.mkdtemp(prefix="npy-samples-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            rng = np.random.default_rng(11)
            for k in range(n):
                np.save(folder / f"{k:05d}.npy",
                        rng.standard_normal((3, 32, 32), dtype=np.float32))
            self.FOLDER.append(folder)
        self.files = sorted(self.FOLDER[0].glob("*.npy"))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, k):
        return torch.from_numpy(np.load(self.files[k])), k % 10


@case("pt_train_npy_files_nw0", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="sgd"),
      warmup=3, fix=LOADER_FIX, variants=LOADER_VARIANTS, tags=["dataloader", "npy_files"])
def pt_train_npy_files_nw0(variant):
    """A 3072-128-10 MLP trained with SGD and momentum on samples the Dataset loads from one
    ``.npy`` file each (``np.load`` in ``__getitem__``, 1,024 files of 12 KB), through
    the default ``DataLoader(num_workers=0)`` (batches of 64, shuffled, epoch after
    epoch): every batch opens and reads 64 files in the main process."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return shuffled_epochs(NpyFolder(), 64, workers(variant), model, opt)


# -- compute: a transformer encoder served with autograd left on ------------------------------
@case("pt_infer_encoder_grad_enabled", "pytorch", "inference", 6, facts("inference"),
      split="tuned", warmup=3, fix="the forward under torch.inference_mode()",
      tags=["transformer", "no_grad_forgotten"])
def pt_infer_encoder_grad_enabled(variant):
    """A 2-layer ``nn.TransformerEncoder`` (d_model 128, 4 heads, feed-forward 512) with a
    mean-pooled classification head, put in ``eval()`` and run on batches of 16 sequences
    of 64 tokens held in memory, the ``torch.no_grad()`` forgotten: autograd records
    every op of the forward and the encoder takes its ordinary (not its fused inference)
    path; the predicted classes are read with one ``.tolist()``.  The forward under
    ``torch.inference_mode()`` is the fix."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    head = torch.nn.Linear(128, 5).eval()
    seqs = torch.randn(256, 64, 128, generator=torch.Generator().manual_seed(4))

    def forward(x):
        return head(encoder(x).mean(1)).argmax(1)

    def step(i):
        with CLOCK("input"):
            x = seqs[(16 * i) % 256:(16 * i) % 256 + 16]
        if variant == "fix":
            with torch.inference_mode():
                labels = forward(x)
        else:
            labels = forward(x)
        return labels.tolist()
    return Loop(step)


# -- sync: per-layer gradient norms read with one .item() each ---------------------------------
@case("pt_train_grad_norms_item", "pytorch", "training", 6,
      facts("training", optimizer="adam"), split="tuned", warmup=3,
      fix="the norms of one torch._foreach_norm, read with one .tolist()",
      share_from_fix="host_overhead", share_variant="adam_fused",
      tags=["item", "grad_norm", "logging"])
def pt_train_grad_norms_item(variant):
    """A residual MLP (8 LayerNorm-Linear-GELU-Linear blocks, 128 wide, 54 parameter
    tensors) trained with Adam on batches of 32 rows from memory, whose loop logs each
    parameter's gradient norm every step: ``{name: p.grad.norm().item()}`` over the
    named parameters, the total norm summed in Python from them and every gradient
    scaled with ``mul_`` when it is over 1.0, before ``opt.step()``.  The fix computes the
    norms with one ``torch._foreach_norm``, clips with one ``torch._foreach_mul_`` by a
    coefficient left as a tensor and reads the norms with one ``.tolist()``.  Adam's
    default per-tensor loop is per-op overhead: what ``Adam(fused=True)`` saves, measured
    beside the run (``adam_fused``)."""
    torch.manual_seed(0)
    model = residual_mlp(width=128, blocks=8)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=variant == "adam_fused" or None)
    named = list(model.named_parameters())
    xs, ys = rows(4096, 64, 10, seed=8)

    def step(i):
        with CLOCK("input"):
            x, y = batch_at(xs, ys, 32, i)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if variant == "fix":
            grads = [p.grad for _, p in named]
            norms = torch.stack(torch._foreach_norm(grads))
            torch._foreach_mul_(grads, (1.0 / (norms.norm() + 1e-6)).clamp(max=1.0))
            logged = dict(zip((n for n, _ in named), norms.tolist()))
        else:
            with CLOCK("sync"):
                logged = {n: p.grad.norm().item() for n, p in named}
                total = sum(v * v for v in logged.values()) ** 0.5
                if total > 1.0:
                    for _, p in named:
                        p.grad.mul_(1.0 / (total + 1e-6))
        opt.step()
        return logged
    return Loop(step)


# -- per-op overhead: random crops and flips made sample by sample in Python -----------------
def crop_flip_each(images, size: int, rng: random.Random):
    """Each image of the batch cropped at a random offset and flipped left-right half the
    time, one image at a time, the results stacked."""
    out = []
    room = images.shape[-1] - size
    for img in images:
        top, left = rng.randint(0, room), rng.randint(0, room)
        crop = img[:, top:top + size, left:left + size]
        out.append(crop.flip(-1) if rng.random() < 0.5 else crop)
    return torch.stack(out)


def crop_flip_batched(images, size: int, rng: random.Random):
    """The same crops and flips as :func:`crop_flip_each` (the same draws), made for the
    whole batch at once: one gather from the images' sliding windows, one ``where``."""
    n, room = len(images), images.shape[-1] - size
    draws = [(rng.randint(0, room), rng.randint(0, room), rng.random() < 0.5)
             for _ in range(n)]
    top, left, flip = (torch.tensor(c) for c in zip(*draws))
    crops = images.unfold(2, size, 1).unfold(3, size, 1)[torch.arange(n), :, top, left]
    return torch.where(flip[:, None, None, None], crops.flip(-1), crops)


@case("pt_train_crop_flip_loop", "pytorch", "training", 6,
      facts("training", optimizer="sgd"), split="tuned", warmup=3,
      fix="the crops and flips made for the whole batch at once",
      tags=["augmentation", "python_loop"])
def pt_train_crop_flip_loop(variant):
    """A small CNN trained with SGD and momentum on 40x40 images held in memory (batches
    of 128), each batch augmented on the main thread before the model: a Python loop over
    its images crops each at a random offset to 32x32 and flips it left-right half the
    time, then ``torch.stack``-s them.  Making the batch (its slice and the augmentation)
    is timed as input; the fix makes the same crops and flips for the whole batch at once
    (one gather from the sliding windows)."""
    torch.manual_seed(0)
    model = patch_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(12)
    xs, ys = torch.randn(1024, 3, 40, 40, generator=g), torch.randint(0, 10, (1024,),
                                                                      generator=g)
    rng = random.Random(3)
    augment = crop_flip_batched if variant == "fix" else crop_flip_each

    def fetch(i):
        x, y = batch_at(xs, ys, 128, i)
        return augment(x, 32, rng), y

    def step(i):
        return clocked_step(model, opt, lambda: fetch(i))
    return Loop(step)
