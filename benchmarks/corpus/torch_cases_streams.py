"""Held-out PyTorch cases around data loading and serving, written as users write them
and without looking at the advisor's rules: records streamed from an ``IterableDataset``
through a shuffle buffer (the workers' fix shards the stream by ``get_worker_info()``),
a load forecaster whose ``Dataset.__getitem__`` cuts each window out of a pandas
DataFrame and adds rolling features, an image classifier server that pre-processes each
request with NumPy and ranks its labels with ``softmax`` and Python's ``sorted``, and a
``torch.jit.trace``-d fraud scorer answering one request at a time.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, ce_step, facts, workers
from corpus.torch_cases_users import epochs

nn, F = torch.nn, torch.nn.functional


# -- input: JSON records streamed through a shuffle buffer ------------------------------------
N_FEATURES = 128


def json_records(n: int = 8192, seed: int = 11) -> list[str]:
    """Records as the lines of a JSON-lines shard: an id, 128 float features and a label."""
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((n, N_FEATURES)).round(4)
    return [json.dumps({"id": k, "features": feats[k].tolist(), "label": int(k % 10)})
            for k in range(n)]


class RecordStream(IterableDataset):
    """The shard's lines parsed one by one, pass after pass; with loader workers each
    worker reads every ``num_workers``-th line from its own id (without that each would
    yield the whole shard)."""

    def __init__(self, lines: list[str]):
        self.lines = lines

    def __iter__(self):
        info = get_worker_info()
        lines = self.lines if info is None else self.lines[info.id::info.num_workers]
        while True:
            for line in lines:
                rec = json.loads(line)
                yield torch.tensor(rec["features"], dtype=torch.float32), rec["label"]


class ShuffleBuffer(IterableDataset):
    """Approximate shuffling of a stream: fill a buffer, then yield a random element of
    it and put the next record in its place."""

    def __init__(self, source: IterableDataset, size: int = 1000, seed: int = 0):
        self.source, self.size, self.seed = source, size, seed

    def __iter__(self):
        info = get_worker_info()
        rng = random.Random(self.seed + (info.id if info else 0))
        buf = []
        for item in self.source:
            if len(buf) < self.size:
                buf.append(item)
                continue
            k = rng.randrange(self.size)
            yield buf[k]
            buf[k] = item


RECORDS: list[list[str]] = []


@case("pt_train_stream_shuffle_buffer", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="adam"), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS,
      tags=["dataloader", "iterable", "shuffle_buffer", "json"])
def pt_train_stream_shuffle_buffer(variant):
    """A 128-256-256-10 MLP trained with Adam from an ``IterableDataset`` that parses
    JSON-lines records one by one and shuffles them through a 1,000-record buffer,
    batched by ``DataLoader(batch_size=128)`` with no workers: the step waits for the
    parser.  The fix is ``num_workers=2`` with the stream sharded per worker through
    ``get_worker_info()`` (one worker measured beside it)."""
    torch.manual_seed(0)
    if not RECORDS:
        RECORDS.append(json_records())
    model = nn.Sequential(nn.Linear(N_FEATURES, 256), nn.ReLU(), nn.Linear(256, 256),
                          nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n = workers(variant)
    loader = DataLoader(ShuffleBuffer(RecordStream(RECORDS[0])), batch_size=128,
                        num_workers=n)
    batches = iter(loader)

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        ce_step(model, opt, x, y)
    return Loop(step, lambda: getattr(batches, "_shutdown_workers", lambda: None)())


# -- input: a forecaster whose Dataset cuts windows out of a DataFrame -------------------------
WINDOW, HORIZON = 48, 24
COLUMNS = ["load", "temp", "humidity", "load_ma6", "load_std24", "hour_sin", "hour_cos"]


def hourly_frame(hours: int = 8760, seed: int = 4) -> pd.DataFrame:
    """A year of hourly electricity load with temperature and humidity."""
    rng = np.random.default_rng(seed)
    t = np.arange(hours)
    idx = pd.date_range("2024-01-01", periods=hours, freq="h")
    temp = 12 + 8 * np.sin(2 * np.pi * t / 8760) + rng.normal(0, 2, hours)
    load = (50 + 10 * np.sin(2 * np.pi * t / 24) + 0.8 * np.abs(temp - 18)
            + rng.normal(0, 3, hours))
    return pd.DataFrame({"load": load, "temp": temp,
                         "humidity": rng.uniform(30, 90, hours)}, index=idx)


def with_features(win: pd.DataFrame) -> pd.DataFrame:
    """Rolling load statistics and the hour of day as a circle."""
    out = win.copy()
    out["load_ma6"] = win["load"].rolling(6, min_periods=1).mean()
    out["load_std24"] = win["load"].rolling(24, min_periods=1).std().fillna(0.0)
    hour = win.index.hour.to_numpy()
    out["hour_sin"] = np.sin(2 * np.pi * hour / 24)
    out["hour_cos"] = np.cos(2 * np.pi * hour / 24)
    return out


class LoadWindows(Dataset):
    """Item ``i``: 48 hours of features from ``df.iloc[i:i+72]`` (features computed on the
    window) and the next 24 hours of load as the target."""

    def __init__(self, df: pd.DataFrame):
        self.df = df

    def __len__(self):
        return len(self.df) - WINDOW - HORIZON

    def __getitem__(self, i):
        win = with_features(self.df.iloc[i:i + WINDOW + HORIZON])
        x = torch.tensor(win[COLUMNS].iloc[:WINDOW].values, dtype=torch.float32)
        y = torch.tensor(win["load"].iloc[WINDOW:].values, dtype=torch.float32)
        return x, y


class FeatureTensor(Dataset):
    """The fix: the features computed once over the whole frame, windows sliced from one
    tensor."""

    def __init__(self, df: pd.DataFrame):
        self.x = torch.tensor(with_features(df)[COLUMNS].values, dtype=torch.float32)
        self.load = torch.tensor(df["load"].values, dtype=torch.float32)

    def __len__(self):
        return len(self.x) - WINDOW - HORIZON

    def __getitem__(self, i):
        return self.x[i:i + WINDOW], self.load[i + WINDOW:i + WINDOW + HORIZON]


class Forecaster(nn.Module):
    """An LSTM over the window, the next 24 hours from its last state."""

    def __init__(self, hidden: int = 64):
        super().__init__()
        self.lstm = nn.LSTM(len(COLUMNS), hidden, batch_first=True)
        self.head = nn.Linear(hidden, HORIZON)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


@case("pt_train_forecast_pandas_windows", "pytorch", "training", 5,
      facts("training", dataloader_workers=0, optimizer="adam"), split="tuned", warmup=3,
      fix="compute the features once over the frame, slice windows from one tensor",
      also=("num_workers=2",), tags=["dataloader", "pandas", "timeseries", "lstm"])
def pt_train_forecast_pandas_windows(variant):
    """An hourly load forecaster (an ``nn.LSTM`` over 48 hours of 7 features, the next 24
    hours from its last state, MSE and Adam) whose ``Dataset.__getitem__`` cuts each
    window out of a pandas DataFrame with ``df.iloc[i:i+72]``, adds rolling mean and
    standard deviation of the load and the hour as sine and cosine, and converts it with
    ``torch.tensor(win.values)``; ``DataLoader(batch_size=16, shuffle=True)``, no
    workers.  The fix computes the features once over the whole frame and slices the
    windows from one tensor; two loader workers are measured beside it."""
    torch.manual_seed(0)
    df = hourly_frame()
    data = FeatureTensor(df) if variant == "fix" else LoadWindows(df)
    n = 0 if variant == "fix" else workers(variant)  # the fix keeps the main-process loader
    loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=n,
                        persistent_workers=n > 0, generator=torch.Generator().manual_seed(0))
    model = Forecaster()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = epochs(loader)

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step, batches.close)


# -- compute: an image classifier server, NumPy pre-processing, sorted labels ----------------
LABELS = [f"class_{k:03d}" for k in range(1000)]
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def preprocess(img: np.ndarray) -> np.ndarray:
    """A HxWx3 uint8 image to a normalised 3xHxW float32 array, as serving code does
    without torchvision."""
    x = img.astype(np.float32) / 255.0
    x = (x - MEAN) / STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def top5(probs: list[float]) -> list[tuple[str, float]]:
    return sorted(zip(LABELS, probs), key=lambda p: p[1], reverse=True)[:5]


def conv_classifier() -> nn.Module:
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True)]
    return nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128), *block(128, 128),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 1000))


@case("pt_infer_image_requests_sorted", "pytorch", "inference", 6,
      facts("inference", batch=1), split="holdout", warmup=3,
      fix="answer the step's 4 requests as one batch", share_from_fix="host_overhead",
      per_item=4, fix_per_item=4,
      tags=["server", "batch1", "numpy", "no_dataloader", "softmax"])
def pt_infer_image_requests_sorted(variant):
    """An image classifier server answering the 4 requests that arrive each step one at
    a time: each 224x224 RGB uint8 image is normalised and transposed with NumPy,
    ``torch.from_numpy(...).unsqueeze(0)`` goes through a 4-block conv net under
    ``torch.inference_mode()``, and ``softmax`` probabilities read with ``.tolist()`` are
    ranked against the 1,000 label names with Python's ``sorted`` for the top five.
    Answering the 4 as one batch is the fix."""
    torch.manual_seed(0)
    model = conv_classifier().eval()
    rng = np.random.default_rng(2)
    images = [rng.integers(0, 256, (224, 224, 3), dtype=np.uint8) for _ in range(16)]

    def step(i):
        reqs = [images[(4 * i + r) % 16] for r in range(4)]
        if variant == "fix":
            with CLOCK("input"):
                x = torch.from_numpy(np.stack([preprocess(img) for img in reqs]))
            with torch.inference_mode():
                probs = F.softmax(model(x), dim=1)
            with CLOCK("sync"):
                rows = probs.tolist()
            return [top5(p) for p in rows]
        answers = []
        for img in reqs:
            with CLOCK("input"):
                x = torch.from_numpy(preprocess(img)).unsqueeze(0)
            with torch.inference_mode():
                probs = F.softmax(model(x), dim=1)[0]
            with CLOCK("sync"):
                p = probs.tolist()
            answers.append(top5(p))
        return answers
    return Loop(step)


# -- host overhead: a traced scorer answering one request at a time --------------------------
class FraudScorer(nn.Module):
    """A transaction scorer: 32 features, two hidden layers, one logit."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 64),
                                 nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        return torch.sigmoid(self.net(x)).squeeze(-1)


@case("pt_infer_traced_per_request", "pytorch", "inference", 6,
      facts("inference", batch=1, compiled="torch.jit.trace"), split="tuned", warmup=4,
      fix="score the step's 128 transactions as one batch through the traced model",
      share_from_fix="host_overhead", per_item=128, fix_per_item=128,
      tags=["server", "batch1", "torchscript", "trace", "no_dataloader"])
def pt_infer_traced_per_request(variant):
    """A fraud scorer exported with ``torch.jit.trace`` on one example and served one
    transaction at a time: for each of the 128 that arrive in a step the server builds
    ``torch.tensor([features])``, calls the traced module under ``torch.no_grad()`` and
    reads the score with ``.item()``.  Scoring the 128 as one batch through the same
    traced model (and one ``.tolist()``) is the fix."""
    torch.manual_seed(0)
    traced = torch.jit.trace(FraudScorer().eval(), torch.randn(1, 32))
    rng = np.random.default_rng(8)
    txns = rng.standard_normal((1280, 32)).round(3).tolist()

    def step(i):
        reqs = txns[(128 * i) % 1280:(128 * i) % 1280 + 128]
        if variant == "fix":
            with torch.no_grad():
                scores = traced(torch.tensor(reqs))
            with CLOCK("sync"):
                return [s > 0.5 for s in scores.tolist()]
        flagged = []
        for feats in reqs:
            with torch.no_grad():
                score = traced(torch.tensor([feats]))
            with CLOCK("sync"):
                flagged.append(score.item() > 0.5)
        return flagged
    return Loop(step)
