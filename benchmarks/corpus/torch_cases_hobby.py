"""Held-out PyTorch training cases of programs a user of a CPU box writes as a hobby,
written without looking at the advisor's rules: word2vec skip-gram with negative sampling
on ``nn.Embedding(sparse=True)`` tables and ``torch.optim.SparseAdam`` (the pairs through a
``DataLoader``, the negatives drawn each step), a RealNVP normalizing flow fitted to
two-moons points made fresh each step, a TransE knowledge-graph embedding whose negative
triples are corrupted one by one in a Python loop on the main thread, and a multi-task
tabular model with three heads whose three losses are each logged with ``.item()`` every
step.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts
from corpus.torch_cases_users import epochs

nn = torch.nn
F = nn.functional


# -- word2vec: skip-gram with negative sampling, sparse embeddings and SparseAdam -------------
VOCAB, EMBED_DIM, WINDOW, NEGATIVES = 20000, 100, 2, 5


class SkipGramPairs(Dataset):
    """(center, context) word ids of every pair within ``WINDOW`` words of a Zipf-like
    token stream of ``n`` words, as a word2vec tutorial builds them from its text."""

    def __init__(self, n: int = 100_000, seed: int = 11):
        rng = np.random.default_rng(seed)
        ids = torch.from_numpy(np.minimum(rng.zipf(1.2, n) - 1, VOCAB - 1))
        centers, contexts = [], []
        for off in range(-WINDOW, WINDOW + 1):
            if off:
                centers.append(ids[WINDOW:n - WINDOW])
                contexts.append(ids[WINDOW + off:n - WINDOW + off])
        self.centers, self.contexts = torch.cat(centers), torch.cat(contexts)
        counts = torch.bincount(ids, minlength=VOCAB).float()
        self.noise = counts.pow(0.75) / counts.pow(0.75).sum()  # the unigram^3/4 table

    def __len__(self):
        return len(self.centers)

    def __getitem__(self, k):
        return self.centers[k], self.contexts[k]


class SkipGram(nn.Module):
    """Input and output embedding tables (sparse gradients) and the negative-sampling loss."""

    def __init__(self):
        super().__init__()
        self.in_embed = nn.Embedding(VOCAB, EMBED_DIM, sparse=True)
        self.out_embed = nn.Embedding(VOCAB, EMBED_DIM, sparse=True)
        bound = 0.5 / EMBED_DIM
        nn.init.uniform_(self.in_embed.weight, -bound, bound)
        nn.init.zeros_(self.out_embed.weight)

    def forward(self, center, context, negatives):
        v = self.in_embed(center)
        u = self.out_embed(context)
        n = self.out_embed(negatives)
        pos = F.logsigmoid((v * u).sum(1))
        neg = F.logsigmoid(-torch.bmm(n, v.unsqueeze(2)).squeeze(2)).sum(1)
        return -(pos + neg).mean()


@case("pt_train_word2vec_sparse_adam", "pytorch", "training", 4,
      facts("training", optimizer="sparse_adam", dataloader_workers=0), split="holdout",
      warmup=3, also=("dense_adam",), tags=["embedding", "sparse", "word2vec"])
def pt_train_word2vec_sparse_adam(variant):
    """Word2vec skip-gram with negative sampling as the PyTorch tutorials write it: a
    20,000-word vocabulary, 100-dim input and output ``nn.Embedding(sparse=True)`` tables,
    (center, context) pairs of a window of 2 served by a Dataset through a shuffled
    ``DataLoader(batch_size=512)`` with no workers, 5 negatives per pair drawn each step
    with ``torch.multinomial`` from the unigram^3/4 table, the log-sigmoid loss and
    ``torch.optim.SparseAdam``.  No fix claimed; beside it, ``dense_adam`` trains dense
    tables with ``torch.optim.Adam`` (what a user tries when told sparse updates are slow)."""
    torch.manual_seed(0)
    data = SkipGramPairs()
    model = SkipGram()
    if variant == "dense_adam":
        model.in_embed.sparse = model.out_embed.sparse = False
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SparseAdam(list(model.parameters()), lr=1e-3)
    batches = epochs(DataLoader(data, batch_size=512, shuffle=True))

    def step(i):
        with CLOCK("input"):
            center, context = next(batches)
        negatives = torch.multinomial(data.noise, center.size(0) * NEGATIVES,
                                      replacement=True).view(-1, NEGATIVES)
        loss = model(center, context, negatives)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step, batches.close)


# -- compute: RealNVP on two moons -------------------------------------------------------------
def make_moons(n: int, noise: float = 0.05) -> np.ndarray:
    """scikit-learn's ``make_moons``: two interleaved half circles, Gaussian noise added."""
    n_out = n // 2
    n_in = n - n_out
    outer = np.linspace(0, np.pi, n_out)
    inner = np.linspace(0, np.pi, n_in)
    x = np.vstack([np.append(np.cos(outer), 1 - np.cos(inner)),
                   np.append(np.sin(outer), 1 - np.sin(inner) - 0.5)]).T
    x = x[np.random.permutation(n)]
    return x + np.random.normal(scale=noise, size=x.shape)


class RealNVP(nn.Module):
    """Affine coupling layers with alternating masks, a scale net (ending in tanh) and a
    translation net per layer, and a standard normal prior, as the well-known RealNVP
    notebook on two moons writes it."""

    def __init__(self, layers: int = 6, hidden: int = 256):
        super().__init__()
        def nets():
            return nn.Sequential(nn.Linear(2, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden),
                                 nn.LeakyReLU(), nn.Linear(hidden, 2), nn.Tanh())

        def nett():
            return nn.Sequential(nn.Linear(2, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden),
                                 nn.LeakyReLU(), nn.Linear(hidden, 2))
        self.mask = nn.Parameter(torch.tensor([[0, 1], [1, 0]] * (layers // 2),
                                              dtype=torch.float32), requires_grad=False)
        self.s = nn.ModuleList([nets() for _ in range(layers)])
        self.t = nn.ModuleList([nett() for _ in range(layers)])
        self.prior = torch.distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))

    def f(self, x):
        log_det_j, z = x.new_zeros(x.shape[0]), x
        for i in reversed(range(len(self.t))):
            z_ = self.mask[i] * z
            s = self.s[i](z_) * (1 - self.mask[i])
            t = self.t[i](z_) * (1 - self.mask[i])
            z = (1 - self.mask[i]) * (z - t) * torch.exp(-s) + z_
            log_det_j -= s.sum(dim=1)
        return z, log_det_j

    def log_prob(self, x):
        z, logp = self.f(x)
        return self.prior.log_prob(z) + logp


MOONS, MOONS_FIX = 256, 1024


@case("pt_train_realnvp_moons", "pytorch", "training", 3,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      fix=f"batches of {MOONS_FIX} points instead of {MOONS}", share_from_fix="host_overhead",
      fix_per_item=MOONS_FIX // MOONS, tags=["flow", "density", "compute"])
def pt_train_realnvp_moons(variant):
    """A RealNVP density model fitted to two moons as the well-known notebook does it: 6
    affine coupling layers with alternating masks, each with a 2-256-256-2 scale net
    (LeakyReLU, tanh at the end) and translation net, a standard normal prior, a fresh
    batch of 256 noisy moons made with NumPy every step (``make_moons`` as scikit-learn
    writes it), the loss ``-flow.log_prob(x).mean()`` and Adam (lr 1e-4).  Nothing but the
    model's work in the step; the fix a user tries when it trains slowly takes batches of
    1,024 points (its gain per point is what the small batch's per-op cost is).
    ``Adam(foreach=True)`` and ``fused=True`` time the same as the default loop here."""
    torch.manual_seed(0)
    np.random.seed(0)
    flow = RealNVP()
    opt = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad], lr=1e-4)

    def step(i):
        with CLOCK("input"):
            x = torch.from_numpy(make_moons(MOONS_FIX if variant == "fix" else MOONS)
                                 .astype(np.float32))
        loss = -flow.log_prob(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- host overhead: TransE with negatives corrupted in a Python loop --------------------------
ENTITIES, RELATIONS, KG_DIM, KG_BATCH = 5000, 50, 50, 512


class TransE(nn.Module):
    """Entity and relation embeddings, the L1 distance ||h + r - t||."""

    def __init__(self):
        super().__init__()
        self.ent = nn.Embedding(ENTITIES, KG_DIM)
        self.rel = nn.Embedding(RELATIONS, KG_DIM)
        bound = 6 / math.sqrt(KG_DIM)
        nn.init.uniform_(self.ent.weight, -bound, bound)
        nn.init.uniform_(self.rel.weight, -bound, bound)
        self.rel.weight.data = F.normalize(self.rel.weight.data, p=2, dim=1)

    def forward(self, triples):
        h, r, t = self.ent(triples[:, 0]), self.rel(triples[:, 1]), self.ent(triples[:, 2])
        return (h + r - t).norm(p=1, dim=1)


def corrupt_loop(pos: torch.Tensor, known: set, rng: random.Random) -> torch.Tensor:
    """The negative triples as TransE repositories write them: each triple's head or tail
    (a coin flip) replaced by a random entity, drawn again while the corrupted triple is a
    known one (filtered sampling), one row at a time."""
    neg = pos.clone()
    for i in range(len(neg)):
        h, r, t = neg[i].tolist()
        while True:
            if rng.random() < 0.5:
                h2, t2 = rng.randint(0, ENTITIES - 1), t
            else:
                h2, t2 = h, rng.randint(0, ENTITIES - 1)
            if (h2, r, t2) not in known:
                break
        neg[i] = torch.tensor([h2, r, t2])
    return neg


def triple_keys(triples: torch.Tensor) -> torch.Tensor:
    return (triples[:, 0] * RELATIONS + triples[:, 1]) * ENTITIES + triples[:, 2]


def corrupt_batched(pos: torch.Tensor, known_keys: torch.Tensor) -> torch.Tensor:
    """The same filtered corruption for the whole batch at once: the rows that hit a
    known triple (``known_keys``, sorted) drawn again together."""
    neg, redo = pos.clone(), torch.ones(len(pos), dtype=torch.bool)
    while redo.any():
        heads = torch.rand(len(pos)) < 0.5
        ents = torch.randint(0, ENTITIES, (len(pos),))
        neg[:, 0] = torch.where(redo, torch.where(heads, ents, pos[:, 0]), neg[:, 0])
        neg[:, 2] = torch.where(redo, torch.where(heads, pos[:, 2], ents), neg[:, 2])
        keys = triple_keys(neg)
        at = torch.searchsorted(known_keys, keys).clamp(max=len(known_keys) - 1)
        redo = known_keys[at] == keys
    return neg


@case("pt_train_transe_python_corrupt", "pytorch", "training", 3,
      facts("training", optimizer="sgd", dataloader_workers=0), split="holdout", warmup=3,
      fix="the negatives corrupted for the whole batch at once (torch.where)",
      share_from_fix="host_overhead", tags=["knowledge_graph", "python_loop", "embedding"])
def pt_train_transe_python_corrupt(variant):
    """TransE trained on a knowledge graph of 5,000 entities, 50 relations and 60,000
    triples (a shuffled ``DataLoader`` over a ``TensorDataset`` of (head, relation, tail)
    rows, batches of 512, no workers): per batch a negative triple for each row made by
    a Python loop that replaces its head or tail with a random entity, drawn again while
    the corrupted triple is a known one (``(h, r, t) not in known`` on a set of tuples),
    and writes the row back (``neg[i] = torch.tensor([h, r, t])``); the L1 distances,
    the margin ranking loss (margin 1), SGD, and the entity embeddings renormalised to
    unit length after each step.  The fix corrupts the batch at once with ``torch.rand``,
    ``torch.randint`` and ``torch.where``, the known triples found with one
    ``torch.searchsorted`` in their sorted integer keys."""
    torch.manual_seed(0)
    rng = random.Random(3)
    g = torch.Generator().manual_seed(8)
    triples = torch.stack([torch.randint(0, ENTITIES, (60000,), generator=g),
                           torch.randint(0, RELATIONS, (60000,), generator=g),
                           torch.randint(0, ENTITIES, (60000,), generator=g)], 1)
    known, known_keys = set(map(tuple, triples.tolist())), triple_keys(triples).sort()[0]
    batches = epochs(DataLoader(TensorDataset(triples), batch_size=KG_BATCH, shuffle=True))
    model = TransE()
    criterion = nn.MarginRankingLoss(margin=1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    target = -torch.ones(KG_BATCH)

    def step(i):
        with CLOCK("input"):
            pos = next(batches)[0]
        if variant == "fix":
            neg = corrupt_batched(pos, known_keys)
        else:
            neg = corrupt_loop(pos, known, rng)
        loss = criterion(model(pos), model(neg), target[:len(pos)])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.ent.weight.data = F.normalize(model.ent.weight.data, p=2, dim=1)
        return loss.detach()
    return Loop(step, batches.close)


# -- compute: a three-headed multi-task model, each loss logged with .item() -------------------
class MultiTask(nn.Module):
    """A shared 64-512-512-256 trunk and three heads: a 10-way class, a regression target
    and a binary flag."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512),
                                   nn.ReLU(), nn.Linear(512, 256), nn.ReLU())
        self.cls_head = nn.Linear(256, 10)
        self.reg_head = nn.Linear(256, 1)
        self.bin_head = nn.Linear(256, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls_head(h), self.reg_head(h).squeeze(1), self.bin_head(h).squeeze(1)


LOG_EVERY = 50


@case("pt_train_multitask_three_losses_item", "pytorch", "training", 4,
      facts("training", optimizer="adam", dataloader_workers=0), split="holdout", warmup=3,
      fix=f"the three losses read every {LOG_EVERY}th step",
      tags=["multitask", "item", "logging"])
def pt_train_multitask_three_losses_item(variant):
    """A multi-task tabular model (shared 64-512-512-256 MLP trunk, a classification,
    a regression and a binary head) trained with Adam on 16,384 rows held in memory (a
    shuffled ``DataLoader`` over a ``TensorDataset``, batches of 256, no workers): the
    cross-entropy, MSE and BCE-with-logits losses summed with weights, one backward pass,
    and each of the three losses added to its running total with ``.item()`` every step
    for the progress bar.  The fix a user tries reads the three losses every 50th step."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(6)
    n = 16384
    data = TensorDataset(torch.randn(n, 64, generator=g),
                         torch.randint(0, 10, (n,), generator=g),
                         torch.randn(n, generator=g),
                         (torch.rand(n, generator=g) < 0.3).float())
    batches = epochs(DataLoader(data, batch_size=256, shuffle=True))
    model = MultiTask()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    running = {"cls": 0.0, "reg": 0.0, "bin": 0.0}

    def step(i):
        with CLOCK("input"):
            x, y_cls, y_reg, y_bin = next(batches)
        out_cls, out_reg, out_bin = model(x)
        loss_cls = F.cross_entropy(out_cls, y_cls)
        loss_reg = F.mse_loss(out_reg, y_reg)
        loss_bin = F.binary_cross_entropy_with_logits(out_bin, y_bin)
        loss = loss_cls + 0.5 * loss_reg + 0.5 * loss_bin
        opt.zero_grad()
        loss.backward()
        opt.step()
        if variant != "fix" or i % LOG_EVERY == 0:
            with CLOCK("sync"):
                running["cls"] += loss_cls.item()
                running["reg"] += loss_reg.item()
                running["bin"] += loss_bin.item()
        return running
    return Loop(step, batches.close)
