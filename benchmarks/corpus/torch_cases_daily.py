"""Held-out PyTorch cases of everyday programs, written without looking at the advisor's
rules: a GAN trained with two optimizers, a deep stack of small Linear layers trained on
batches of 8, photos decoded with PIL in ``__getitem__`` with ``num_workers=0``, and an
MLP served after dynamic int8 quantization.
"""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_field import shut_down_with
from corpus.torch_cases_users import epochs, patch_cnn

F = torch.nn.functional


def batch_at(xs, ys, size: int, i: int):
    """Step ``i``'s batch of ``size`` rows of data held in memory, in turn."""
    k = (size * i) % len(xs)
    return xs[k:k + size], ys[k:k + size]


def clocked_step(model, opt, fetch):
    """One cross-entropy training step on the batch ``fetch()`` gives, the fetch timed as
    input (gradients cleared before the backward pass)."""
    with CLOCK("input"):
        x, y = fetch()
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach()


# -- compute: a GAN step, discriminator then generator, each with its own Adam ----------------
def generator_net():
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
        torch.nn.BatchNorm1d(256), torch.nn.ReLU(), torch.nn.Linear(256, 784), torch.nn.Tanh())


def discriminator_net():
    return torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.LeakyReLU(0.2), torch.nn.Linear(256, 256),
        torch.nn.LeakyReLU(0.2), torch.nn.Linear(256, 1))


@case("pt_train_gan_two_optimizers", "pytorch", "training", 6,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      tags=["gan", "two_optimizers"])
def pt_train_gan_two_optimizers(variant):
    """An MLP GAN on 28x28 images held in memory (batches of 64): each step updates the
    discriminator on real and generated images (the fakes detached) with one ``Adam``,
    then the generator through the discriminator with another: compute-bound."""
    torch.manual_seed(0)
    gen, disc = generator_net(), discriminator_net()
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real_images = torch.rand(2048, 784, generator=torch.Generator().manual_seed(1)) * 2 - 1
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)

    def step(i):
        with CLOCK("input"):
            real = real_images[(64 * i) % 2048:(64 * i) % 2048 + 64]
        fake = gen(torch.randn(64, 64))
        d_loss = (F.binary_cross_entropy_with_logits(disc(real), ones)
                  + F.binary_cross_entropy_with_logits(disc(fake.detach()), zeros))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = F.binary_cross_entropy_with_logits(disc(fake), ones)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        return d_loss.detach(), g_loss.detach()
    return Loop(step)


# -- per-op overhead: forty small Linear layers trained on batches of 8 -----------------------
class DeepStack(torch.nn.Module):
    """Forty 64-wide Linear layers in a ``ModuleList``, each followed by a ReLU."""

    def __init__(self, depth: int = 40, width: int = 64, classes: int = 10):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)


@case("pt_train_deep_stack_batch8", "pytorch", "training", 4,
      facts("training", optimizer="sgd"), split="tuned", warmup=3,
      fix="train on batches of 128", share_from_fix="host_overhead", per_item=8,
      fix_per_item=128, tags=["small_batch", "many_layers"])
def pt_train_deep_stack_batch8(variant):
    """A 40-layer stack of 64-wide ``Linear`` layers (a ``ModuleList`` looped in
    ``forward``) trained with SGD and momentum on batches of 8 rows from memory: every
    layer's forward, backward and update is a handful of tiny ops, so the step is the
    cost of calling them; training on batches of 128 is the fix (per row)."""
    torch.manual_seed(0)
    model = DeepStack()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch = 128 if variant == "fix" else 8
    g = torch.Generator().manual_seed(2)
    xs, ys = torch.randn(4096, 64, generator=g), torch.randint(0, 10, (4096,), generator=g)

    def step(i):
        with CLOCK("input"):
            k = (batch * i) % 4096
            x, y = xs[k:k + batch], ys[k:k + batch]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step)


# -- input: PNG photos decoded with PIL in __getitem__, num_workers=0 -------------------------
class PngPhotos(Dataset):
    """128x128 RGB photos stored as PNG bytes; an item is decoded with PIL, resized to
    32x32 and turned into a normalised CHW tensor."""

    PNGS: list[bytes] = []

    def __init__(self, n: int = 512):
        if not self.PNGS:
            rng = np.random.default_rng(9)
            base = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
            for _ in range(n):
                img = np.kron(base, np.ones((8, 8, 1), np.uint8))
                img = (img + rng.integers(0, 40, img.shape, dtype=np.uint8)).astype(np.uint8)
                buf = io.BytesIO()
                Image.fromarray(img).save(buf, format="PNG")
                self.PNGS.append(buf.getvalue())
        self.labels = [k % 10 for k in range(len(self.PNGS))]

    def __len__(self):
        return len(self.PNGS)

    def __getitem__(self, k):
        img = Image.open(io.BytesIO(self.PNGS[k])).convert("RGB").resize((32, 32))
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
        return (x - 0.5) / 0.25, self.labels[k]


@case("pt_train_pil_decode_nw0", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="adam"),
      warmup=3, fix=LOADER_FIX, variants=LOADER_VARIANTS, tags=["dataloader", "pil"])
def pt_train_pil_decode_nw0(variant):
    """A small CNN trained on PNG photos that the Dataset decodes with PIL, resizes and
    normalises in ``__getitem__``, through the default ``DataLoader(num_workers=0)``
    (batches of 32, shuffled, epoch after epoch): the step waits for the decoding."""
    torch.manual_seed(0)
    model = patch_cnn()
    return shuffled_epochs(PngPhotos(), 32, workers(variant), model,
                           torch.optim.Adam(model.parameters(), lr=1e-3))


def shuffled_epochs(dataset: Dataset, batch: int, n: int, model, opt) -> Loop:
    """Training on ``dataset`` epoch after epoch through a shuffled
    ``DataLoader(num_workers=n)`` (its workers persistent), the fetch timed as input."""
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=n,
                        persistent_workers=n > 0)
    batches = epochs(loader)

    def step(i):
        return clocked_step(model, opt, lambda: next(batches))
    return shut_down_with(Loop(step, batches.close), loader)


# -- compute: dynamic int8 quantized inference ---------------------------------------------------
@case("pt_infer_dynamic_int8", "pytorch", "inference", 6,
      facts("inference", precision="int8"), split="tuned", warmup=3,
      tags=["quantized", "int8"])
def pt_infer_dynamic_int8(variant):
    """A 256-1024-1024-256-10 MLP classifier converted with
    ``torch.ao.quantization.quantize_dynamic({nn.Linear}, dtype=torch.qint8)`` and
    run under ``torch.inference_mode()`` on batches of 64 feature rows held in memory,
    the predicted classes read with one ``.tolist()``: compute-bound."""
    import warnings

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(), torch.nn.Linear(1024, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.ao.quantization.quantize_dynamic(net, {torch.nn.Linear},
                                                       dtype=torch.qint8)
    rows = torch.randn(1024, 256, generator=torch.Generator().manual_seed(3))

    def step(i):
        with CLOCK("input"):
            x = rows[(64 * i) % 1024:(64 * i) % 1024 + 64]
        with torch.inference_mode():
            labels = model(x).argmax(1)
        return labels.tolist()
    return Loop(step)
