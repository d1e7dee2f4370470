"""More PyTorch cases of the diagnosis corpus: loops shaped like small applications (a text
classifier fed by a Python tokenizer, a Python collate of variable-length records, a
recurrent model, an online-serving loop answering one request at a time, per-sample loss
logging). All are held out: no rule is written against them.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, sgd_loop, workers

F = torch.nn.functional
WORDS = [f"w{k}" for k in range(5000)]


class Sentences(Dataset):
    """Text samples tokenized in Python per item: split, normalise, look up ids, pad."""

    def __init__(self, n: int, words: int = 160, length: int = 128):
        self.n, self.words, self.length = n, words, length
        self.vocab = {w: k for k, w in enumerate(WORDS)}

    def __len__(self):
        return self.n

    def __getitem__(self, k):
        rng = np.random.default_rng(k)
        text = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), self.words))
        tokens = [t.strip(".,").lower() for t in text.split()]
        ids = [self.vocab.get(t, 0) for t in tokens for _ in range(2)][:self.length]
        ids += [0] * (self.length - len(ids))
        return torch.tensor(ids), torch.tensor(k % 4)


class TextClassifier(torch.nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(len(WORDS), dim)
        self.head = torch.nn.Sequential(torch.nn.Linear(dim, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 4))

    def forward(self, ids):
        return self.head(self.emb(ids))


@case("pt_train_text_tokenize_nw0", "pytorch", "training", 10,
      facts("training", dataloader_workers=0, optimizer="adam"),
      fix=LOADER_FIX, variants=LOADER_VARIANTS, tags=["dataloader", "text"])
def pt_train_text_tokenize_nw0(variant):
    """A text classifier whose Dataset tokenizes each sentence in Python, with the default
    DataLoader(num_workers=0): the step waits for the tokenizer."""
    torch.manual_seed(0)
    model = TextClassifier()
    dl = DataLoader(Sentences(64 * 300), batch_size=64, shuffle=True,
                    num_workers=workers(variant))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it = iter(dl)

    def step(i):
        with CLOCK("input"):
            ids, y = next(it)
        loss = F.cross_entropy(model(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step, getattr(it, "_shutdown_workers", None))


class Records(Dataset):
    """Variable-length numeric records (cheap to read; the collate pads them)."""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, k):
        n = 20 + (k * 7919) % 100
        return [float((k + j) % 13) / 13.0 for j in range(n)], float(k % 2)


def pad_collate(batch):
    """A collate in plain Python: pads every record to the batch's longest, row by row."""
    longest = max(len(r) for r, _ in batch)
    rows = [r + [0.0] * (longest - len(r)) for r, _ in batch]
    rows = [[min(max(v, 0.0), 1.0) for v in row][:120] + [0.0] * max(0, 120 - longest)
            for row in rows]
    return torch.tensor(rows), torch.tensor([[y] for _, y in batch])


@case("pt_train_collate_python", "pytorch", "training", 12,
      facts("training", dataloader_workers=0, optimizer="sgd"),
      fix=LOADER_FIX, variants=LOADER_VARIANTS, tags=["dataloader", "collate"])
def pt_train_collate_python(variant):
    """A DataLoader whose Python collate_fn pads variable-length records in the main
    process (num_workers=0): input-bound on the collate."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(120, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 1))
    dl = DataLoader(Records(), batch_size=256, collate_fn=pad_collate,
                    num_workers=workers(variant))
    return sgd_loop(model, dl)


@case("pt_train_lstm_compute", "pytorch", "training", 8,
      facts("training", optimizer="adam"), split="holdout", tags=["rnn"])
def pt_train_lstm_compute(variant):
    """A two-layer LSTM trained on batches held in memory: compute-bound."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(64, 128, num_layers=2, batch_first=True)
    head = torch.nn.Linear(128, 1)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    x, y = torch.randn(64, 48, 64), torch.randn(64, 1)

    def step(i):
        out, _ = lstm(x)
        loss = F.mse_loss(head(out[:, -1]), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step)


def ranker():
    return torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.LayerNorm(96),
                               torch.nn.GELU(), torch.nn.Linear(96, 96), torch.nn.LayerNorm(96),
                               torch.nn.GELU(), torch.nn.Linear(96, 1)).eval()


@case("pt_infer_online_requests", "pytorch", "inference", 12, facts("inference", batch=1),
      fix="answer the 64 requests of a step in one batch",
      share_from_fix="host_overhead", per_item=64, fix_per_item=64,
      tags=["batch1", "no_dataloader"])
def pt_infer_online_requests(variant):
    """An online ranker answering 64 requests per step one at a time (batch 1 each):
    the framework's per-op overhead is most of every call; batching them is the fix."""
    torch.manual_seed(0)
    model = ranker()
    reqs = torch.randn(64, 48)

    def step(i):
        with torch.inference_mode():
            if variant == "fix":
                return model(reqs).squeeze(1)
            return [model(reqs[k:k + 1]) for k in range(64)]
    return Loop(step)


@case("pt_train_loss_log_item", "pytorch", "training", 8,
      facts("training", optimizer="sgd"), split="holdout",
      fix="log the batch's losses with one .tolist()", tags=["item"])
def pt_train_loss_log_item(variant):
    """Per-sample losses logged one ``.item()`` at a time after every step (1024 reads)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(24, 48), torch.nn.Tanh(),
                                torch.nn.Linear(48, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(1024, 24), torch.randn(1024, 1)
    history: list[float] = []

    def step(i):
        per = F.mse_loss(model(x), y, reduction="none")
        per.mean().backward()
        opt.step()
        opt.zero_grad()
        with CLOCK("sync"):
            losses = per.detach()[:, 0]
            if variant == "fix":
                history.extend(losses.tolist())
            else:
                history.extend(losses[k].item() for k in range(losses.shape[0]))
        del history[:-4096]
    return Loop(step)
