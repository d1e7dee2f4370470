"""Held-out PyTorch cases of programs a user of a CPU box writes, of kinds the corpus
lacks, written without looking at the advisor's rules: the PyTorch examples' variational
autoencoder on 28x28 images as it runs without CUDA (``DataLoader(num_workers=0)``, each
image made into a tensor as ``ToTensor()`` does), a mixture-of-experts classifier whose
layers route each token to one of 16 experts in a Python loop over the experts, a small
CNN trained with sharpness-aware minimisation (two forward and backward passes a step),
and an LSTM review classifier over ``pack_padded_sequence`` fed by a tokenizing Dataset.
"""

from __future__ import annotations

import random

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_daily import batch_at
from corpus.torch_cases_field import shut_down_with
from corpus.torch_cases_tutorials import FashionLike
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


def loader_loop(data: Dataset, batch: int, variant: str, train, collate_fn=None) -> Loop:
    """``train(batch)`` on the batches of a shuffled ``DataLoader`` over ``data``, epoch
    after epoch, with the variant's workers (persistent); the fetch timed as input."""
    n = workers(variant)
    loader = DataLoader(data, batch_size=batch, shuffle=True, num_workers=n,
                        persistent_workers=n > 0, collate_fn=collate_fn)
    batches = epochs(loader)

    def step(i):
        with CLOCK("input"):
            got = next(batches)
        return train(got)
    return shut_down_with(Loop(step, batches.close), loader)


# -- the PyTorch examples' VAE on 28x28 images, as it runs on a CPU ---------------------------
class VAE(nn.Module):
    """784-400-(20, 20) encoder, the reparameterisation, 20-400-784 decoder."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def vae_loss(recon_x, x, mu, logvar):
    """Reconstruction (binary cross-entropy summed over the pixels) plus the KL term."""
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


@case("pt_train_vae_mnist_example", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="adam"), split="holdout",
      warmup=3, fix=LOADER_FIX, variants=LOADER_VARIANTS,
      tags=["vae", "dataloader", "example"])
def pt_train_vae_mnist_example(variant):
    """The PyTorch examples' VAE (784-400-20 encoder giving a mean and a log-variance,
    the reparameterisation ``mu + eps * std``, 20-400-784 decoder with a sigmoid) trained
    with Adam (lr 1e-3) on the summed binary cross-entropy of the reconstruction plus
    the KL divergence, batches of 128 from a shuffled ``DataLoader`` over MNIST-shaped
    28x28 images that its Dataset turns into tensors one by one (a PIL image, then
    ``ToTensor()``'s conversion); without CUDA the example passes no loader arguments, so
    the loader has no workers."""
    torch.manual_seed(0)
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train(batch):
        data, _ = batch
        opt.zero_grad()
        recon, mu, logvar = model(data)
        loss = vae_loss(recon, data, mu, logvar)
        loss.backward()
        opt.step()
        return loss.detach()
    return loader_loop(FashionLike(), 128, variant, train)


# -- a mixture-of-experts layer routing tokens in a Python loop over the experts ---------------
class Expert(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def balance_loss(probs, route, n: int):
    """Switch Transformer's load-balancing term: tokens' share per expert times the mean
    router probability per expert, summed, times the number of experts."""
    share = F.one_hot(route, n).float().mean(0)
    return n * (share * probs.mean(0)).sum()


class MoELoop(nn.Module):
    """Top-1 mixture of experts over tokens [T, d]: a linear router, then for each expert
    the tokens routed to it gathered with ``nonzero``, run through it, scaled by their
    router probability and written back."""

    def __init__(self, d: int = 64, h: int = 128, n: int = 16):
        super().__init__()
        self.n = n
        self.router = nn.Linear(d, n)
        self.experts = nn.ModuleList(Expert(d, h) for _ in range(n))

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        weight, route = probs.max(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            idx = (route == e).nonzero(as_tuple=True)[0]
            if idx.numel() == 0:
                continue
            out[idx] = expert(x[idx]) * weight[idx, None]
        return out, balance_loss(probs, route, self.n)


class MoEDispatch(nn.Module):
    """The same layer with the experts' weights stacked: tokens sorted by expert into a
    [experts, capacity, d] buffer (capacity: the most tokens any expert got, none
    dropped), both expert layers one ``baddbmm`` each, the outputs gathered back."""

    def __init__(self, d: int = 64, h: int = 128, n: int = 16):
        super().__init__()
        self.n = n
        self.router = nn.Linear(d, n)
        init = [Expert(d, h) for _ in range(n)]
        self.w1 = nn.Parameter(torch.stack([e.fc1.weight.T for e in init]).detach())
        self.b1 = nn.Parameter(torch.stack([e.fc1.bias for e in init])[:, None].detach())
        self.w2 = nn.Parameter(torch.stack([e.fc2.weight.T for e in init]).detach())
        self.b2 = nn.Parameter(torch.stack([e.fc2.bias for e in init])[:, None].detach())

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        weight, route = probs.max(-1)
        order = route.argsort()
        counts = torch.bincount(route, minlength=self.n)
        sorted_route = route[order]
        slot = torch.arange(len(x)) - (counts.cumsum(0) - counts)[sorted_route]
        buf = x.new_zeros(self.n, int(counts.max()), x.shape[1])
        buf[sorted_route, slot] = x[order]
        y = torch.baddbmm(self.b2, F.gelu(torch.baddbmm(self.b1, buf, self.w1)), self.w2)
        out = torch.empty_like(x)
        out[order] = y[sorted_route, slot] * weight[order, None]
        return out, balance_loss(probs, route, self.n)


class MoEClassifier(nn.Module):
    """Token embeddings and positions, two pre-norm residual mixture-of-experts blocks,
    mean pooling and a linear head over 4 classes."""

    def __init__(self, layer, vocab: int = 4000, d: int = 64, length: int = 32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(length, d))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(2))
        self.moes = nn.ModuleList(layer(d) for _ in range(2))
        self.head = nn.Linear(d, 4)

    def forward(self, tokens):
        b, t = tokens.shape
        x = (self.tok(tokens) + self.pos[:t]).reshape(b * t, -1)
        aux = 0.0
        for norm, moe in zip(self.norms, self.moes):
            y, a = moe(norm(x))
            x, aux = x + y, aux + a
        return self.head(x.reshape(b, t, -1).mean(1)), aux


@case("pt_train_moe_expert_loop", "pytorch", "training", 3,
      facts("training", optimizer="adamw"), split="holdout", warmup=3,
      fix="the experts' weights stacked, tokens dispatched into one baddbmm per layer",
      share_from_fix="host_overhead", tags=["moe", "python_loop", "routing"])
def pt_train_moe_expert_loop(variant):
    """A text classifier of two residual mixture-of-experts blocks (width 64, 16 experts
    of 64-128-64 with GELU each, top-1 routing by a linear router, the Switch
    Transformer's load-balancing loss at 0.01) trained with AdamW on batches of 16
    sequences of 32 tokens held in memory.  Each layer loops over its experts in Python:
    ``idx = (route == e).nonzero()``, the expert on ``x[idx]``, its output scaled by the
    router probability and written to ``out[idx]``.  The fix stacks the experts' weights
    and dispatches the tokens, sorted by expert, into a padded buffer run through both
    expert layers with one ``baddbmm`` each."""
    torch.manual_seed(0)
    model = MoEClassifier(MoEDispatch if variant == "fix" else MoELoop)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 4000, (1024, 32), generator=g)
    labels = torch.randint(0, 4, (1024,), generator=g)

    def step(i):
        with CLOCK("input"):
            x, y = batch_at(tokens, labels, 16, i)
        logits, aux = model(x)
        loss = F.cross_entropy(logits, y) + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- sharpness-aware minimisation: two forward and backward passes a step ---------------------
class SAM(torch.optim.Optimizer):
    """Sharpness-aware minimisation around a base optimizer, as its reference code writes
    it: ``first_step`` climbs to ``w + rho * g / |g|`` parameter by parameter,
    ``second_step`` restores the weights and steps the base optimizer with the gradient
    taken there."""

    def __init__(self, params, base_optimizer, rho: float = 0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale.to(p)
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        self.zero_grad()

    @torch.no_grad()
    def second_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        self.zero_grad()

    def _grad_norm(self):
        return torch.norm(torch.stack([p.grad.norm(p=2) for group in self.param_groups
                                       for p in group["params"] if p.grad is not None]))


def conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


@case("pt_train_sam_two_pass", "pytorch", "training", 4,
      facts("training", optimizer="sgd"), split="holdout", warmup=2,
      tags=["sam", "optimizer", "cnn"])
def pt_train_sam_two_pass(variant):
    """A small CNN (conv-BN-ReLU blocks of 16, 16, 32, 32 and 64 channels with two
    max-pools, global average pooling, a linear head over 10 classes) trained on 32x32
    images with sharpness-aware minimisation around SGD (momentum 0.9, rho 0.05), batches
    of 16 from memory: each step runs forward and backward at the weights, climbs to the
    sharpest nearby point parameter by parameter, runs forward and backward again there
    and steps SGD with that gradient, so the step is twice the model's work by design."""
    torch.manual_seed(0)
    model = nn.Sequential(conv_block(3, 16), conv_block(16, 16), nn.MaxPool2d(2),
                          conv_block(16, 32), conv_block(32, 32), nn.MaxPool2d(2),
                          conv_block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(64, 10))
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(4)
    images = torch.randn(512, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (512,), generator=g)

    def step(i):
        with CLOCK("input"):
            x, y = batch_at(images, labels, 16, i)
        F.cross_entropy(model(x), y).backward()
        opt.first_step()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.second_step()
        return loss.detach()
    return Loop(step)


# -- an LSTM review classifier over pack_padded_sequence -------------------------------------
def review_corpus(n: int = 2048, vocab: int = 5000, seed: int = 12) -> list[tuple[str, int]]:
    """Reviews of 10 to 100 words drawn from a vocabulary of made-up words, with their
    sentiment, as a notebook reads them from a CSV file."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(vocab)]
    return [(" ".join(rng.choice(words) for _ in range(rng.randint(10, 100))).capitalize()
             + ".", rng.randrange(2)) for _ in range(n)]


class Reviews(Dataset):
    """Each review tokenized when it is read: lower-cased, the full stop dropped, split on
    spaces, each word looked up in a vocabulary built from the corpus (1: unknown)."""

    def __init__(self, rows: list[tuple[str, int]]):
        self.rows = rows
        self.vocab = {"<pad>": 0, "<unk>": 1}
        for text, _ in rows:
            for w in text.lower().rstrip(".").split():
                self.vocab.setdefault(w, len(self.vocab))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, k):
        text, label = self.rows[k]
        ids = [self.vocab.get(w, 1) for w in text.lower().rstrip(".").split()]
        return torch.tensor(ids), label


def pad_collate(batch):
    """The sequences padded to the longest, their lengths and the labels."""
    seqs, labels = zip(*batch)
    return (pad_sequence(seqs, batch_first=True), torch.tensor([len(s) for s in seqs]),
            torch.tensor(labels))


class PackedLSTM(nn.Module):
    """Embedding (32), a one-layer LSTM (64) run over the packed batch, the last hidden
    state to 2 classes."""

    def __init__(self, vocab: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, 32, padding_idx=0)
        self.lstm = nn.LSTM(32, 64, batch_first=True)
        self.fc = nn.Linear(64, 2)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.emb(x), lengths, batch_first=True,
                                      enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.fc(h[-1])


@case("pt_train_packed_lstm_reviews", "pytorch", "training", 3,
      facts("training", dataloader_workers=0, optimizer="adam"), split="holdout",
      warmup=3, fix=LOADER_FIX, variants=LOADER_VARIANTS,
      tags=["lstm", "packed_sequence", "dataloader", "text"])
def pt_train_packed_lstm_reviews(variant):
    """A sentiment classifier (embedding of 32, a one-layer LSTM of 64 over
    ``pack_padded_sequence(..., enforce_sorted=False)``, the last hidden state to 2
    classes) trained with Adam on reviews of 10 to 100 words, batches of 32 from a
    shuffled ``DataLoader`` (no workers) whose Dataset tokenizes each review as it is
    read and whose ``collate_fn`` pads the batch with ``pad_sequence`` and lists the
    lengths.  The loader-workers fix is measured beside it."""
    torch.manual_seed(0)
    data = Reviews(review_corpus())
    model = PackedLSTM(len(data.vocab))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train(batch):
        x, lengths, y = batch
        loss = F.cross_entropy(model(x, lengths), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return loader_loop(data, 32, variant, train, pad_collate)
