"""Held-out PyTorch cases over tabular and record data, written without looking at the
advisor's rules: a Dataset that reads each item from a compressed ``.npz`` archive with
``np.load(path)[key]`` inside ``__getitem__`` (``DataLoader(num_workers=0)``), a
regression MLP trained on batches that a fitted standardiser (NumPy mean and std, as
scikit-learn's ``StandardScaler`` keeps them) scales on the host before
``torch.from_numpy``, a transformer text classifier whose ``collate_fn`` pads every batch
to the longest sequence of the whole dataset, and a churn model scoring a DataFrame row
by row with ``torch.tensor(row.values)``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_daily import shuffled_epochs
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- input: each item read from a compressed .npz archive --------------------------------------
class NpzRows(Dataset):
    """Sensor feature rows saved with ``np.savez_compressed(path, x=..., y=...)``; each item
    opens the archive with ``np.load(path)`` and indexes its arrays, so every item
    reopens the zip file and decompresses the whole ``x`` member."""

    def __init__(self, path: Path):
        self.path = path
        with np.load(path) as data:
            self.n = len(data["y"])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        data = np.load(self.path)
        x, y = data["x"][i], data["y"][i]
        return torch.from_numpy(x), int(y)


def sensor_archive(folder: Path, n: int = 1024, features: int = 48, seed: int = 12) -> Path:
    """``folder/features.npz``: ``n`` rows of float32 features and an activity label."""
    rng = np.random.default_rng(seed)
    path = folder / "features.npz"
    np.savez_compressed(path, x=rng.standard_normal((n, features)).astype(np.float32),
                        y=rng.integers(0, 6, n))
    return path


@case("pt_train_npz_getitem_nw0", "pytorch", "training", 4,
      facts("training", dataloader_workers=0, optimizer="adam"), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("arrays_loaded_once",),
      tags=["dataloader", "npz", "tabular"])
def pt_train_npz_getitem_nw0(variant):
    """A 48-256-256-6 activity classifier trained with Adam on 1,024 rows of sensor
    features saved in one ``np.savez_compressed`` archive, its Dataset calling
    ``np.load(path)`` in ``__getitem__`` and indexing ``["x"][i]`` and ``["y"][i]`` (the
    archive reopened and its 192 KiB feature array decompressed for every item), through a
    shuffled ``DataLoader(batch_size=32, num_workers=0)`` epoch after epoch.  Beside the
    loader's workers the truth has the arrays loaded once in ``__init__`` and trained
    through a ``TensorDataset`` (``arrays_loaded_once``)."""
    torch.manual_seed(0)
    tmp = tempfile.TemporaryDirectory()
    path = sensor_archive(Path(tmp.name))
    data = NpzRows(path)
    if variant == "arrays_loaded_once":
        with np.load(path) as arrays:
            data = TensorDataset(torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["y"]))
    model = nn.Sequential(nn.Linear(48, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 6))
    loop = shuffled_epochs(data, 32, workers(variant), model,
                           torch.optim.Adam(model.parameters(), lr=1e-3))
    close = loop.close_fn

    def close_all():
        close()
        tmp.cleanup()
    loop.close_fn = close_all
    return loop


# -- compute: a fitted standardiser applied to each batch on the host --------------------------
class Standardiser:
    """What ``sklearn.preprocessing.StandardScaler`` keeps and does: the training columns'
    mean and standard deviation (float64), ``transform`` subtracting and dividing."""

    def fit(self, x: np.ndarray) -> Standardiser:
        self.mean_, self.scale_ = x.mean(0), x.std(0)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mean_) / self.scale_


class HousePrices(nn.Module):
    """A 96-512-512-256-1 regression MLP with ReLUs and dropout."""

    def __init__(self, features: int = 96):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 512), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, x):
        return self.net(x).squeeze(1)


@case("pt_train_host_standardise_batches", "pytorch", "training", 4,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      fix="the whole training array standardised once, ahead of training",
      tags=["tabular", "numpy", "no_dataloader", "preprocessing"])
def pt_train_host_standardise_batches(variant):
    """A 96-512-512-256-1 regression MLP (dropout 0.1) trained with Adam and an MSE loss on
    a 16,384 x 96 float64 NumPy feature matrix: each step slices a batch of 256 rows of a
    shuffled permutation, applies the fitted standardiser (``(x - mean_) / scale_`` in
    NumPy, float64) on the host, converts it with ``torch.from_numpy(...).float()``, then
    the forward, backward and Adam step.  The fix standardises the whole array once,
    ahead of training, and slices float32 tensors."""
    torch.manual_seed(0)
    rng = np.random.default_rng(17)
    raw = rng.standard_normal((16384, 96)) * rng.uniform(0.5, 300, 96) + rng.uniform(-50, 50, 96)
    target = torch.from_numpy(raw[:, :8].sum(1) / 300).float()
    scaler = Standardiser().fit(raw)
    ready = torch.from_numpy(scaler.transform(raw)).float() if variant == "fix" else None
    order = rng.permutation(len(raw))
    model = HousePrices()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(i):
        with CLOCK("input"):
            rows = order[(256 * i) % 16384:(256 * i) % 16384 + 256]
            if ready is None:
                x = torch.from_numpy(scaler.transform(raw[rows])).float()
            else:
                x = ready[rows]
            y = target[rows]
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- compute: every batch padded to the dataset's longest sequence -----------------------------
PAD = 0


def review_lengths(n: int, seed: int) -> np.ndarray:
    """Token counts as review corpora have them: most short, a long tail, 8 to 128."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(3.2, 0.6, n), 8, 128).astype(int)


class Reviews(Dataset):
    """Tokenised reviews (ids 1..4,999) of different lengths and a sentiment label."""

    def __init__(self, n: int = 2048, seed: int = 23):
        rng = np.random.default_rng(seed)
        self.items = [(torch.from_numpy(rng.integers(1, 5000, k)), int(rng.integers(0, 2)))
                      for k in review_lengths(n, seed)]
        self.longest = max(len(t) for t, _ in self.items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, k):
        return self.items[k]


def pad_collate(longest: int | None):
    """The batch's token tensors padded with 0 to ``longest`` (``None``: the batch's own
    longest, as ``pad_sequence`` does), the labels stacked."""
    def collate(batch):
        width = longest or max(len(t) for t, _ in batch)
        tokens = torch.full((len(batch), width), PAD, dtype=torch.long)
        for r, (t, _) in enumerate(batch):
            tokens[r, :len(t)] = t
        return tokens, torch.tensor([y for _, y in batch])
    return collate


class ReviewTransformer(nn.Module):
    """Token and learned position embeddings (width 48), two transformer encoder layers (4
    heads, feed-forward 96) with the padding masked, a masked mean pool and a linear
    head."""

    def __init__(self, vocab: int = 5000, width: int = 48, context: int = 128):
        super().__init__()
        self.tok = nn.Embedding(vocab, width, padding_idx=PAD)
        self.pos = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(width, 4, 96, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, 2)

    def forward(self, tokens):
        pad = tokens == PAD
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        x = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(2).float()
        return self.head((x * keep).sum(1) / keep.sum(1))


@case("pt_train_pad_to_dataset_max", "pytorch", "training", 3,
      facts("training", dataloader_workers=0, optimizer="adamw"), split="tuned", warmup=3,
      fix="each batch padded to its own longest review",
      tags=["transformer", "padding", "collate_fn", "dataloader", "variable_length"])
def pt_train_pad_to_dataset_max(variant):
    """A two-layer transformer sentiment classifier (width 48, 4 heads, padding masked,
    masked mean pool) trained with AdamW on 2,048 tokenised reviews of 8 to 128 tokens (a
    long tail: most under 40), through a shuffled ``DataLoader(batch_size=16)`` whose
    ``collate_fn`` pads every batch to the longest review of the whole dataset (128), as
    a fixed ``max_len`` taken from the data set does.  The fix pads each batch to its own
    longest review (``pad_sequence``): the padded positions are work the model does and
    masks away."""
    torch.manual_seed(0)
    data = Reviews()
    loader = DataLoader(data, batch_size=16, shuffle=True,
                        collate_fn=pad_collate(None if variant == "fix" else data.longest))
    batches = epochs(loader)
    model = ReviewTransformer()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def step(i):
        with CLOCK("input"):
            tokens, y = next(batches)
        loss = F.cross_entropy(model(tokens), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step, batches.close)


# -- host overhead: a DataFrame scored row by row ----------------------------------------------
class ChurnModel(nn.Module):
    """A 40-128-64-1 MLP with batch norm, its output a churn probability."""

    def __init__(self, features: int = 40):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 128), nn.BatchNorm1d(128), nn.ReLU(),
                                 nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        return torch.sigmoid(self.net(x)).squeeze(1)


def accounts(n: int = 1024, features: int = 40, seed: int = 29) -> pd.DataFrame:
    """Accounts to score, as read from a CSV: an id column and numeric features."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.standard_normal((n, features)).astype(np.float32),
                      columns=[f"f{k}" for k in range(features)])
    df.insert(0, "account_id", np.arange(100000, 100000 + n))
    return df


@case("pt_infer_dataframe_iterrows", "pytorch", "inference", 3,
      facts("inference"), split="tuned", warmup=2,
      fix="the chunk's 64 rows scored as one batch: one tensor, one forward, one .tolist()",
      share_from_fix="host_overhead", per_item=64, fix_per_item=64,
      tags=["tabular", "pandas", "batch1", "python_loop", "item"])
def pt_infer_dataframe_iterrows(variant):
    """A nightly churn-scoring job: a trained 40-128-64-1 MLP (batch norm, sigmoid) in
    ``eval()`` under ``torch.no_grad()`` scores an accounts DataFrame 64 rows a step,
    row by row as it is often written: ``for _, row in chunk.iterrows()``, the row's
    features turned into ``torch.tensor(row.values, dtype=torch.float32)``, the model run
    on it with ``unsqueeze(0)`` and the probability read with ``.item()`` into a list
    that becomes the chunk's ``score`` column.  The fix scores the chunk as one batch:
    one ``torch.tensor(chunk[features].values)``, one forward, one ``.tolist()``."""
    torch.manual_seed(0)
    model = ChurnModel().eval()
    df = accounts()
    features = [c for c in df.columns if c != "account_id"]

    def step(i):
        k = (64 * i) % len(df)
        chunk = df.iloc[k:k + 64]
        with torch.no_grad():
            if variant == "fix":
                scores = model(torch.tensor(chunk[features].values)).tolist()
            else:
                scores = []
                for _, row in chunk[features].iterrows():
                    x = torch.tensor(row.values, dtype=torch.float32)
                    scores.append(model(x.unsqueeze(0)).item())
        return chunk.assign(score=scores)
    return Loop(step)
