"""More held-out PyTorch cases of the diagnosis corpus: ordinary loops of kinds the other
cases do not have (a CSV stream parsed in an ``IterableDataset``, a recommender with
``nn.EmbeddingBag``, greedy decoding of a small language model one request at a time,
activation checkpointing, tensors logged as text every step, a pinned-memory loader with
its own validation loader, a worker whose tokenizing collate keeps up, ``torch.compile`` of a
transformer encoder in inference).  All are held out: no rule is written against them.
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, compiled, facts

F = torch.nn.functional
CSV_COLS = 48
VOCAB = 256


# -- input: a CSV stream parsed in Python ------------------------------------------------------
def csv_file(rows: int = 4096, seed: int = 0) -> Path:
    """A CSV file of ``rows`` records: ``CSV_COLS`` features and a target, as text."""
    rng = np.random.default_rng(seed)
    path = Path(tempfile.mkdtemp(prefix="corpus-csv-")) / "rows.csv"
    data = rng.standard_normal((rows, CSV_COLS + 1))
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"f{k}" for k in range(CSV_COLS)] + ["target"])
        w.writerows([[f"{v:.6f}" for v in row] for row in data])
    return path


class CsvStream(IterableDataset):
    """Records streamed from a CSV file, each line parsed in Python (header skipped,
    fields converted to float, a missing value read as 0); the file repeats."""

    def __init__(self, path: Path):
        self.path = path

    def __iter__(self):
        while True:
            with self.path.open(newline="") as f:
                reader = csv.reader(f)
                next(reader)
                for row in reader:
                    vals = [float(v) if v else 0.0 for v in row]
                    yield torch.tensor(vals[:-1]), torch.tensor(vals[-1:])


def parsed_cache(path: Path) -> TensorDataset:
    """The same records parsed once into tensors (the fix: parse ahead, train from it)."""
    x, y = zip(*(pair for pair, _ in zip(CsvStream(path), range(4096))))
    return TensorDataset(torch.stack(x), torch.stack(y))


def tabular_mlp():
    return torch.nn.Sequential(torch.nn.Linear(CSV_COLS, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 1))


CSV_PATH: list[Path] = []


@case("pt_train_csv_stream_nw0", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="adam"), split="tuned",
      fix="parse the CSV once into a tensor cache", tags=["dataloader", "iterable", "csv"])
def pt_train_csv_stream_nw0(variant):
    """A tabular regressor trained from an ``IterableDataset`` that streams a CSV file and
    parses every line in Python, through ``DataLoader(num_workers=0)``: the step waits
    for the parser."""
    torch.manual_seed(0)
    if not CSV_PATH:
        CSV_PATH.append(csv_file())
    data = parsed_cache(CSV_PATH[0]) if variant == "fix" else CsvStream(CSV_PATH[0])
    model = tabular_mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it = iter(DataLoader(data, batch_size=128, shuffle=variant == "fix"))

    def step(i):
        nonlocal it
        with CLOCK("input"):
            try:
                x, y = next(it)
            except StopIteration:  # the cache's epoch ended: the next one
                it = iter(DataLoader(data, batch_size=128, shuffle=True))
                x, y = next(it)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step)


# -- compute: a recommender with EmbeddingBag --------------------------------------------------
class Recommender(torch.nn.Module):
    """User history as a bag of item ids (mean of their embeddings), the candidate item's
    embedding, an MLP scoring the pair."""

    def __init__(self, items: int = 20000, dim: int = 64):
        super().__init__()
        self.history = torch.nn.EmbeddingBag(items, dim, mode="mean")
        self.item = torch.nn.Embedding(items, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(2 * dim, 256), torch.nn.ReLU(),
                                       torch.nn.Linear(256, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 1))

    def forward(self, hist, offsets, item):
        return self.mlp(torch.cat([self.history(hist, offsets), self.item(item)], 1))


def click_batches(n: int, batch: int = 512, items: int = 20000, seed: int = 0):
    """``n`` batches of (flat history ids, offsets, candidate, clicked), 5..60 ids a user."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        lengths = torch.randint(5, 61, (batch,), generator=g)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        hist = torch.randint(0, items, (int(lengths.sum()),), generator=g)
        item = torch.randint(0, items, (batch,), generator=g)
        out.append((hist, offsets, item, torch.randint(0, 2, (batch, 1), generator=g).float()))
    return out


@case("pt_train_embeddingbag_recsys", "pytorch", "training", 10,
      facts("training", optimizer="adagrad"), split="holdout",
      tags=["embedding", "recommender"])
def pt_train_embeddingbag_recsys(variant):
    """A click-through recommender (``nn.EmbeddingBag`` over each user's history, an item
    embedding, an MLP) trained with Adagrad on batches of 512 held in memory:
    compute-bound (the embedding tables' gradients and updates are most of it)."""
    torch.manual_seed(0)
    model = Recommender()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)
    batches = click_batches(16)

    def step(i):
        hist, offsets, item, clicked = batches[i % len(batches)]
        loss = F.binary_cross_entropy_with_logits(model(hist, offsets, item), clicked)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step)


# -- host overhead: greedy decoding one request at a time --------------------------------------
class TinyLM(torch.nn.Module):
    """A one-layer GRU language model over a 1000-token vocabulary."""

    def __init__(self, vocab: int = 1000, dim: int = 64, hidden: int = 128):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.cell = torch.nn.GRUCell(dim, hidden)
        self.out = torch.nn.Linear(hidden, vocab)

    def generate(self, prompts: torch.Tensor, new: int) -> torch.Tensor:
        """Greedy decoding: read the prompt token by token, then emit ``new`` tokens."""
        h = torch.zeros(prompts.shape[0], self.cell.hidden_size)
        for t in range(prompts.shape[1]):
            h = self.cell(self.emb(prompts[:, t]), h)
        tok, out = self.out(h).argmax(-1), []
        for _ in range(new):
            out.append(tok)
            h = self.cell(self.emb(tok), h)
            tok = self.out(h).argmax(-1)
        return torch.stack(out, 1)


@case("pt_infer_greedy_decode", "pytorch", "inference", 4, facts("inference", batch=1),
      fix="decode the 4 requests of a step together (batch 4)",
      share_from_fix="host_overhead", per_item=4, fix_per_item=4,
      tags=["decode", "batch1", "no_dataloader"])
def pt_infer_greedy_decode(variant):
    """Greedy token-by-token decoding of a small GRU language model, 4 requests per step
    answered one after another (4-token prompt, 12 new tokens each, batch 1): about a
    hundred tiny ops per request, per-op overhead is most of the step; decoding the 4
    together is the fix."""
    torch.manual_seed(0)
    model = TinyLM().eval()
    prompts = torch.randint(0, 1000, (64, 4), generator=torch.Generator().manual_seed(1))

    def step(i):
        reqs = prompts[(4 * i) % 64:(4 * i) % 64 + 4]
        with torch.inference_mode():
            if variant == "fix":
                return model.generate(reqs, 12)
            return [model.generate(reqs[k:k + 1], 12) for k in range(4)]
    return Loop(step)


# -- compute: activation checkpointing ---------------------------------------------------------
class Block(torch.nn.Module):
    def __init__(self, dim: int = 256, hidden: int = 512):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.ff = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.GELU(),
                                      torch.nn.Linear(hidden, dim))

    def forward(self, x):
        return x + self.ff(self.norm(x))


@case("pt_train_activation_checkpointing", "pytorch", "training", 5,
      facts("training", optimizer="adamw"), split="holdout", also=("foreach", "fused"),
      tags=["activation_checkpoint"])
def pt_train_activation_checkpointing(variant):
    """Four residual feed-forward blocks trained with activation checkpointing
    (``torch.utils.checkpoint``, non-reentrant): each block's forward runs again in the
    backward; compute-bound. ``AdamW(foreach=True)`` and ``AdamW(fused=True)`` are measured
    beside AdamW's default per-tensor loop."""
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(Block() for _ in range(4))
    head = torch.nn.Linear(256, 1)
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}}.get(variant, {})
    opt = torch.optim.AdamW([*blocks.parameters(), *head.parameters()], lr=1e-3, **impl)
    x, y = torch.randn(2, 64, 256), torch.randn(2, 64, 1)

    def step(i):
        h = x
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=False)
        loss = F.mse_loss(head(h), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step)


# -- sync: tensors logged as text every step ---------------------------------------------------
@case("pt_train_log_tensors", "pytorch", "training", 5,
      facts("training", optimizer="sgd"), split="tuned",
      fix="log plain numbers read with one .tolist()", tags=["logging", "readback"])
def pt_train_log_tensors(variant):
    """A training loop that logs every step as text: the loss tensor, the first rows of
    the predictions and each parameter's gradient norm formatted with ``str(tensor)``
    and a ``.numpy()`` copy of the predictions summarised in numpy."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(256, 64), torch.randint(0, 10, (256,))
    log: list[str] = []

    def step(i):
        out = model(x)
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with CLOCK("sync"):
            if variant == "fix":
                norms = torch.stack([p.grad.norm() for p in model.parameters()])
                vals = [loss.detach(), *norms, *out.detach()[:4].flatten()]
                log.append(" ".join(f"{v:.4f}" for v in torch.stack(vals).tolist()))
            else:
                pred = out.detach().numpy()
                grads = {n: p.grad.norm() for n, p in model.named_parameters()}
                log.append(f"step {i} loss={loss} pred={out.detach()[:4]} "
                           f"grad_norms={grads} pred_mean={pred.mean(0).round(3)}")
        del log[:-100]
    return Loop(step)


# -- compute: a pinned-memory loader and a validation loader of its own ------------------------
def conv_net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))


def digits(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 1, 28, 28, generator=g),
                         torch.randint(0, 10, (n,), generator=g))


@case("pt_train_pinned_val_loader", "pytorch", "training", 10,
      facts("training", dataloader_workers=0, optimizer="sgd"), split="holdout",
      tags=["dataloader", "pin_memory", "periodic_eval"])
def pt_train_pinned_val_loader(variant):
    """A digit classifier trained from ``DataLoader(pin_memory=True)`` on a CPU-only
    machine (nothing to pin for), with a validation pass over its own DataLoader (2
    batches of 128) after every 5th step: compute-bound, the validation periodic."""
    torch.manual_seed(0)
    model = conv_net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train = DataLoader(digits(64 * 200, 0), batch_size=64, shuffle=True, pin_memory=True)
    val = DataLoader(digits(2 * 128, 1), batch_size=128, pin_memory=True)
    it = iter(train)

    def step(i):
        with CLOCK("input"):
            x, y = next(it)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % 5 == 4:
            with CLOCK("periodic"):
                model.eval()
                with torch.no_grad():
                    correct = sum(int((model(vx).argmax(1) == vy).sum()) for vx, vy in val)
                model.train()
                return correct
        return None
    return Loop(step)


# -- compute: one loader worker with a tokenizing collate that keeps up ------------------------
WORDS = [f"word{k}" for k in range(4000)]
PIECES = ["word", "rare", *"abcdefghijklmnopqrstuvwxyz0123456789",
          *(f"##{k}" for k in range(100)), *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz")]
PIECE_IDS = {w: k + 5 for k, w in enumerate(PIECES)}


class Texts(torch.utils.data.Dataset):
    """Raw sentences of 16..63 words (cheap to read: the collate tokenizes them)."""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, k):
        rng = np.random.default_rng(k)
        picks = rng.integers(0, len(WORDS) + 400, 16 + k % 48)
        text = " ".join(WORDS[j] if j < len(WORDS) else f"Rare{j}," for j in picks)
        return text, int(picks[0] % 2)


def wordpiece(word: str) -> list[int]:
    """Greedy longest-match sub-word pieces of one word (as a WordPiece tokenizer
    written in Python splits it); an unmatched character is the unknown id 1."""
    ids, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in PIECE_IDS:
                found = PIECE_IDS[piece]
                break
            end -= 1
        ids.append(found or 1)
        start = end if found else start + 1
    return ids


def tokenize(text: str) -> list[int]:
    """Lower-case, strip punctuation, split every word into WordPiece ids."""
    ids = []
    for word in text.lower().split():
        ids += wordpiece(word.strip(".,;:!?"))
    return ids


def tokenize_collate(batch):
    """A collate in Python: tokenize each (text, label), pad to the longest, build the
    padding mask."""
    seqs = [tokenize(text) for text, _ in batch]
    longest = max(len(s) for s in seqs)
    ids = [s + [0] * (longest - len(s)) for s in seqs]
    mask = [[1.0] * len(s) + [0.0] * (longest - len(s)) for s in seqs]
    return (torch.tensor(ids), torch.tensor(mask),
            torch.tensor([label for _, label in batch]))


class TextCNN(torch.nn.Module):
    """Token embeddings, two 1-d convolutions, a masked max-pool, a linear head."""

    def __init__(self, vocab: int = VOCAB, dim: int = 32, width: int = 48):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.conv1 = torch.nn.Conv1d(dim, width, 5, padding=2)
        self.conv2 = torch.nn.Conv1d(width, width, 3, padding=1)
        self.head = torch.nn.Linear(width, 2)

    def forward(self, ids, mask):
        h = F.relu(self.conv1(self.emb(ids).transpose(1, 2)))
        h = F.relu(self.conv2(h)).masked_fill(mask[:, None] == 0, -1e4)
        return self.head(h.amax(2))


@case("pt_train_tokenize_collate_nw1", "pytorch", "training", 8,
      facts("training", dataloader_workers=1, optimizer="adam"), split="holdout",
      warmup=4, tags=["dataloader", "collate", "workers"])
def pt_train_tokenize_collate_nw1(variant):
    """A text CNN classifier fed by one DataLoader worker whose Python collate tokenizes
    the raw sentences (WordPiece-style, in Python) and pads them; the worker makes a
    batch faster than the step uses it, so the loader keeps up: compute-bound."""
    torch.manual_seed(0)
    model = TextCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it = iter(DataLoader(Texts(), batch_size=32, collate_fn=tokenize_collate, num_workers=1,
                         prefetch_factor=4))

    def step(i):
        with CLOCK("input"):
            ids, mask, y = next(it)
        loss = F.cross_entropy(model(ids, mask), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Loop(step, getattr(it, "_shutdown_workers", None))


# -- start-up: torch.compile of a transformer encoder in inference -----------------------------
@case("pt_infer_compile_encoder", "pytorch", "inference", 10,
      facts("inference", compiled="torch.compile"), split="holdout",
      startup_in_window=True, warmup=2, tags=["torch_compile", "warmup"])
def pt_infer_compile_encoder(variant):
    """A two-layer transformer encoder (sentence embeddings, mean-pooled) compiled with
    ``torch.compile`` (aot_eager backend) and captured from its first call: the first
    call traces and compiles, the steady calls are a few ms."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    model = compiled(enc)
    x = torch.randn(16, 32, 64)

    def step(i):
        with torch.no_grad():
            return model(x).mean(1)
    return Loop(step)
