"""Held-out PyTorch cases of programs as the PyTorch tutorials write them, written without
looking at the advisor's rules: the quickstart's ``test_loop`` over FashionMNIST-shaped
images that the Dataset turns into tensors one by one (``DataLoader(num_workers=0)``, two
``.item()`` reads per batch), the char-RNN name classifier that feeds one letter at a time
through an ``nn.RNN`` and trains on one name per step with a hand-written SGD update, and
the DCGAN loop (two Adam optimizers, ``D(fake.detach())``, three backward passes and the
tutorial's ``.item()`` statistics every step) on 32x32 images.
"""

from __future__ import annotations

import random
import string

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn


# -- input: the quickstart's test_loop, images made into tensors one by one --------------------
def to_tensor(pic: Image.Image) -> torch.Tensor:
    """What torchvision's ``ToTensor()`` does to a grayscale PIL image: its bytes copied
    into a 1xHxW tensor and scaled to [0, 1] as float32."""
    img = torch.from_numpy(np.array(pic, np.uint8, copy=True))
    img = img.view(pic.size[1], pic.size[0], 1).permute(2, 0, 1).contiguous()
    return img.to(torch.float32).div(255)


class FashionLike(Dataset):
    """FashionMNIST as torchvision holds it: 28x28 uint8 images and labels in two tensors;
    an item becomes a PIL image and then a tensor through ``to_tensor``."""

    def __init__(self, n: int = 10000, seed: int = 21):
        g = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g)
        self.targets = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, k):
        img, target = self.data[k], int(self.targets[k])
        img = Image.fromarray(img.numpy(), mode="L")
        return to_tensor(img), target


class NeuralNetwork(nn.Module):
    """The quickstart's model: flatten, 784-512-512-10 with ReLUs."""

    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(nn.Linear(28 * 28, 512), nn.ReLU(),
                                               nn.Linear(512, 512), nn.ReLU(),
                                               nn.Linear(512, 10))

    def forward(self, x):
        return self.linear_relu_stack(self.flatten(x))


@case("pt_infer_quickstart_test_loop", "pytorch", "inference", 6,
      facts("inference", dataloader_workers=0), split="tuned", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("tensor_cache",),
      tags=["dataloader", "tutorial", "item"])
def pt_infer_quickstart_test_loop(variant):
    """The PyTorch quickstart's ``test_loop``: the model in ``eval()`` under
    ``torch.no_grad()`` over a ``DataLoader(test_data, batch_size=64)`` (no workers, no
    shuffle, epoch after epoch) whose FashionMNIST-shaped Dataset turns each 28x28 image
    into a PIL image and then a tensor as ``ToTensor()`` does; per batch the loss is
    added with ``.item()`` and the right predictions with
    ``(pred.argmax(1) == y).type(torch.float).sum().item()``.  Beside the loader's
    workers the truth has the images converted once into a ``TensorDataset``
    (``tensor_cache``)."""
    torch.manual_seed(0)
    model = NeuralNetwork().eval()
    loss_fn = nn.CrossEntropyLoss()
    n, data = workers(variant), FashionLike()
    if variant == "tensor_cache":
        data = TensorDataset(data.data.unsqueeze(1).to(torch.float32).div(255), data.targets)
    loader = DataLoader(data, batch_size=64, num_workers=n, persistent_workers=n > 0)
    batches = epochs(loader)
    totals = {"loss": 0.0, "correct": 0.0}

    def step(i):
        with CLOCK("input"):
            X, y = next(batches)
        with torch.no_grad():
            pred = model(X)
            loss = loss_fn(pred, y)
            right = (pred.argmax(1) == y).type(torch.float).sum()
            with CLOCK("sync"):
                totals["loss"] += loss.item()
                totals["correct"] += right.item()
        return totals["correct"]
    return Loop(step, batches.close)


# -- host overhead: the char-RNN name classifier, one letter and one name at a time -----------
ALL_LETTERS = string.ascii_letters + " .,;'"
N_CATEGORIES = 18


def names(n: int = 2000, seed: int = 5) -> list[tuple[str, int]]:
    """Surnames of 3 to 12 letters and their language (18 of them), as the tutorial reads
    them from its text files."""
    rng = random.Random(seed)
    return [("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 12)))
             .capitalize(), rng.randrange(N_CATEGORIES)) for _ in range(n)]


def line_to_tensor(line: str) -> torch.Tensor:
    """The tutorial's ``lineToTensor``: a ``len x 1 x 57`` one-hot tensor set letter by
    letter."""
    tensor = torch.zeros(len(line), 1, len(ALL_LETTERS))
    for li, letter in enumerate(line):
        tensor[li][0][ALL_LETTERS.find(letter)] = 1
    return tensor


class CharRNN(nn.Module):
    """An ``nn.RNN`` (57 inputs, 128 hidden), a linear layer to the 18 languages and a
    log-softmax."""

    def __init__(self, hidden: int = 128):
        super().__init__()
        self.rnn = nn.RNN(len(ALL_LETTERS), hidden)
        self.h2o = nn.Linear(hidden, N_CATEGORIES)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, line_tensor):
        """One letter at a time through the RNN, as the tutorial's loop feeds it."""
        hidden = torch.zeros(1, 1, self.rnn.hidden_size)
        for i in range(line_tensor.size(0)):
            _, hidden = self.rnn(line_tensor[i:i + 1], hidden)
        return self.softmax(self.h2o(hidden[0]))

    def forward_batch(self, padded, lengths):
        """A padded batch of names in one packed ``nn.RNN`` call."""
        packed = nn.utils.rnn.pack_padded_sequence(padded, lengths, enforce_sorted=False)
        _, hidden = self.rnn(packed)
        return self.softmax(self.h2o(hidden[0]))


NAMES_PER_BATCH = 32


@case("pt_train_char_rnn_names", "pytorch", "training", 8, facts("training"),
      split="tuned", warmup=5,
      fix=f"batches of {NAMES_PER_BATCH} names, padded and packed, in one nn.RNN call",
      share_from_fix="host_overhead", fix_per_item=NAMES_PER_BATCH,
      tags=["rnn", "python_loop", "tutorial", "batch1"])
def pt_train_char_rnn_names(variant):
    """The char-RNN name classification tutorial's training: one random name per step, made
    into a one-hot tensor letter by letter, fed one letter at a time through an
    ``nn.RNN`` (57-128) with the hidden state carried in Python, a linear layer and a
    log-softmax, ``NLLLoss``, and the tutorial's hand-written SGD update
    (``p.data.add_(p.grad.data, alpha=-learning_rate)`` over the parameters, then
    ``zero_grad()``).  The fix trains on batches of 32 names (each made the same way),
    padded and packed into one ``nn.RNN`` call, with ``torch.optim.SGD``."""
    torch.manual_seed(0)
    data, rng = names(), random.Random(7)
    rnn, criterion, lr = CharRNN(), nn.NLLLoss(), 0.005
    opt = torch.optim.SGD(rnn.parameters(), lr=lr)

    def step(i):
        if variant == "fix":
            with CLOCK("input"):
                picked = [rng.choice(data) for _ in range(NAMES_PER_BATCH)]
                lines = [line_to_tensor(name)[:, 0] for name, _ in picked]
                padded = nn.utils.rnn.pad_sequence(lines)
                lengths = torch.tensor([len(line) for line in lines])
                target = torch.tensor([c for _, c in picked])
            loss = criterion(rnn.forward_batch(padded, lengths), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()
        with CLOCK("input"):
            name, category = rng.choice(data)
            category_tensor = torch.tensor([category], dtype=torch.long)
            line_tensor = line_to_tensor(name)
        output = rnn(line_tensor)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-lr)
        rnn.zero_grad()
        return loss.item()
    return Loop(step)


# -- compute: the DCGAN tutorial's loop on 32x32 images ----------------------------------------
NZ, NGF, NDF = 32, 16, 16


def generator() -> nn.Module:
    """The DCGAN generator scaled to 32x32 RGB: transposed convolutions from a 32-long
    code, batch norm and ReLU between them, tanh at the end."""
    return nn.Sequential(
        nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 4),
        nn.ReLU(True),
        nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 2),
        nn.ReLU(True),
        nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF),
        nn.ReLU(True),
        nn.ConvTranspose2d(NGF, 3, 4, 2, 1, bias=False), nn.Tanh())


def discriminator() -> nn.Module:
    """The DCGAN discriminator scaled to 32x32 RGB: strided convolutions with batch norm
    and leaky ReLU, a sigmoid at the end."""
    return nn.Sequential(
        nn.Conv2d(3, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(NDF * 2, NDF * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 4),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(NDF * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid())


def weights_init(m):
    """The tutorial's initialisation: N(0, 0.02) convolutions, N(1, 0.02) batch norms."""
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif name.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


@case("pt_train_dcgan_32px", "pytorch", "training", 4, facts("training", optimizer="adam",
      dataloader_workers=0), split="holdout", warmup=3, tags=["gan", "tutorial", "item"])
def pt_train_dcgan_32px(variant):
    """The DCGAN tutorial's training loop on 32x32 RGB images (2,048 in memory, normalised
    to [-1, 1], through a shuffled ``DataLoader`` of batches of 64): the discriminator's
    backward pass on the real batch and on ``netD(fake.detach())``, its Adam step, the
    generator's backward pass through ``netD(fake)`` and its Adam step (lr 2e-4, betas
    0.5, 0.999), with the tutorial's ``D_x``, ``D_G_z1``, ``D_G_z2`` and both losses read
    with ``.item()`` every step."""
    torch.manual_seed(0)
    net_g, net_d = generator(), discriminator()
    net_g.apply(weights_init)
    net_d.apply(weights_init)
    criterion = nn.BCELoss()
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    images = torch.rand(2048, 3, 32, 32, generator=torch.Generator().manual_seed(3)) * 2 - 1
    batches = epochs(DataLoader(TensorDataset(images), batch_size=64, shuffle=True))
    stats = {"G": [], "D": []}

    def step(i):
        with CLOCK("input"):
            real = next(batches)[0]
        b = real.size(0)
        net_d.zero_grad()
        label = torch.full((b,), 1.0)
        output = net_d(real).view(-1)
        err_d_real = criterion(output, label)
        err_d_real.backward()
        with CLOCK("sync"):
            d_x = output.mean().item()
        fake = net_g(torch.randn(b, NZ, 1, 1))
        label.fill_(0.0)
        output = net_d(fake.detach()).view(-1)
        err_d_fake = criterion(output, label)
        err_d_fake.backward()
        with CLOCK("sync"):
            d_g_z1 = output.mean().item()
        err_d = err_d_real + err_d_fake
        opt_d.step()
        net_g.zero_grad()
        label.fill_(1.0)
        output = net_d(fake).view(-1)
        err_g = criterion(output, label)
        err_g.backward()
        with CLOCK("sync"):
            d_g_z2 = output.mean().item()
        opt_g.step()
        with CLOCK("sync"):
            stats["G"].append(err_g.item())
            stats["D"].append(err_d.item())
        return d_x, d_g_z1, d_g_z2
    return Loop(step, batches.close)
