"""Held-out PyTorch cases of plain programs, written without looking at the advisor's
rules: a tabular classifier whose Dataset reads each sample as one pandas ``df.iloc[i]``
row through ``DataLoader(num_workers=0)``, a small box detector whose loss loops in
Python over each image's ground-truth boxes, a small GPT-style language model trained
at an ordinary batch, and a PointNet classifier served on batches of point clouds of
different sizes, one cloud at a time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_daily import shuffled_epochs

F = torch.nn.functional


# -- input: a pandas row per sample, num_workers=0 ------------------------------------------
SEGMENTS = ("retail", "smb", "enterprise", "public", "edu", "health", "media", "other")


def customer_table(n: int = 4096, numeric: int = 24, seed: int = 5) -> pd.DataFrame:
    """A churn table as a notebook loads it from CSV: numeric columns, a segment column of
    strings and an integer label."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.standard_normal((n, numeric)).astype(np.float32),
                      columns=[f"f{k}" for k in range(numeric)])
    df["segment"] = rng.choice(SEGMENTS, n)
    df["churned"] = rng.integers(0, 2, n)
    return df


class CustomerRows(Dataset):
    """One sample per DataFrame row: ``df.iloc[i]``, its numeric columns as a float
    tensor, its segment one-hot, its label."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        self.numeric = [c for c in df.columns if c.startswith("f")]

    def __len__(self):
        return len(self.df)

    def __getitem__(self, i):
        row = self.df.iloc[i]
        x = torch.tensor(row[self.numeric].to_numpy(dtype=np.float32))
        seg = torch.zeros(len(SEGMENTS))
        seg[SEGMENTS.index(row["segment"])] = 1.0
        return torch.cat([x, seg]), int(row["churned"])


def table_tensors(rows: CustomerRows) -> TensorDataset:
    """The whole table converted once: numeric columns, segment one-hot, labels."""
    df = rows.df
    seg = torch.tensor(df["segment"].map(SEGMENTS.index).to_numpy())
    x = torch.cat([torch.tensor(df[rows.numeric].to_numpy(dtype=np.float32)),
                   F.one_hot(seg, len(SEGMENTS)).float()], 1)
    return TensorDataset(x, torch.tensor(df["churned"].to_numpy()))


@case("pt_train_pandas_iloc_nw0", "pytorch", "training", 6,
      facts("training", dataloader_workers=0, optimizer="adam"),
      warmup=3, fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("tensors_once",),
      tags=["dataloader", "pandas"])
def pt_train_pandas_iloc_nw0(variant):
    """A 32-256-256-2 MLP trained with Adam on a 4,096-row customer table held as a pandas
    DataFrame, its Dataset reading each sample as ``df.iloc[i]`` (the numeric columns
    selected from the row, the segment one-hot, the label) through the default
    ``DataLoader(num_workers=0)`` (batches of 64, shuffled, epoch after epoch).  Beside
    the loader-worker fix, ``tensors_once`` converts the table to tensors once, ahead of
    training, and trains on a ``TensorDataset`` of them through the same loader."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = CustomerRows(customer_table())
    if variant == "tensors_once":
        data = table_tensors(data)
    return shuffled_epochs(data, 64, workers(variant), model, opt)


# -- per-op overhead: a detection loss looping over each image's boxes -----------------------
GRID = 8  # the detector predicts one box and one objectness per cell of an 8x8 grid


def cell_boxes() -> torch.Tensor:
    """Each grid cell's own box (x1, y1, x2, y2 in [0, 1]), the anchors."""
    k = torch.arange(GRID, dtype=torch.float32) / GRID
    y, x = torch.meshgrid(k, k, indexing="ij")
    return torch.stack([x, y, x + 1 / GRID, y + 1 / GRID], -1).reshape(-1, 4)


def box_iou(a, b):
    """IoU of every box of ``a`` [..., N, 4] with every box of ``b`` [..., M, 4]."""
    lt = torch.maximum(a[..., :, None, :2], b[..., None, :, :2])
    rb = torch.minimum(a[..., :, None, 2:], b[..., None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = (a[..., 2:] - a[..., :2]).prod(-1)
    barea = (b[..., 2:] - b[..., :2]).prod(-1)
    return inter / (area[..., :, None] + barea[..., None, :] - inter)


def loss_per_box(boxes, obj, targets, anchors):
    """The loss as written box by box: for each image, for each of its ground-truth boxes,
    the best-overlapping cell is matched and its box regressed (smooth L1); the
    objectness of the matched cells is 1, of the others 0."""
    reg, obj_loss = [], []
    for b in range(len(targets)):
        want = torch.zeros(GRID * GRID)
        for gt in targets[b]:
            cell = box_iou(gt[None], anchors)[0].argmax()
            reg.append(F.smooth_l1_loss(boxes[b, cell], gt))
            want[cell] = 1.0
        obj_loss.append(F.binary_cross_entropy_with_logits(obj[b], want))
    return torch.stack(reg).mean() + torch.stack(obj_loss).mean()


def loss_padded(boxes, obj, targets, anchors):
    """The same loss for the whole batch at once: the boxes padded to the most an image
    has, matched with one IoU, regressed and masked together."""
    most = max(len(t) for t in targets)
    gt = torch.zeros(len(targets), most, 4)
    mask = torch.zeros(len(targets), most, dtype=torch.bool)
    for b, t in enumerate(targets):
        gt[b, :len(t)], mask[b, :len(t)] = t, True
    cells = box_iou(gt, anchors).argmax(-1)  # [B, most]
    picked = boxes.gather(1, cells[..., None].expand(-1, -1, 4))
    reg = F.smooth_l1_loss(picked, gt, reduction="none").mean(-1)[mask].mean()
    want = torch.zeros_like(obj)
    rows = torch.arange(len(targets))[:, None].expand_as(cells)
    want[rows[mask], cells[mask]] = 1.0
    return reg + F.binary_cross_entropy_with_logits(obj, want)


class GridDetector(torch.nn.Module):
    """A small strided conv backbone on 64x64 images and a 1x1 head: per grid cell, a
    box (sigmoid x1, y1, x2, y2) and an objectness logit."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 32, 3, stride=2, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Conv2d(32, 5, 1)

    def forward(self, x):
        out = self.head(self.body(x)).flatten(2).transpose(1, 2)  # [B, 64, 5]
        return out[..., :4].sigmoid(), out[..., 4]


def random_boxes(n: int, rng: np.random.Generator) -> torch.Tensor:
    """``n`` ground-truth boxes inside the unit square."""
    xy = rng.uniform(0, 0.8, (n, 2))
    wh = rng.uniform(0.08, 0.2, (n, 2))
    return torch.tensor(np.concatenate([xy, xy + wh], 1), dtype=torch.float32)


@case("pt_train_box_loss_loop", "pytorch", "training", 3,
      facts("training", optimizer="sgd"), split="tuned", warmup=3,
      fix="the loss computed for the whole batch at once",
      share_from_fix="host_overhead", tags=["detection", "python_loop", "custom_loss"])
def pt_train_box_loss_loop(variant):
    """A small grid detector (three stride-2 conv layers, a 1x1 head predicting a box and
    an objectness per cell of an 8x8 grid) trained with SGD and momentum on batches of 8
    64x64 images held in memory, each with 2 to 8 ground-truth boxes kept as a list of
    tensors.  Its loss loops in Python over the images and each image's boxes: the
    best-overlapping cell matched by IoU, its box regressed with smooth L1, the matched
    cells' objectness set, one BCE per image.  The fix computes the same loss for the
    whole batch at once (boxes padded to the most an image has, one IoU, masks)."""
    torch.manual_seed(0)
    model = GridDetector()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(21)
    images = torch.randn(256, 3, 64, 64, generator=torch.Generator().manual_seed(21))
    targets = [random_boxes(int(rng.integers(2, 9)), rng) for _ in range(256)]
    anchors = cell_boxes()
    loss_fn = loss_padded if variant == "fix" else loss_per_box

    def step(i):
        with CLOCK("input"):
            k = (8 * i) % 256
            x, t = images[k:k + 8], targets[k:k + 8]
        boxes, obj = model(x)
        loss = loss_fn(boxes, obj, t, anchors)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)


# -- compute: a small GPT-style language model ----------------------------------------------
class TinyGPT(torch.nn.Module):
    """Token and position embeddings, ``layers`` pre-norm causal transformer blocks
    (``nn.TransformerEncoderLayer`` with a causal mask), a final LayerNorm and a head
    tied to the token embedding."""

    def __init__(self, vocab: int = 2048, width: int = 192, heads: int = 4,
                 layers: int = 4, context: int = 64):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Parameter(torch.zeros(context, width))
        block = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(width)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(
            context), persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.tok(tokens) + self.pos[:t]
        x = self.blocks(x, mask=self.mask[:t, :t], is_causal=True)
        return self.norm(x) @ self.tok.weight.T


@case("pt_train_tiny_gpt", "pytorch", "training", 3,
      facts("training", optimizer="adamw"), split="holdout", warmup=2,
      fix="AdamW(fused=True)", share_from_fix="host_overhead",
      tags=["transformer", "language_model"])
def pt_train_tiny_gpt(variant):
    """A GPT-style language model (4 pre-norm causal blocks, width 192, 4 heads, a
    2,048-token vocabulary, the head tied to the embedding) trained with AdamW
    (weight decay 0.1, default per-tensor loop) and gradient clipping on batches of 16
    windows of 64 tokens cut at random from a token stream held in memory: the step is
    the model's matmuls and attention.  ``AdamW(fused=True)`` is measured beside it (what
    it saves is the optimizer's per-tensor loop)."""
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1,
                            fused=variant == "fix" or None)
    stream = torch.randint(0, 2048, (200_000,), generator=torch.Generator().manual_seed(8))
    g = torch.Generator().manual_seed(9)

    def step(i):
        with CLOCK("input"):
            starts = torch.randint(0, len(stream) - 65, (16,), generator=g)
            chunk = torch.stack([stream[s:s + 65] for s in starts.tolist()])
        logits = model(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 2048), chunk[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()
    return Loop(step)


# -- compute, inference: PointNet over clouds of different sizes, one at a time --------------
class PointNet(torch.nn.Module):
    """A shared per-point MLP (3-64-128-512), a max over the points, a 512-256-10 head."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.points = torch.nn.Sequential(
            torch.nn.Linear(3, 64), torch.nn.ReLU(), torch.nn.Linear(64, 128),
            torch.nn.ReLU(), torch.nn.Linear(128, 512))
        self.head = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                        torch.nn.Linear(256, classes))

    def forward(self, cloud):
        """Logits of one cloud [N, 3]."""
        return self.head(self.points(cloud).amax(0))

    def forward_packed(self, points, owner, n: int):
        """Logits of ``n`` clouds packed into one [sum N, 3] tensor, ``owner`` saying
        whose each point is: the per-point MLP once, a per-cloud max by scatter."""
        feats = self.points(points)
        pooled = feats.new_full((n, feats.shape[1]), float("-inf")).scatter_reduce(
            0, owner[:, None].expand_as(feats), feats, "amax")
        return self.head(pooled)


@case("pt_infer_pointcloud_loop", "pytorch", "inference", 6, facts("inference"),
      split="tuned", warmup=3, fix="the clouds packed into one tensor, one forward",
      tags=["point_cloud", "python_loop", "variable_size"])
def pt_infer_pointcloud_loop(variant):
    """A PointNet classifier (per-point MLP 3-64-128-512, max-pool, 512-256-10 head) in
    ``eval()`` under ``torch.no_grad()`` classifying scanned objects, 16 clouds a step of
    256 to 2,048 points each (held in memory as a list of tensors): the loop runs the
    model on each cloud in turn, stacks the logits and reads the classes with one
    ``.tolist()``.  The fix packs the 16 clouds into one tensor and runs the per-point
    MLP once, pooling each cloud's points with one ``scatter_reduce``."""
    torch.manual_seed(0)
    model = PointNet().eval()
    rng = np.random.default_rng(31)
    clouds = [torch.from_numpy(rng.standard_normal((int(rng.integers(256, 2049)), 3))
                               .astype(np.float32)) for _ in range(128)]

    def step(i):
        with CLOCK("input"):
            k = (16 * i) % 128
            batch = clouds[k:k + 16]
            if variant == "fix":
                points = torch.cat(batch)
                owner = torch.repeat_interleave(torch.arange(16),
                                                torch.tensor([len(c) for c in batch]))
        with torch.no_grad():
            if variant == "fix":
                logits = model.forward_packed(points, owner, 16)
            else:
                logits = torch.stack([model(c) for c in batch])
        return logits.argmax(1).tolist()
    return Loop(step)
