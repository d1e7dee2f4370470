"""Held-out PyTorch cases of training programs as research code writes them, written
without looking at the advisor's rules: MAML on sine-wave regression, each task of a
meta-batch adapted in a Python loop with ``torch.func.functional_call`` and
``torch.autograd.grad(create_graph=True)``; a long-tailed classifier whose class-balanced
focal loss is summed class by class in a Python loop; a TransE knowledge-graph embedding
whose ``Dataset.__getitem__`` draws each triple's negatives with ``np.random.choice``
(no loader workers); and a WaveNet-style stack of dilated causal convolutions on mu-law
audio frames, where nothing is wrong.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, grad, vmap
from torch.utils.data import DataLoader, Dataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- host overhead: MAML, the meta-batch's tasks adapted one by one ----------------------------
TASKS, SHOTS, INNER_LR = 10, 10, 0.01


def sine_tasks(g: torch.Generator):
    """A meta-batch of sine-regression tasks (amplitude 0.1-5, phase 0-pi): support and
    query sets of ``SHOTS`` points each in [-5, 5], as ``TASKS x SHOTS x 1`` tensors."""
    amp = torch.rand(TASKS, 1, 1, generator=g) * 4.9 + 0.1
    phase = torch.rand(TASKS, 1, 1, generator=g) * torch.pi
    xs = torch.rand(TASKS, SHOTS, 1, generator=g) * 10 - 5
    xq = torch.rand(TASKS, SHOTS, 1, generator=g) * 10 - 5
    return xs, amp * torch.sin(xs - phase), xq, amp * torch.sin(xq - phase)


@case("pt_train_maml_functional_call", "pytorch", "training", 2,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      fix=f"the {TASKS} tasks adapted at once with torch.func.vmap",
      share_from_fix="host_overhead", tags=["meta_learning", "python_loop", "torch_func"])
def pt_train_maml_functional_call(variant):
    """MAML as research code writes it with ``torch.func``: a 1-40-40-1 ReLU regressor
    meta-trained on meta-batches of 10 sine-wave tasks (10 support and 10 query points
    each); per task, in a Python loop, the support loss through
    ``functional_call(model, params, x)``, ``torch.autograd.grad(..., create_graph=True)``
    and one inner SGD step on a dict of adapted parameters, then the query loss with them;
    the mean query loss is back-propagated through the inner steps and Adam updates the
    meta-parameters.  The fix adapts the 10 tasks at once: ``vmap`` over the tasks of a
    function that takes the inner step with ``torch.func.grad``."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(11)
    model = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(),
                          nn.Linear(40, 1))
    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def inner_loss(params, x, y):
        return F.mse_loss(functional_call(model, params, (x,)), y)

    def task_loss(params, xs, ys, xq, yq):
        grads = grad(inner_loss)(params, xs, ys)
        adapted = {k: p - INNER_LR * grads[k] for k, p in params.items()}
        return inner_loss(adapted, xq, yq)

    def step(i):
        with CLOCK("input"):
            xs, ys, xq, yq = sine_tasks(g)
        params = dict(model.named_parameters())
        meta_opt.zero_grad()
        if variant == "fix":
            losses = vmap(task_loss, in_dims=(None, 0, 0, 0, 0))(params, xs, ys, xq, yq)
            meta_loss = losses.mean()
        else:
            meta_loss = 0.0
            for t in range(TASKS):
                support = F.mse_loss(functional_call(model, params, (xs[t],)), ys[t])
                grads = torch.autograd.grad(support, params.values(), create_graph=True)
                adapted = {k: p - INNER_LR * gp for (k, p), gp in zip(params.items(), grads)}
                query = F.mse_loss(functional_call(model, adapted, (xq[t],)), yq[t])
                meta_loss = meta_loss + query
            meta_loss = meta_loss / TASKS
        meta_loss.backward()
        meta_opt.step()
        return meta_loss
    return Loop(step)


# -- host overhead: a class-balanced focal loss summed class by class --------------------------
CLASSES, FEATURES, BATCH = 40, 128, 256


def long_tail_labels(n: int, g: torch.Generator) -> torch.Tensor:
    """Labels of a long-tailed set (imbalance 100): class ``c`` drawn with weight
    ``0.01 ** (c / (CLASSES - 1))``."""
    w = 0.01 ** (torch.arange(CLASSES, dtype=torch.float32) / (CLASSES - 1))
    return torch.multinomial(w, n, replacement=True, generator=g)


def class_balanced_alpha(labels: torch.Tensor, beta: float = 0.999) -> torch.Tensor:
    """Cui et al.'s class-balanced weights: ``(1 - beta) / (1 - beta ** n_c)``, scaled
    to sum to the number of classes."""
    counts = torch.bincount(labels, minlength=CLASSES).float().clamp(min=1)
    w = (1 - beta) / (1 - beta ** counts)
    return w / w.sum() * CLASSES


def focal_loop(logits, y, alpha, gamma: float = 2.0):
    """The focal loss as the paper's reimplementations often write it: class by class,
    the batch's rows of that class picked with a mask, weighted by the class's alpha."""
    probs = F.softmax(logits, dim=1)
    loss = logits.new_zeros(())
    for c in range(CLASSES):
        mask = y == c
        if mask.sum() == 0:
            continue
        p = probs[mask, c].clamp(min=1e-7)
        loss = loss + (-alpha[c] * (1 - p) ** gamma * torch.log(p)).sum()
    return loss / y.numel()


def focal_vectorised(logits, y, alpha, gamma: float = 2.0):
    """The same loss gathered at once: each row's log-probability of its class."""
    logp = F.log_softmax(logits, dim=1).gather(1, y[:, None]).squeeze(1)
    p = logp.exp()
    return (-alpha[y] * (1 - p) ** gamma * logp).mean()


@case("pt_train_focal_loss_class_loop", "pytorch", "training", 3,
      facts("training", optimizer="sgd"), split="holdout", warmup=3,
      fix="the focal loss gathered for the whole batch at once",
      share_from_fix="host_overhead", tags=["loss", "python_loop", "long_tail"])
def pt_train_focal_loss_class_loop(variant):
    """A 128-256-40 MLP head trained with SGD (momentum 0.9) on long-tailed features
    (40 classes, imbalance 100, 20,480 rows in memory, shuffled batches of 256 taken by
    index) with a class-balanced focal loss (gamma 2, beta 0.999) computed in a Python
    loop over the 40 classes: per class a mask of the batch's labels, ``if
    mask.sum() == 0: continue``, the class's probabilities picked with the mask and their
    weighted focal terms added to the loss.  The fix gathers each row's log-probability
    of its class and computes the loss for the batch at once."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(5)
    y_all = long_tail_labels(20480, g)
    x_all = torch.randn(20480, FEATURES, generator=g) + F.one_hot(y_all, FEATURES) * 2.0
    alpha = class_balanced_alpha(y_all)
    model = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = focal_vectorised if variant == "fix" else focal_loop
    order = torch.randperm(len(y_all), generator=g)

    def step(i):
        with CLOCK("input"):
            k = (i * BATCH) % len(order)
            idx = order[k:k + BATCH]
            x, y = x_all[idx], y_all[idx]
        loss = loss_fn(model(x), y, alpha)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step)


# -- input: TransE with negatives drawn per triple in __getitem__ ------------------------------
ENTITIES, RELATIONS, NEGATIVES, DIM = 8000, 50, 16, 64


class NegativeSampling(Dataset):
    """Knowledge-graph triples (head, relation, tail) with ``NEGATIVES`` corrupted tails
    per triple, drawn in ``__getitem__`` with ``np.random.choice(..., replace=False)``
    and checked against the triple's own tail."""

    def __init__(self, n: int = 50000, seed: int = 3):
        rng = np.random.default_rng(seed)
        self.triples = np.stack([rng.integers(0, ENTITIES, n), rng.integers(0, RELATIONS, n),
                                 rng.integers(0, ENTITIES, n)], axis=1)

    def __len__(self):
        return len(self.triples)

    def __getitem__(self, k):
        h, r, t = self.triples[k]
        neg = np.random.choice(ENTITIES, NEGATIVES, replace=False)
        neg[neg == t] = (t + 1) % ENTITIES
        return (torch.tensor([h, r, t], dtype=torch.long),
                torch.from_numpy(neg.astype(np.int64)))


class TransE(nn.Module):
    """TransE: entities and relations embedded in 64 dimensions, the score of a triple the
    L1 distance ``|h + r - t|``."""

    def __init__(self):
        super().__init__()
        self.ent = nn.Embedding(ENTITIES, DIM)
        self.rel = nn.Embedding(RELATIONS, DIM)
        nn.init.uniform_(self.ent.weight, -0.1, 0.1)
        nn.init.uniform_(self.rel.weight, -0.1, 0.1)

    def forward(self, pos, neg):
        h, r = self.ent(pos[:, 0]), self.rel(pos[:, 1])
        d_pos = (h + r - self.ent(pos[:, 2])).abs().sum(-1)
        d_neg = (h[:, None] + r[:, None] - self.ent(neg)).abs().sum(-1)
        return F.relu(1.0 + d_pos[:, None] - d_neg).mean()


@case("pt_train_transe_negative_sampling", "pytorch", "training", 5,
      facts("training", optimizer="adam", dataloader_workers=0), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("vectorised_negatives",),
      tags=["dataloader", "knowledge_graph", "negative_sampling"])
def pt_train_transe_negative_sampling(variant):
    """TransE trained with Adam on 50,000 knowledge-graph triples (8,000 entities, 50
    relations, 64 dimensions) with a margin ranking loss against 16 corrupted tails per
    triple, which the ``Dataset``'s ``__getitem__`` draws with ``np.random.choice(8000,
    16, replace=False)`` (a permutation of all entities per item), batches of 128 from a
    shuffled ``DataLoader`` with no workers.  Beside the loader's workers the truth has
    the negatives drawn for the whole batch with one ``torch.randint``
    (``vectorised_negatives``)."""
    torch.manual_seed(0)
    np.random.seed(0)
    data, model = NegativeSampling(), TransE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if variant == "vectorised_negatives":
        pos_all = torch.from_numpy(data.triples.astype(np.int64))
        loader = DataLoader(pos_all, batch_size=128, shuffle=True)
    else:
        n = workers(variant)
        loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=n,
                            persistent_workers=n > 0)
    batches = epochs(loader)

    def step(i):
        with CLOCK("input"):
            batch = next(batches)
            if variant == "vectorised_negatives":
                pos, neg = batch, torch.randint(0, ENTITIES, (batch.size(0), NEGATIVES))
            else:
                pos, neg = batch
        loss = model(pos, neg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)


# -- compute: a WaveNet-style stack of dilated causal convolutions -----------------------------
class ResidualBlock(nn.Module):
    """WaveNet's gated residual block: a dilated causal convolution (left-padded) into
    tanh and sigmoid gates, 1x1 convolutions to the residual and the skip paths."""

    def __init__(self, ch: int, skip: int, dilation: int):
        super().__init__()
        self.pad = dilation
        self.conv = nn.Conv1d(ch, 2 * ch, 2, dilation=dilation)
        self.res, self.skip = nn.Conv1d(ch, ch, 1), nn.Conv1d(ch, skip, 1)

    def forward(self, x):
        a, b = self.conv(F.pad(x, (self.pad, 0))).chunk(2, dim=1)
        z = torch.tanh(a) * torch.sigmoid(b)
        return x + self.res(z), self.skip(z)


class WaveNet(nn.Module):
    """Mu-law classes (256) embedded by a causal 2-tap convolution, a stack of 8 gated
    blocks (dilations 1-128, 32 residual and 64 skip channels), the skips summed into ReLU
    1x1 convolutions to 256 logits per sample."""

    def __init__(self, ch: int = 32, skip: int = 64, classes: int = 256):
        super().__init__()
        self.inp = nn.Conv1d(classes, ch, 2)
        self.blocks = nn.ModuleList(ResidualBlock(ch, skip, 2 ** k)
                                    for k in range(8))
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(),
                                 nn.Conv1d(skip, classes, 1))

    def forward(self, x):
        x = self.inp(F.pad(x, (1, 0)))
        skips = 0
        for block in self.blocks:
            x, s = block(x)
            skips = skips + s
        return self.out(skips)


def mu_law(audio: torch.Tensor, mu: int = 255) -> torch.Tensor:
    """Mu-law companding of [-1, 1] audio into 256 integer classes."""
    y = torch.sign(audio) * torch.log1p(mu * audio.abs()) / np.log1p(mu)
    return ((y + 1) / 2 * mu + 0.5).long().clamp(0, mu)


@case("pt_train_wavenet_dilated", "pytorch", "training", 3,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      tags=["audio", "conv1d", "dilated"])
def pt_train_wavenet_dilated(variant):
    """A WaveNet-style model (8 gated residual blocks of dilated causal ``Conv1d``,
    dilations 1-128, 32 residual and 64 skip channels) trained with Adam to predict
    the next mu-law sample of audio frames: 4 frames of 512 samples a step, cut at
    random from 20 s of synthetic 16 kHz audio held in memory, one-hot encoded, and a
    cross-entropy over the 256 classes.  Nothing but the model's work in the step."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(9)
    t = torch.arange(16000 * 20) / 16000
    audio = (0.5 * torch.sin(2 * torch.pi * 220 * t) * torch.sin(2 * torch.pi * 0.5 * t)
             + 0.1 * torch.randn(len(t), generator=g)).clamp(-1, 1)
    classes = mu_law(audio)
    model = WaveNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    frame = 512

    def step(i):
        with CLOCK("input"):
            starts = torch.randint(0, len(classes) - frame - 1, (4,), generator=g)
            seq = torch.stack([classes[s:s + frame + 1] for s in starts.tolist()])
            x = F.one_hot(seq[:, :-1], 256).permute(0, 2, 1).float()
            target = seq[:, 1:]
        loss = F.cross_entropy(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step)
