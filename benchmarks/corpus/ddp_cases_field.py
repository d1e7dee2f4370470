"""Held-out DDP cases written without looking at the advisor's rules (captured and measured
by ``run_ddp.py`` on 2 CPU ranks over gloo): a CNN fed by a ``DistributedSampler`` and one
loader worker per rank whose per-image numpy augmentation starves both ranks, and a
character-level LSTM language model that clips its gradients and reads the returned norm
with ``.item()`` for the log every step.

:func:`register` registers the cases with the DDP generator's facts and returns each
case's model builder (for the all-reduce of its gradients alone).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from corpus.common import case
from corpus.ddp_cases_blind import train_loop
from corpus.torch_cases import Loop

nn = torch.nn
MEAN = np.array([0.49, 0.48, 0.45], np.float32)[:, None, None]
STD = np.array([0.25, 0.24, 0.26], np.float32)[:, None, None]


class AugmentedImages(Dataset):
    """CIFAR-sized uint8 images in memory, each augmented on its own in numpy as a
    hand-written ``transform`` does it: 4-pixel reflect padding and a random 32x32 crop,
    a random flip, brightness, contrast and saturation jitter, a 7x7 box blur and
    per-channel normalisation."""

    def __init__(self, n: int = 4096, seed: int = 31):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
        self.labels = rng.integers(0, 10, n)
        self.rng = np.random.default_rng(seed + 1)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        img = np.pad(self.images[i], ((0, 0), (4, 4), (4, 4)), mode="reflect")
        dy, dx = self.rng.integers(0, 9, 2)
        img = img[:, dy:dy + 32, dx:dx + 32].astype(np.float32) / 255.0
        if self.rng.random() < 0.5:
            img = img[:, :, ::-1]
        gray = img.mean(0, keepdims=True)
        bright, contrast, sat = self.rng.uniform(0.8, 1.2, 3).astype(np.float32)
        img = np.clip((img * bright - gray.mean()) * contrast + gray.mean(), 0.0, 1.0)
        img = np.clip(gray + (img - gray) * sat, 0.0, 1.0)
        padded = np.pad(img, ((0, 0), (3, 3), (3, 3)), mode="edge")
        img = sum(padded[:, a:a + 32, b:b + 32] for a in range(7) for b in range(7)) / 49.0
        img = (img - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(img)), int(self.labels[i])


def batch_augment(images: torch.Tensor) -> torch.Tensor:
    """The same augmentation on a whole uint8 batch with torch ops (the fix's transform)."""
    n = images.shape[0]
    x = nn.functional.pad(images.float() / 255.0, (4, 4, 4, 4), mode="reflect")
    dy, dx = torch.randint(0, 9, (2,)).tolist()
    x = x[:, :, dy:dy + 32, dx:dx + 32]
    flip = torch.rand(n) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    gray = x.mean(1, keepdim=True)
    mean = gray.mean((1, 2, 3), keepdim=True)
    bright, contrast, sat = torch.empty(3, n, 1, 1, 1).uniform_(0.8, 1.2)
    x = ((x * bright - mean) * contrast + mean).clamp(0.0, 1.0)
    x = (gray + (x - gray) * sat).clamp(0.0, 1.0)
    x = nn.functional.avg_pool2d(nn.functional.pad(x, (3, 3, 3, 3), mode="replicate"), 7, 1)
    return (x - torch.from_numpy(MEAN)) / torch.from_numpy(STD)


class RawImages(AugmentedImages):
    """The same images handed over as they are stored (uint8), for the batch to be augmented
    at once."""

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]), int(self.labels[i])


class TutorialNet(nn.Module):
    """The CIFAR-10 tutorial's network: conv 3-6-16 (5x5) with max pooling, fully connected
    400-120-84-10: 62 K parameters."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 6, 5), nn.Conv2d(6, 16, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc = nn.Sequential(nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84),
                                nn.ReLU(), nn.Linear(84, 10))

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class CharLM(nn.Module):
    """Embedding (96 symbols, 64), a 2-layer LSTM of 256, a linear decoder: 0.9 M
    parameters."""

    def __init__(self, vocab: int = 96, emb: int = 64, hidden: int = 256):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.out(self.lstm(self.emb(x))[0])


def register(facts: dict) -> dict:
    """Register this module's cases; {case: its model builder}."""

    @case("pt_ddp_gloo_sampler_workers_starved", "pytorch", "training", 8,
          {**facts, "optimizer": "sgd", "dataloader_workers": 1}, split="tuned",
          warmup=3, fix="the batch augmented at once with torch ops in the rank",
          variants=("num_workers=2",), share_from_fix="input", share_variant="bare",
          tags=["ddp", "gloo", "dataloader", "distributed_sampler", "starved"])
    def pt_ddp_gloo_sampler_workers_starved(variant):
        """DDP over gloo on 2 CPU ranks training the CIFAR-10 tutorial's network (two 5x5
        conv layers and three linear ones, 62 K parameters, SGD with momentum) on images from a
        ``DataLoader(batch_size=64, sampler=DistributedSampler(...), num_workers=1)`` per
        rank, ``sampler.set_epoch`` each epoch; the dataset augments each image on its own
        in numpy (reflect-pad and crop, flip, colour jitter, 7x7 box blur, normalisation),
        slower than the step, so both ranks wait for their batch.  The fix loads the uint8 images
        as they are and augments the whole batch with torch ops in the rank; measured
        beside it, ``num_workers=2`` per rank.  The loader's workers share the two cores
        with the ranks, so the input share is what the same steps on batches augmented
        beforehand and held in memory (``bare``) save."""
        torch.manual_seed(0)
        model = DDP(TutorialNet())
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        if variant == "bare":
            ready = DataLoader(AugmentedImages(), batch_size=64, drop_last=True)
            return train_loop(model, opt, [b for b, _ in zip(ready, range(8))])
        dataset = RawImages() if variant == "fix" else AugmentedImages()
        sampler = DistributedSampler(dataset, shuffle=True, seed=0)
        workers = 2 if variant == "num_workers=2" else 1
        loader = DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=workers,
                            persistent_workers=True, drop_last=True)

        def by_epoch():
            epoch = 0
            while True:
                sampler.set_epoch(epoch)
                yield from loader
                epoch += 1
        batches = by_epoch()

        def step(i):
            images, labels = next(batches)
            if variant == "fix":
                images = batch_augment(images)
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        def close():
            batches.close()
            if loader._iterator is not None:
                loader._iterator._shutdown_workers()
        return Loop(step, close)

    @case("pt_ddp_gloo_clip_norm_item", "pytorch", "training", 6,
          {**facts, "optimizer": "sgd"}, split="holdout",
          fix="the clipped norm read every 50th step", share_from_fix="communication",
          share_variant="bare", tags=["ddp", "gloo", "clip_grad_norm", "item", "lstm"])
    def pt_ddp_gloo_clip_norm_item(variant):
        """DDP over gloo on 2 CPU ranks training a character-level language model (an
        embedding, a 2-layer LSTM of 256, 0.9 M parameters) with SGD on batches of 16
        sequences of 32 characters, as the word-language-model example writes its loop:
        ``clip_grad_norm_(model.parameters(), 0.25)`` after the backward, and the norm it
        returns read with ``.item()`` every step for the log beside the loss.  The fix
        tried reads the norm and the loss every 50th step; the communication share is
        what the loop without DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = CharLM()
        model = net if variant == "bare" else DDP(net)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        g = torch.Generator().manual_seed(41 + dist.get_rank())
        data = [torch.randint(0, 96, (16, 33), generator=g) for _ in range(4)]
        log = []

        def step(i):
            seq = data[i % len(data)]
            out = model(seq[:, :-1])
            loss = nn.functional.cross_entropy(out.reshape(-1, 96), seq[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            if variant != "fix" or i % 50 == 0:
                log.append((loss.item(), norm.item()))
            return loss
        return step

    return {"pt_ddp_gloo_sampler_workers_starved": TutorialNet,
            "pt_ddp_gloo_clip_norm_item": CharLM}

