"""Held-out PyTorch cases of data loading and serving, written without looking at the
advisor's rules: a ``Dataset`` that runs one ``sqlite3`` query per sample through the
default ``DataLoader``, one ``torch.save``-d ``.pt`` file per sample read with
``torch.load`` by two loader workers, an inference service answering the requests a
client thread puts on a ``queue.Queue`` one at a time, and a text classifier whose
``collate_fn`` returns dicts of padded tensors and string metadata.
"""

from __future__ import annotations

import atexit
import queue
import shutil
import sqlite3
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_daily import shuffled_epochs
from corpus.torch_cases_field import shut_down_with
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


def scratch(prefix: str) -> Path:
    """A temporary folder removed when the generator exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


# -- input: one SQLite query per sample, num_workers=0 ----------------------------------------
class SqliteRows(Dataset):
    """Samples kept as rows of a SQLite table (id, label, the features as a float32 BLOB);
    an item runs one ``SELECT`` by primary key.  The connection is opened on first use in
    each process, since a connection cannot cross into a loader worker."""

    DB: list[Path] = []

    def __init__(self, n: int = 20_000, width: int = 256, classes: int = 8):
        if not self.DB:
            path = scratch("sqlite-rows-") / "samples.db"
            rng = np.random.default_rng(21)
            with sqlite3.connect(path) as con:
                con.execute("CREATE TABLE samples (id INTEGER PRIMARY KEY, label INTEGER, "
                            "features BLOB)")
                con.executemany("INSERT INTO samples VALUES (?, ?, ?)",
                                ((k, int(rng.integers(classes)),
                                  rng.standard_normal(width, dtype=np.float32).tobytes())
                                 for k in range(n)))
            self.DB.append(path)
        self.path, self.con = self.DB[0], None
        with sqlite3.connect(self.path) as con:
            self.n = con.execute("SELECT COUNT(*) FROM samples").fetchone()[0]

    def __len__(self):
        return self.n

    def __getitem__(self, k):
        if self.con is None:
            self.con = sqlite3.connect(self.path)
        label, blob = self.con.execute("SELECT label, features FROM samples WHERE id = ?",
                                       (int(k),)).fetchone()
        return torch.from_numpy(np.frombuffer(blob, dtype=np.float32).copy()), label


class SqliteBatches(SqliteRows):
    """The same rows fetched a batch at a time: ``__getitems__`` runs one ``SELECT ...
    WHERE id IN (...)`` for the batch's ids."""

    def __getitems__(self, ks):
        if self.con is None:
            self.con = sqlite3.connect(self.path)
        ks = [int(k) for k in ks]
        rows = dict((k, (label, blob)) for k, label, blob in self.con.execute(
            f"SELECT id, label, features FROM samples WHERE id IN ({','.join('?' * len(ks))})",
            ks))
        return [(torch.from_numpy(np.frombuffer(rows[k][1], dtype=np.float32).copy()),
                 rows[k][0]) for k in ks]


@case("pt_train_sqlite_rows_nw0", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="adam"), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("one_query_per_batch",),
      tags=["dataloader", "sqlite"])
def pt_train_sqlite_rows_nw0(variant):
    """A 256-64-8 MLP trained with Adam on 20,000 rows a ``Dataset`` reads from a
    SQLite database, one ``SELECT label, features FROM samples WHERE id = ?`` per item
    (the features a 1 KB float32 BLOB turned into a tensor with ``np.frombuffer``),
    through the default ``DataLoader(batch_size=256, shuffle=True)`` with no workers:
    every batch runs 256 queries in the main process.  Beside the loader's workers the
    truth has one query per batch (``__getitems__``, ``WHERE id IN (...)``,
    ``one_query_per_batch``)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rows = SqliteBatches() if variant == "one_query_per_batch" else SqliteRows()
    return shuffled_epochs(rows, 256, workers(variant), model, opt)


# -- input: one torch.save-d file per sample, read by two workers ------------------------------
class PtFolder(Dataset):
    """Samples a preprocessing script saved one per file with ``torch.save`` (a dict of a
    3x32x32 uint8 image and its label); an item ``torch.load``-s its file."""

    FOLDER: list[Path] = []

    def __init__(self, n: int = 2048):
        if not self.FOLDER:
            folder = scratch("pt-samples-")
            g = torch.Generator().manual_seed(13)
            for k in range(n):
                torch.save({"image": torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8,
                                                   generator=g),
                            "label": k % 10}, folder / f"{k:05d}.pt")
            self.FOLDER.append(folder)
        self.files = sorted(self.FOLDER[0].glob("*.pt"))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, k):
        sample = torch.load(self.files[k])
        return sample["image"].float().div_(255), sample["label"]


def packed(folder: PtFolder) -> TensorDataset:
    """The same samples saved once as two stacked tensors in one file and loaded whole."""
    path = folder.files[0].parent.parent / f"{folder.files[0].parent.name}-packed.pt"
    if not path.exists():
        samples = [torch.load(f) for f in folder.files]
        torch.save({"images": torch.stack([s["image"] for s in samples]),
                    "labels": torch.tensor([s["label"] for s in samples])}, path)
        atexit.register(path.unlink, missing_ok=True)
    data = torch.load(path)
    return TensorDataset(data["images"].float().div_(255), data["labels"])


def small_cnn() -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


@case("pt_train_pt_files_nw2", "pytorch", "training", 6,
      facts("training", dataloader_workers=2, optimizer="sgd"), warmup=4,
      fix="the samples packed into one tensor file, loaded once into memory",
      tags=["dataloader", "workers", "torch_load", "pt_files"])
def pt_train_pt_files_nw2(variant):
    """A two-conv CNN trained with SGD and momentum on 2,048 samples saved one per ``.pt``
    file (``torch.save`` of a dict with a 3x32x32 uint8 image and its label), which the
    ``Dataset`` reads with ``torch.load`` in ``__getitem__`` through
    ``DataLoader(batch_size=32, shuffle=True, num_workers=2, persistent_workers=True)``.
    The fix packs the samples into one file of stacked tensors, loaded once and served
    from memory by a ``TensorDataset`` (no workers)."""
    torch.manual_seed(0)
    model = small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if variant == "fix":
        return shuffled_epochs(packed(PtFolder()), 32, 0, model, opt)
    return shuffled_epochs(PtFolder(), 32, 2, model, opt)


# -- host overhead: requests from a queue.Queue answered one at a time -------------------------
class Request:
    """One scoring request: its features and the future its answer is set on."""

    __slots__ = ("features", "reply")

    def __init__(self, features: torch.Tensor):
        self.features, self.reply = features, Future()


class Client(threading.Thread):
    """The request side of the service: puts requests on the queue as fast as it takes
    them (a bounded queue of 256), until stopped."""

    def __init__(self, q: queue.Queue, pool: np.ndarray):
        super().__init__(daemon=True)
        self.q, self.pool, self.stop = q, pool, threading.Event()

    def run(self):
        k = 0
        while not self.stop.is_set():
            try:
                self.q.put(Request(torch.from_numpy(self.pool[k % len(self.pool)])),
                           timeout=0.05)
            except queue.Full:
                continue
            k += 1

    def close(self):
        self.stop.set()
        self.join()


def scorer() -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 2)).eval()


REQUESTS = 64


def next_batch(q: queue.Queue, most: int, wait_s: float = 0.005) -> list[Request]:
    """Micro-batching: block for the first request, then take more until ``most`` are in
    hand or none comes within ``wait_s``."""
    batch = [q.get()]
    while len(batch) < most:
        try:
            batch.append(q.get(timeout=wait_s))
        except queue.Empty:
            break
    return batch


@case("pt_infer_queue_one_at_a_time", "pytorch", "inference", 6,
      facts("inference", batch=1), split="tuned", warmup=3,
      fix="micro-batches of up to 64 queued requests, one forward each",
      share_from_fix="host_overhead", per_item=REQUESTS, fix_per_item=REQUESTS,
      tags=["server", "queue", "thread", "batch1"])
def pt_infer_queue_one_at_a_time(variant):
    """A fraud-scoring service: a client thread puts requests (64 features each) on a
    ``queue.Queue(maxsize=256)``; the serving loop takes them one at a time and answers
    each with its own forward of a 64-256-256-128-2 MLP under ``torch.no_grad()``,
    ``softmax`` and ``.item()`` of the fraud probability set on the request's ``Future``
    (64 requests a step).  The fix takes micro-batches of up to 64 queued requests
    (``q.get`` then ``q.get(timeout=5 ms)``) and answers them with one forward."""
    torch.manual_seed(0)
    model = scorer()
    q: queue.Queue = queue.Queue(maxsize=256)
    client = Client(q, np.random.default_rng(5).standard_normal((512, 64), dtype=np.float32))
    client.start()

    def one_at_a_time(i):
        for _ in range(REQUESTS):
            with CLOCK("input"):
                req = q.get()
            with torch.no_grad():
                p = model(req.features.unsqueeze(0)).softmax(1)[0, 1]
            req.reply.set_result(p.item())

    def micro_batched(i):
        served = 0
        while served < REQUESTS:
            with CLOCK("input"):
                batch = next_batch(q, REQUESTS - served)
            with torch.no_grad():
                p = model(torch.stack([r.features for r in batch])).softmax(1)[:, 1]
            for r, v in zip(batch, p.tolist()):
                r.reply.set_result(v)
            served += len(batch)
    return Loop(micro_batched if variant == "fix" else one_at_a_time, client.close)


# -- compute: a collate_fn of dicts with padded tensors and string metadata --------------------
class Tickets(Dataset):
    """Support tickets already tokenized: per item a dict of its token ids (16 to 64), its
    queue label and its string metadata (ticket id, language)."""

    def __init__(self, n: int = 2048, vocab: int = 8000, seed: int = 31):
        rng = np.random.default_rng(seed)
        self.items = [{"ticket_id": f"T-{100000 + k}", "lang": ("en", "de", "fr")[k % 3],
                       "ids": rng.integers(1, vocab, int(rng.integers(16, 65))).tolist(),
                       "label": int(rng.integers(6))} for k in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, k):
        item = self.items[k]
        return {**item, "ids": torch.tensor(item["ids"])}


def collate_tickets(batch: list[dict]) -> dict:
    """A batch as a dict: token ids padded with ``pad_sequence``, the padding mask, the
    labels, and the metadata kept as lists of strings."""
    ids = pad_sequence([b["ids"] for b in batch], batch_first=True, padding_value=0)
    return {"input_ids": ids, "padding_mask": ids == 0,
            "labels": torch.tensor([b["label"] for b in batch]),
            "ticket_id": [b["ticket_id"] for b in batch], "lang": [b["lang"] for b in batch]}


class TicketRouter(nn.Module):
    """Embeddings, a 2-layer transformer encoder (d_model 128, 4 heads, feed-forward 256)
    and a head on the mean of the tokens that are not padding."""

    def __init__(self, vocab: int = 8000, d: int = 128, classes: int = 6):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        layer = nn.TransformerEncoderLayer(d, 4, 256, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, ids, padding_mask):
        h = self.encoder(self.emb(ids), src_key_padding_mask=padding_mask)
        keep = (~padding_mask).unsqueeze(2).float()
        return self.head((h * keep).sum(1) / keep.sum(1))


@case("pt_train_dict_collate_tickets", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="adamw"), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, tags=["dataloader", "collate_fn", "dict_batch"])
def pt_train_dict_collate_tickets(variant):
    """A support-ticket router (embeddings, a 2-layer transformer encoder, d_model 128,
    masked mean pooling) trained with AdamW on 2,048 tokenized tickets through
    ``DataLoader(batch_size=16, shuffle=True, collate_fn=collate_tickets)`` with no
    workers; the ``collate_fn`` returns a dict of the padded token ids, their padding
    mask, the labels and the tickets' ids and languages as lists of strings.  Making a
    batch is a small part of the step: the encoder's work is the step."""
    torch.manual_seed(0)
    model = TicketRouter()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    n = workers(variant)
    loader = DataLoader(Tickets(), batch_size=16, shuffle=True, collate_fn=collate_tickets,
                        num_workers=n, persistent_workers=n > 0)
    batches = epochs(loader)

    def step(i):
        with CLOCK("input"):
            batch = next(batches)
        loss = F.cross_entropy(model(batch["input_ids"], batch["padding_mask"]),
                               batch["labels"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return shut_down_with(Loop(step, batches.close), loader)
