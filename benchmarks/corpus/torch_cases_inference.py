"""PyTorch inference cases of kinds the others lack, written without looking at the
advisor's rules (the ensemble held out, the other three tuned on since): test-time
augmentation that runs the model once per flip and rotation of each request's image,
Monte-Carlo dropout that runs its stochastic forward passes one after another, an ensemble
of five CNNs evaluated one after another on a batch, and a scoring job whose
``IterableDataset`` reads and parses JSON-lines records in ``__iter__`` (sharded between
loader workers with ``get_worker_info``).
"""

from __future__ import annotations

import atexit
import json
import random
import re
import shutil
import tempfile
from pathlib import Path

import torch
from torch.func import functional_call, stack_module_state
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- host overhead: test-time augmentation, one forward per view --------------------------------
class CifarNet(nn.Module):
    """The CIFAR-10 tutorial's classifier: two conv-pool stages and three linear layers."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 6, 5), nn.Conv2d(6, 16, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def d4_views(img: torch.Tensor) -> list[torch.Tensor]:
    """The eight flips and rotations of an NCHW batch ("d4" test-time augmentation)."""
    views = [torch.rot90(img, k, dims=(2, 3)) for k in range(4)]
    return views + [v.flip(3) for v in views]


TTA_REQUESTS = 4


@case("pt_infer_tta_flips_loop", "pytorch", "inference", 5, facts("inference", batch=1),
      split="tuned", warmup=3, fix="the 8 views of each image stacked into one batch",
      share_from_fix="host_overhead", tags=["tta", "python_loop", "batch1", "server"])
def pt_infer_tta_flips_loop(variant):
    """A classification endpoint with test-time augmentation: each step answers 4
    requests of one 32x32 RGB image; per request the CIFAR-10 tutorial's net (in
    ``eval()`` under ``torch.no_grad()``) runs once per view of the image (4 rotations,
    each also flipped: 8 forward passes in a Python loop), the softmaxes are averaged and
    the class read with ``.item()``.  The fix stacks the 8 views into one batch of 8 and
    runs the net once per request."""
    torch.manual_seed(0)
    model = CifarNet().eval()
    images = torch.rand(64, 3, 32, 32, generator=torch.Generator().manual_seed(11))

    def step(i):
        answers = []
        with torch.no_grad():
            for r in range(TTA_REQUESTS):
                k = (i * TTA_REQUESTS + r) % 64
                img = images[k:k + 1]
                if variant == "fix":
                    probs = model(torch.cat(d4_views(img))).softmax(1).mean(0)
                else:
                    probs = torch.stack([model(v).softmax(1)[0] for v in d4_views(img)]).mean(0)
                with CLOCK("sync"):
                    answers.append(probs.argmax().item())
        return answers
    return Loop(step)


# -- host overhead: Monte-Carlo dropout, one stochastic pass after another -----------------------
class TabularRegressor(nn.Module):
    """A tabular MLP with dropout after each hidden layer (32-256-256-1)."""

    def __init__(self, n_in: int = 32, hidden: int = 256, p: float = 0.2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Dropout(p),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(p),
                                 nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


def enable_dropout(model: nn.Module) -> None:
    """Dropout layers back in training mode, the rest of the model in ``eval()``."""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.train()


MC_PASSES, MC_ROWS = 50, 4


@case("pt_infer_mc_dropout_passes", "pytorch", "inference", 5, facts("inference"),
      split="tuned", warmup=3, fix=f"the batch repeated {MC_PASSES} times, one pass",
      share_from_fix="host_overhead", tags=["mc_dropout", "python_loop", "uncertainty"])
def pt_infer_mc_dropout_passes(variant):
    """Uncertainty estimates with Monte-Carlo dropout: each step takes a request of 4
    tabular rows (32 features), and with the regressor in ``eval()`` but its dropout
    layers switched back to ``train()`` runs 50 stochastic forward passes one after
    another under ``torch.no_grad()``, stacks them and returns the mean and standard
    deviation per row as Python lists.  The fix repeats the rows 50 times
    (``x.repeat(50, 1)``), runs one pass and reshapes it to 50 x 4."""
    torch.manual_seed(0)
    model = TabularRegressor().eval()
    enable_dropout(model)
    rows = torch.randn(256, 32, generator=torch.Generator().manual_seed(12))

    def step(i):
        k = (i * MC_ROWS) % 256
        x = rows[k:k + MC_ROWS]
        with torch.no_grad():
            if variant == "fix":
                samples = model(x.repeat(MC_PASSES, 1)).view(MC_PASSES, MC_ROWS)
            else:
                samples = torch.stack([model(x).squeeze(1) for _ in range(MC_PASSES)])
        mean, std = samples.mean(0), samples.std(0)
        with CLOCK("sync"):
            return mean.tolist(), std.tolist()
    return Loop(step)


# -- compute: an ensemble of five CNNs, one after another ---------------------------------------
def member_cnn() -> nn.Module:
    """One ensemble member: three conv-ReLU-pool blocks (32, 64, 64 channels) and a linear
    head for 32x32 RGB images."""
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 16, 10))


MEMBERS, ENSEMBLE_BATCH = 5, 16


@case("pt_infer_ensemble5_cnn", "pytorch", "inference", 5,
      facts("inference", batch=ENSEMBLE_BATCH), split="holdout", warmup=3,
      fix="the members stacked with torch.func.stack_module_state under vmap",
      tags=["ensemble", "no_dataloader"])
def pt_infer_ensemble5_cnn(variant):
    """Evaluation of a deep ensemble: five independently initialised CNNs (three
    conv-ReLU-pool blocks each) run one after another on each batch of 16 32x32 images
    under ``torch.inference_mode()``, their softmaxes averaged and the predicted classes
    taken with ``argmax``.  The fix is the one the ``torch.func`` ensembling tutorial
    shows: the members' parameters stacked with ``stack_module_state`` and one
    ``vmap``-ed ``functional_call`` over them."""
    torch.manual_seed(0)
    models = [member_cnn().eval() for _ in range(MEMBERS)]
    images = torch.rand(128, 3, 32, 32, generator=torch.Generator().manual_seed(13))
    params, buffers = stack_module_state(models)
    base = member_cnn().to("meta")

    def one(p, b, x):
        return functional_call(base, (p, b), (x,))

    ensemble = torch.func.vmap(one, in_dims=(0, 0, None))
    preds = []

    def step(i):
        k = (i * ENSEMBLE_BATCH) % 128
        x = images[k:k + ENSEMBLE_BATCH]
        with torch.inference_mode():
            if variant == "fix":
                probs = ensemble(params, buffers, x).softmax(-1).mean(0)
            else:
                probs = torch.stack([m(x).softmax(-1) for m in models]).mean(0)
            preds.append(probs.argmax(1))
        return preds[-1]
    return Loop(step)


# -- input: JSON-lines records parsed in an IterableDataset's __iter__ --------------------------
WORDS = ("delivery late refund broken great love quality price cheap support charger screen "
         "battery works fine never again fast shipping box missing item color size return "
         "exchange order account password login app crash update slow phone tablet cable").split()
VOCAB = {w: k + 2 for k, w in enumerate(sorted(set(WORDS)))}
TOKEN_RE = re.compile(r"[a-z']+")
MAX_TOKENS = 64
_JSONL: dict[str, Path] = {}


def reviews_jsonl(n: int = 30000, seed: int = 14) -> Path:
    """A JSON-lines file of product reviews (id, free text of 20 to 60 words, rating,
    price, verified flag, a tag list), written once per process and removed at its exit."""
    if "path" not in _JSONL:
        rng = random.Random(seed)
        folder = tempfile.mkdtemp(prefix="reviews")
        atexit.register(shutil.rmtree, folder, True)
        path = Path(folder) / "reviews.jsonl"
        with path.open("w") as f:
            for k in range(n):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
                rec = {"id": f"r{k:06d}", "text": text.capitalize() + ".",
                       "rating": rng.randint(1, 5), "price": round(rng.uniform(2, 400), 2),
                       "verified": rng.random() < 0.7,
                       "tags": rng.sample(WORDS, rng.randint(0, 4))}
                f.write(json.dumps(rec) + "\n")
        _JSONL["path"] = path
    return _JSONL["path"]


class ReviewStream(IterableDataset):
    """Reviews streamed from a JSON-lines file: each line parsed with ``json.loads``, its
    text lower-cased, tokenised with a regex and looked up in the vocabulary, padded to
    64 ids; with loader workers each keeps every ``num_workers``-th line
    (``get_worker_info``)."""

    def __init__(self, path: Path):
        self.path = path

    def encode(self, rec: dict):
        ids = [VOCAB.get(w, 1) for w in TOKEN_RE.findall(rec["text"].lower())][:MAX_TOKENS]
        ids += [0] * (MAX_TOKENS - len(ids))
        extra = [rec["rating"] / 5.0, rec["price"] / 400.0, float(rec["verified"]),
                 len(rec["tags"]) / 4.0]
        return torch.tensor(ids), torch.tensor(extra)

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        with self.path.open() as f:
            for k, line in enumerate(f):
                if k % nw == wid:
                    yield self.encode(json.loads(line))


class ReviewScorer(nn.Module):
    """Mean of the tokens' embeddings (``nn.EmbeddingBag``, padding ignored) with the
    numeric fields, an MLP to a helpfulness score."""

    def __init__(self, vocab: int = len(VOCAB) + 2, dim: int = 64):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(dim + 4, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, ids, extra):
        return self.mlp(torch.cat([self.emb(ids), extra], 1)).squeeze(1)


@case("pt_infer_jsonl_iterable_nw0", "pytorch", "inference", 6,
      facts("inference", dataloader_workers=0, batch=256), split="tuned", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, tags=["dataloader", "iterable", "jsonl"])
def pt_infer_jsonl_iterable_nw0(variant):
    """A batch scoring job over 30,000 product reviews in a JSON-lines file: an
    ``IterableDataset`` whose ``__iter__`` reads the file line by line, parses each record
    with ``json.loads`` and tokenises its text with a regex and a vocabulary lookup; a
    ``DataLoader(batch_size=256)`` with no workers feeds an ``nn.EmbeddingBag`` scorer
    under ``torch.inference_mode()``, the scores kept per batch, epoch after epoch.  The
    fix runs 2 loader workers, each keeping its share of the lines (``get_worker_info``)."""
    torch.manual_seed(0)
    model = ReviewScorer().eval()
    n = workers(variant)
    loader = DataLoader(ReviewStream(reviews_jsonl()), batch_size=256, num_workers=n,
                        persistent_workers=n > 0)
    batches = epochs(loader)
    scores = []

    def step(i):
        with CLOCK("input"):
            ids, extra = next(batches)
        with torch.inference_mode():
            scores.append(model(ids, extra))
        if len(scores) > 200:
            scores.clear()
        return scores[-1]
    return Loop(step, batches.close)
