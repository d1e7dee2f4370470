"""Held-out PyTorch training cases of everyday practice, written without looking at the
advisor's rules: fine-tuning an MLP pruned with ``torch.nn.utils.prune`` (its forward
pre-hooks multiply each weight by its mask every call), a physics-informed network whose
Burgers'-equation residual takes derivatives with ``torch.autograd.grad(create_graph=True)``
on a small batch of collocation points, a BiLSTM-CRF tagger trained one sentence at a time
with the CRF's forward algorithm looping over positions in Python, and k-fold
cross-validation of a 1-D CNN on sensor windows that its Dataset standardises and augments
one by one in NumPy through ``DataLoader(num_workers=0)``, a fresh model and optimizer
per fold.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn.utils import prune
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn
F = nn.functional


# -- compute: fine-tuning a magnitude-pruned MLP (mask hooks every forward) --------------------
def pruned_mlp() -> nn.Module:
    """A 784-512-512-10 MLP whose Linear weights are pruned to half by global L1 magnitude
    (``prune.global_unstructured``): each keeps ``weight_orig`` and ``weight_mask`` and a
    forward pre-hook that recomputes ``weight`` from them."""
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    params = [(m, "weight") for m in model if isinstance(m, nn.Linear)]
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=0.5)
    return model


@case("pt_train_prune_finetune_masks", "pytorch", "training", 4,
      facts("training", optimizer="sgd", dataloader_workers=0), split="holdout", warmup=3,
      fix="prune.remove: the masks made permanent before fine-tuning",
      tags=["pruning", "hooks", "compute"])
def pt_train_prune_finetune_masks(variant):
    """Fine-tuning after magnitude pruning as the pruning tutorial does it: a 784-512-512-10
    MLP pruned to 50% sparsity with ``prune.global_unstructured`` (L1), then trained with
    SGD and momentum on MNIST-shaped rows held in memory (a shuffled ``DataLoader`` over a
    ``TensorDataset``, batches of 512), the pruning's forward pre-hooks multiplying each
    ``weight_orig`` by its mask on every forward.  The fix a user tries makes the pruning
    permanent (``prune.remove`` on each layer) before fine-tuning: dense layers with zeros,
    no hooks."""
    torch.manual_seed(0)
    model = pruned_mlp()
    if variant == "fix":
        for m in model:
            if isinstance(m, nn.Linear):
                prune.remove(m, "weight")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(4)
    data = TensorDataset(torch.rand(8192, 784, generator=g),
                         torch.randint(0, 10, (8192,), generator=g))
    batches = epochs(DataLoader(data, batch_size=512, shuffle=True))

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step, batches.close)


# -- host overhead: a PINN for Burgers' equation on few collocation points -----------------------
class PINN(nn.Module):
    """u(x, t): a 2-32-32-32-32-1 tanh MLP, as the PINN papers' examples write it."""

    def __init__(self, width: int = 32, depth: int = 4):
        super().__init__()
        layers, n = [], 2
        for _ in range(depth):
            layers += [nn.Linear(n, width), nn.Tanh()]
            n = width
        self.net = nn.Sequential(*layers, nn.Linear(n, 1))

    def forward(self, x, t):
        return self.net(torch.cat([x, t], 1))


def burgers_loss(model: PINN, n_f: int, n_b: int = 64, nu: float = 0.01 / np.pi):
    """Residual of u_t + u u_x = nu u_xx at ``n_f`` random collocation points (derivatives
    by ``torch.autograd.grad(create_graph=True)``), plus the initial condition
    u(x, 0) = -sin(pi x) and the boundaries u(+-1, t) = 0 on ``n_b`` points each."""
    with CLOCK("input"):
        x = (torch.rand(n_f, 1) * 2 - 1).requires_grad_(True)
        t = torch.rand(n_f, 1).requires_grad_(True)
        x0 = torch.rand(n_b, 1) * 2 - 1
        tb = torch.rand(n_b, 1)
        xb = torch.where(torch.rand(n_b, 1) < 0.5, -1.0, 1.0)
    u = model(x, t)
    ones = torch.ones_like(u)
    u_x, u_t = torch.autograd.grad(u, (x, t), ones, create_graph=True)
    u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), create_graph=True)[0]
    f = u_t + u * u_x - nu * u_xx
    u0 = model(x0, torch.zeros_like(x0))
    ub = model(xb, tb)
    return (f ** 2).mean() + ((u0 + torch.sin(np.pi * x0)) ** 2).mean() + (ub ** 2).mean()


COLLOCATION, COLLOCATION_FIX = 128, 4096


@case("pt_train_pinn_burgers_autograd", "pytorch", "training", 6,
      facts("training", optimizer="adam"), split="tuned", warmup=5,
      fix=f"{COLLOCATION_FIX} collocation points a step instead of {COLLOCATION}",
      share_from_fix="host_overhead", fix_per_item=COLLOCATION_FIX // COLLOCATION,
      tags=["pinn", "double_backward", "small_ops"])
def pt_train_pinn_burgers_autograd(variant):
    """A physics-informed network for the viscous Burgers' equation: a 2-32-32-32-32-1 tanh
    MLP trained with Adam on 128 fresh random collocation points a step, the PDE residual
    u_t + u u_x - nu u_xx taken with ``torch.autograd.grad(..., create_graph=True)`` (the
    second derivative through the first), plus the initial and boundary losses on 64
    points each; one backward pass through the double-backward graph.  The fix samples
    4,096 collocation points a step (the same loss, 32 times the points per step)."""
    torch.manual_seed(0)
    model = PINN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n_f = COLLOCATION_FIX if variant == "fix" else COLLOCATION

    def step(i):
        loss = burgers_loss(model, n_f)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- host overhead: a BiLSTM-CRF tagger, one sentence a step ------------------------------------
N_TAGS, START, STOP = 11, 9, 10  # nine BIO tags, the tutorial's START and STOP tags
VOCAB = 4000


class BiLSTMCRF(nn.Module):
    """The tutorial's BiLSTM-CRF: embeddings, a bidirectional LSTM, a linear layer to the
    tag scores and a learned transition matrix (``transitions[to, from]``)."""

    def __init__(self, emb: int = 64, hidden: int = 64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, emb)
        self.lstm = nn.LSTM(emb, hidden // 2, bidirectional=True)
        self.hidden2tag = nn.Linear(hidden, N_TAGS)
        self.transitions = nn.Parameter(torch.randn(N_TAGS, N_TAGS))
        with torch.no_grad():
            self.transitions[START, :] = -10000
            self.transitions[:, STOP] = -10000

    def features(self, sentence):
        """Emission scores of one sentence: ``len x tags``."""
        out, _ = self.lstm(self.embed(sentence).view(len(sentence), 1, -1))
        return self.hidden2tag(out.view(len(sentence), -1))

    def forward_alg(self, feats):
        """Log partition function by the forward algorithm, position by position."""
        alpha = torch.full((1, N_TAGS), -10000.0)
        alpha[0][START] = 0.0
        for feat in feats:
            alpha = torch.logsumexp(alpha + self.transitions + feat.view(-1, 1), 1).view(1, -1)
        return torch.logsumexp(alpha + self.transitions[STOP], 1)[0]

    def score_sentence(self, feats, tags):
        """Score of the gold path, as the tutorial sums it position by position."""
        score = torch.zeros(1)
        tags = torch.cat([torch.tensor([START], dtype=torch.long), tags])
        for i, feat in enumerate(feats):
            score = score + self.transitions[tags[i + 1], tags[i]] + feat[tags[i + 1]]
        return score + self.transitions[STOP, tags[-1]]

    def neg_log_likelihood(self, sentence, tags):
        feats = self.features(sentence)
        return self.forward_alg(feats) - self.score_sentence(feats, tags)

    def batch_nll(self, words, tags, mask, lengths):
        """Mean negative log-likelihood of a padded batch (``len x batch``): a packed
        LSTM, the forward algorithm over positions for the whole batch, masked, and the
        gold scores gathered at once."""
        emb = self.embed(words)
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths, enforce_sorted=False)
        out, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0])
        feats = self.hidden2tag(out)  # len x batch x tags
        alpha = torch.full((words.size(1), N_TAGS), -10000.0)
        alpha[:, START] = 0.0
        for k in range(words.size(0)):
            nxt = torch.logsumexp(alpha[:, None, :] + self.transitions + feats[k, :, :, None],
                                  2)
            alpha = torch.where(mask[k, :, None], nxt, alpha)
        log_z = torch.logsumexp(alpha + self.transitions[STOP], 1)
        prev = torch.cat([torch.full((1, words.size(1)), START), tags[:-1]])
        emit = feats.gather(2, tags[..., None])[..., 0]
        gold = ((self.transitions[tags, prev] + emit) * mask).sum(0)
        last = tags.gather(0, (lengths - 1)[None])[0]
        gold = gold + self.transitions[STOP, last]
        return (log_z - gold).mean()


def tagged_sentences(n: int = 1024, seed: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Sentences of 8 to 30 word ids and their BIO tags."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(8, 31))
        out.append((torch.tensor(rng.integers(0, VOCAB, k)),
                    torch.tensor(rng.integers(0, 9, k))))
    return out


SENTENCES_PER_BATCH = 32


@case("pt_train_bilstm_crf_tagger", "pytorch", "training", 6,
      facts("training", optimizer="sgd"), split="tuned", warmup=5,
      fix=f"batches of {SENTENCES_PER_BATCH} sentences, padded and masked",
      share_from_fix="host_overhead", fix_per_item=SENTENCES_PER_BATCH,
      tags=["crf", "lstm", "python_loop", "batch1", "tutorial"])
def pt_train_bilstm_crf_tagger(variant):
    """The BiLSTM-CRF tutorial's training on a named-entity tagging set (sentences of 8 to
    30 words, nine BIO tags): one sentence per step through embeddings and a
    bidirectional LSTM, the CRF's log partition by the forward algorithm looping over the
    positions in Python (``logsumexp`` over the tags at each), the gold path scored
    position by position, SGD with weight decay.  The fix trains on batches of 32
    sentences: padded, the LSTM packed, the forward algorithm over positions for the
    whole batch with masks, the gold scores gathered at once."""
    torch.manual_seed(0)
    model = BiLSTMCRF()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-4)
    data = tagged_sentences()
    rng = np.random.default_rng(3)

    def step(i):
        if variant == "fix":
            with CLOCK("input"):
                picked = [data[k] for k in rng.integers(0, len(data), SENTENCES_PER_BATCH)]
                words = nn.utils.rnn.pad_sequence([w for w, _ in picked])
                tags = nn.utils.rnn.pad_sequence([t for _, t in picked])
                lengths = torch.tensor([len(w) for w, _ in picked])
                mask = torch.arange(words.size(0))[:, None] < lengths[None]
            loss = model.batch_nll(words, tags, mask, lengths)
        else:
            with CLOCK("input"):
                sentence, tags = data[int(rng.integers(0, len(data)))]
            model.zero_grad()
            loss = model.neg_log_likelihood(sentence, tags)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- input: k-fold cross-validation over windows augmented one by one --------------------------
def random_rotation() -> np.ndarray:
    """A random 3-D rotation (Rodrigues' formula about a random axis): the sensor worn at
    another angle."""
    axis = np.random.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = np.random.uniform(-np.pi / 6, np.pi / 6)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def time_warp(w: np.ndarray, speed: float) -> np.ndarray:
    """The window replayed ``speed`` times as fast (clipped at its ends), channel by
    channel with ``np.interp``."""
    n = w.shape[1]
    at = np.clip(np.arange(n) * speed + (n - n * speed) / 2, 0, n - 1)
    return np.stack([np.interp(at, np.arange(n), ch) for ch in w])


class SensorWindows(Dataset):
    """Accelerometer and gyroscope windows (6 channels x 128 samples) of six activities:
    each item standardised per channel, rotated, time-warped, scaled and jittered at
    random and shifted in time, in NumPy, then made a tensor."""

    def __init__(self, n: int = 3000, seed: int = 12, augment: bool = True):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((n, 6, 128)).astype(np.float64) * 3 + 1
        self.y = rng.integers(0, 6, n)
        self.augment = augment

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        w = self.x[i].copy()
        w = (w - w.mean(axis=1, keepdims=True)) / (w.std(axis=1, keepdims=True) + 1e-8)
        if self.augment:
            rot = random_rotation()
            w = np.concatenate([rot @ w[:3], rot @ w[3:]])
            w = time_warp(w, np.random.uniform(0.8, 1.2))
            w = w * np.random.uniform(0.9, 1.1, (6, 1)) + np.random.normal(0, 0.05, w.shape)
            w = np.roll(w, np.random.randint(-8, 9), axis=1)
        return torch.from_numpy(w.astype(np.float32)), int(self.y[i])


def har_cnn() -> nn.Module:
    """A small 1-D CNN for activity windows: two convolutions, global pooling, a linear
    layer to the six activities."""
    return nn.Sequential(nn.Conv1d(6, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
                         nn.Conv1d(16, 32, 5, padding=2), nn.ReLU(),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 6))


class KFold:
    """5-fold cross-validation as the loop is written: per fold a fresh model, Adam and
    train and validation loaders over ``Subset``s; 3 epochs a fold, the validation loss
    computed after each epoch."""

    def __init__(self, data: Dataset, n_workers: int, folds: int = 5, epochs: int = 3):
        self.data, self.n, self.epochs = data, n_workers, epochs
        perm = np.random.default_rng(0).permutation(len(data))
        self.parts = np.array_split(perm, folds)
        self.fold, self.epoch, self.it, self.val_losses = -1, 0, None, []
        self.loaders = ()
        self.next_fold()

    def next_fold(self):
        self.close()
        self.fold = (self.fold + 1) % len(self.parts)
        val = self.parts[self.fold]
        train = np.concatenate([p for k, p in enumerate(self.parts) if k != self.fold])
        self.model = har_cnn()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.loaders = tuple(
            DataLoader(Subset(self.data, idx.tolist()), batch_size=64, shuffle=shuffle,
                       num_workers=self.n, persistent_workers=self.n > 0)
            for idx, shuffle in ((train, True), (val, False)))
        self.epoch, self.it = 0, iter(self.loaders[0])

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            total = sum(F.cross_entropy(self.model(x), y, reduction="sum").item()
                        for x, y in self.loaders[1])
        self.model.train()
        self.val_losses.append(total / len(self.loaders[1].dataset))

    def batch(self):
        """The next training batch, closing the epoch (validation) or the fold on the way."""
        while True:
            with CLOCK("input"):
                got = next(self.it, None)
            if got is not None:
                return got
            with CLOCK("periodic"):
                self.validate()
                self.epoch += 1
                if self.epoch < self.epochs:
                    self.it = iter(self.loaders[0])
                else:
                    self.next_fold()

    def close(self):
        for loader in self.loaders:
            it = getattr(loader, "_iterator", None)
            if it is not None:
                it._shutdown_workers()


@case("pt_train_kfold_sensor_nw0", "pytorch", "training", 6,
      facts("training", optimizer="adam", dataloader_workers=0), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("no_augment",),
      tags=["dataloader", "kfold", "numpy_transform"])
def pt_train_kfold_sensor_nw0(variant):
    """5-fold cross-validation of a small 1-D CNN on 3,000 activity-recognition windows (6
    channels x 128 samples held in memory): per fold a fresh model and Adam, a shuffled
    ``DataLoader(Subset(...), batch_size=64)`` with the default ``num_workers=0`` whose
    Dataset standardises each window per channel and augments it (a random rotation of
    both sensors, a time warp, random scale, Gaussian jitter, a random time shift) in
    NumPy, 3 epochs a fold with the validation loss after each.  The fix gives both
    loaders workers (kept across a fold's epochs); beside it, ``no_augment`` trains
    without the augmentation."""
    torch.manual_seed(0)
    np.random.seed(0)
    folds = KFold(SensorWindows(augment=variant != "no_augment"), workers(variant))

    def step(i):
        x, y = folds.batch()
        loss = F.cross_entropy(folds.model(x), y)
        folds.opt.zero_grad()
        loss.backward()
        folds.opt.step()
        return loss.detach()
    return Loop(step, folds.close)
