"""Held-out PyTorch cases of ordinary programs, written without looking at the advisor's
rules: a sequence decoder trained with teacher forcing by a Python loop of
``nn.LSTMCell`` calls over the time steps, a tabular MLP served in float64 (the model
turned ``.double()`` to match the float64 arrays NumPy gave), a classifier whose Dataset
reads random rows of an ``np.memmap`` file through ``DataLoader(num_workers=0)``, and a
training loop left with ``torch.autograd.set_detect_anomaly(True)`` on.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_daily import batch_at, clocked_step, shuffled_epochs
from corpus.torch_cases_more_daily import residual_mlp, rows
from corpus.torch_cases_users import epochs

F = torch.nn.functional


# -- compute, per-step overhead beside it: an LSTMCell called once per time step -----------
class CellDecoder(torch.nn.Module):
    """A character-level decoder: embedding, one LSTM layer, a linear head over the
    vocabulary.  With ``fused`` False it runs as users write a teacher-forced decoder, one
    ``nn.LSTMCell`` call and one head per time step; with ``fused`` one ``nn.LSTM`` (the
    same weights) runs over the whole sequence and the head once."""

    def __init__(self, vocab: int = 64, width: int = 128, fused: bool = False):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.rnn = (torch.nn.LSTM(width, width, batch_first=True) if fused
                    else torch.nn.LSTMCell(width, width))
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        if isinstance(self.rnn, torch.nn.LSTM):
            return self.head(self.rnn(x)[0])
        h = c = x.new_zeros(x.shape[0], self.rnn.hidden_size)
        outs = []
        for t in range(x.shape[1]):  # teacher forcing: the true previous token each step
            h, c = self.rnn(x[:, t], (h, c))
            outs.append(self.head(h))
        return torch.stack(outs, 1)


@case("pt_train_lstmcell_teacher_forcing", "pytorch", "training", 3,
      facts("training", optimizer="adam"), split="tuned", warmup=3,
      fix="one nn.LSTM call over the sequence", share_from_fix="host_overhead",
      tags=["rnn", "python_loop", "teacher_forcing"])
def pt_train_lstmcell_teacher_forcing(variant):
    """A character-level decoder (embedding 64x128, one 128-wide LSTM layer, a linear head
    over 64 symbols) trained with Adam and teacher forcing on batches of 32 sequences of
    20 tokens held in memory: the loop over the time steps is Python, one
    ``nn.LSTMCell`` call and one head per step, the logits stacked for one cross-entropy.
    The fix runs the same weights as one ``nn.LSTM`` over the sequence and the head once."""
    torch.manual_seed(0)
    model = CellDecoder(fused=variant == "fix")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    text = torch.randint(0, 64, (512, 21), generator=torch.Generator().manual_seed(6))

    def step(i):
        with CLOCK("input"):
            k = (32 * i) % 512
            seq = text[k:k + 32]
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 64), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- compute: a tabular MLP served in float64 ------------------------------------------------
def tabular_scorer():
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 1)).eval()


@case("pt_infer_float64_mlp", "pytorch", "inference", 6,
      facts("inference", precision="fp64"), split="tuned", warmup=3,
      fix="the model and its inputs in float32", tags=["float64", "tabular"])
def pt_infer_float64_mlp(variant):
    """A 256-1024-1024-1 MLP scoring tabular rows in ``eval()`` under ``torch.no_grad()``,
    batches of 512 rows sliced from a float64 NumPy array: ``torch.from_numpy`` keeps
    float64, so the model was turned ``.double()`` to match and every matmul runs in
    float64; the scores are read with one ``.numpy()``.  The fix casts the model and the
    batches to float32."""
    torch.manual_seed(0)
    model = tabular_scorer()
    table = np.random.default_rng(9).standard_normal((8192, 256))
    dtype = torch.float32 if variant == "fix" else torch.float64
    model = model.to(dtype)

    def step(i):
        with CLOCK("input"):
            k = (512 * i) % len(table)
            x = torch.from_numpy(table[k:k + 512]).to(dtype)
        with torch.no_grad():
            scores = model(x)
        return scores.numpy()
    return Loop(step)


# -- input: random rows of an np.memmap file, num_workers=0 -----------------------------------
class MemmapRows(Dataset):
    """Feature rows (256 float32 each) and class labels in two ``np.memmap`` files that a
    preprocessing job wrote; an item copies its row out of the mapping."""

    FILES: list[Path] = []

    def __init__(self, n: int = 65536, width: int = 256):
        if not self.FILES:
            folder = Path(tempfile.mkdtemp(prefix="memmap-rows-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            rng = np.random.default_rng(13)
            feats = np.memmap(folder / "x.f32", np.float32, "w+", shape=(n, width))
            feats[:] = rng.standard_normal((n, width), dtype=np.float32)
            feats.flush()
            np.save(folder / "y.npy", rng.integers(0, 10, n))
            self.FILES.append(folder)
        folder = self.FILES[0]
        self.x = np.memmap(folder / "x.f32", np.float32, "r", shape=(n, width))
        self.y = np.load(folder / "y.npy", mmap_mode="r")

    def __len__(self):
        return len(self.x)

    def __getitem__(self, k):
        return torch.from_numpy(np.array(self.x[k])), int(self.y[k])


class MemmapBatches(MemmapRows):
    """The same files read a batch per item: the rows and labels of a list of indices,
    one fancy index each (the indices sorted, so the reads go through the file in
    order)."""

    def __getitem__(self, ks):
        ks = np.sort(np.asarray(ks))
        return torch.from_numpy(self.x[ks]), torch.from_numpy(self.y[ks])


def batched_reads(data: MemmapBatches, batch: int, model, opt) -> Loop:
    """Training on ``data``'s rows fetched a shuffled batch at a time (``BatchSampler``
    over a ``RandomSampler``, the loader's automatic batching off), epoch after epoch."""
    sampler = BatchSampler(RandomSampler(data), batch, drop_last=False)
    loader = DataLoader(data, sampler=sampler, batch_size=None)
    batches = epochs(loader)

    def step(i):
        return clocked_step(model, opt, lambda: next(batches))
    return Loop(step, batches.close)


@case("pt_train_memmap_rows_nw0", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="sgd"),
      warmup=3, fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("batched_reads",),
      tags=["dataloader", "memmap"])
def pt_train_memmap_rows_nw0(variant):
    """A 256-64-10 MLP classifier trained with SGD and momentum on rows its Dataset
    reads from an ``np.memmap`` file of 65,536 rows (64 MB, in the page cache), one random
    row per item, through the default ``DataLoader(num_workers=0)`` (batches of 256,
    shuffled, epoch after epoch): every batch makes 256 small copies out of the mapping
    and collates them in the main process.  Beside the loader's workers the truth has
    each batch read with one fancy index of its sorted rows (``batched_reads``)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if variant == "batched_reads":
        return batched_reads(MemmapBatches(), 256, model, opt)
    return shuffled_epochs(MemmapRows(), 256, workers(variant), model, opt)


# -- anomaly detection left on ---------------------------------------------------------------
@case("pt_train_detect_anomaly_on", "pytorch", "training", 5,
      facts("training", optimizer="adam"), split="tuned", warmup=3,
      fix="torch.autograd.set_detect_anomaly(False)", share_from_fix="host_overhead",
      tags=["detect_anomaly", "debug_left_on"])
def pt_train_detect_anomaly_on(variant):
    """A residual MLP (6 LayerNorm-Linear-GELU-Linear blocks, 128 wide) trained with Adam
    on batches of 32 rows from memory, the script still starting with
    ``torch.autograd.set_detect_anomaly(True)`` from a hunt for a NaN: every op of the
    forward stores its Python stack for the backward, and every backward node's outputs
    are checked for NaN.  The fix turns anomaly detection off."""
    torch.manual_seed(0)
    model = residual_mlp(width=128, blocks=6)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs, ys = rows(4096, 64, 10, seed=10)
    torch.autograd.set_detect_anomaly(variant != "fix")

    def step(i):
        return clocked_step(model, opt, lambda: batch_at(xs, ys, 32, i))
    return Loop(step, lambda: torch.autograd.set_detect_anomaly(False))
