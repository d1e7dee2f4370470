"""PyTorch cases of the diagnosis corpus (CPU ``torch.profiler`` captures).

Each case is an ordinary small training or inference loop with a known bound; see
``benchmarks/corpus/run_torch.py`` for how they are captured and measured.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gen_advice_runs import Augmented  # noqa: E402
from gen_torch_loops import evaluate, loader, mlp, train_step  # noqa: E402

from corpus.common import CLOCK, case  # noqa: E402

F = torch.nn.functional
PT = {"framework": "pytorch", "device": "cpu"}


def facts(mode: str, **kw) -> dict:
    return {**PT, "mode": mode, **kw}


class Loop:
    """A step callable that can release what it holds (its loader's workers)."""

    def __init__(self, fn, close=None):
        self.fn, self.close_fn = fn, close

    def __call__(self, i):
        return self.fn(i)

    def close(self):
        if self.close_fn:
            self.close_fn()


def _close_loader(it):
    shutdown = getattr(it, "_shutdown_workers", None)
    return shutdown


def sgd_loop(model, batches, opt=None):
    """Fetch a batch (phase ``input``) then one optimizer step (compute)."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(batches)

    def step(i):
        with CLOCK("input"):
            x, y = next(it)
        train_step(model, opt, x, y)
    return Loop(step, _close_loader(it))


def aug_model():
    return torch.nn.Sequential(torch.nn.Linear(3 * 24 * 24, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 1))


#: The fix of a single-process loader and its other setting, measured beside it: the
#: advisor plans one or two workers on two cores, the truth has both.
LOADER_FIX, LOADER_VARIANTS = "num_workers=2", ("num_workers=1",)


def workers(variant: str) -> int:
    """DataLoader workers of a loader case's variant: none in the run, the fix's or the
    variant's ``num_workers=N``."""
    setting = LOADER_FIX if variant == "fix" else variant
    return int(setting.split("=")[1]) if setting.startswith("num_workers=") else 0


def aug_loader(workers, n=64 * 200, batch=64, prefetch=2):
    return DataLoader(Augmented(n), batch_size=batch, num_workers=workers,
                      persistent_workers=False, prefetch_factor=prefetch if workers else None)


# -- input-bound -------------------------------------------------------------------------------
@case("pt_train_input_nw0", "pytorch", "training", 12,
      facts("training", dataloader_workers=0, optimizer="sgd"), fix=LOADER_FIX,
      variants=LOADER_VARIANTS, tags=["dataloader"])
def pt_train_input_nw0(variant):
    """Training on per-sample numpy augmentation in the main process (DataLoader
    num_workers=0): every step waits for its batch to be made."""
    torch.manual_seed(0)
    return sgd_loop(aug_model(), aug_loader(workers(variant)))


class SlowSamples(Dataset):
    """Samples that take ``ms`` of Python work each (a decoder, a tokenizer)."""

    def __init__(self, n, ms, dim=256):
        self.n, self.ms, self.dim = n, ms, dim

    def __len__(self):
        return self.n

    def __getitem__(self, k):
        rng = np.random.default_rng(k)
        a = rng.standard_normal(self.dim).astype(np.float32)
        reps = max(1, int(self.ms * 6))
        for _ in range(reps):  # ~0.17 ms of numpy per repetition
            a = np.sort(a) * 0.999 + rng.standard_normal(self.dim).astype(np.float32) * 1e-3
        return torch.from_numpy(a), torch.tensor([float(a[0])])


@case("pt_train_input_nw2_alternate", "pytorch", "training", 16,
      facts("training", dataloader_workers=2, optimizer="sgd"),
      tags=["dataloader", "alternating"])
def pt_train_input_nw2_alternate(variant):
    """Two DataLoader workers, each slower than the step: they hand over batches in turn,
    so steps alternate long and short; the run is input-bound."""
    torch.manual_seed(0)
    dl = DataLoader(SlowSamples(32 * 400, 2.5), batch_size=32, num_workers=2,
                    prefetch_factor=1)
    return sgd_loop(mlp(), dl)


@case("pt_train_input_nw1_starved", "pytorch", "training", 12,
      facts("training", dataloader_workers=1, optimizer="adam"), split="holdout",
      tags=["dataloader", "starved"])
def pt_train_input_nw1_starved(variant):
    """One DataLoader worker that makes batches far slower than the step consumes them:
    the loader queue is always empty (starved)."""
    torch.manual_seed(0)
    model = mlp()
    dl = DataLoader(SlowSamples(32 * 400, 5.0), batch_size=32, num_workers=1)
    return sgd_loop(model, dl, torch.optim.Adam(model.parameters(), lr=1e-3))


@case("pt_infer_dataloader_nw0", "pytorch", "inference", 12,
      facts("inference", dataloader_workers=0), fix=LOADER_FIX,
      variants=LOADER_VARIANTS, tags=["dataloader"])
def pt_infer_dataloader_nw0(variant):
    """Batch inference over a DataLoader with per-sample numpy augmentation and no
    workers."""
    torch.manual_seed(0)
    model = aug_model().eval()
    it = iter(aug_loader(workers(variant)))

    def step(i):
        with CLOCK("input"):
            x, _ = next(it)
        with torch.no_grad():
            model(x).argmax(1)
    return Loop(step, _close_loader(it))


# -- compute-bound -----------------------------------------------------------------------------
def small_cnn(width=32):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(width, 2 * width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(32 * width, 10))


def image_batches(n, batch, size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n * batch, 3, size, size, generator=g)
    y = torch.randint(0, 10, (n * batch,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch)


def ce_step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


@case("pt_train_compute_cnn", "pytorch", "training", 10,
      facts("training", dataloader_workers=0, optimizer="sgd"), tags=["dataloader"])
def pt_train_compute_cnn(variant):
    """A small CNN trained on in-memory tensors through a DataLoader (num_workers=0): the
    batches cost nothing, the convolutions are the step."""
    torch.manual_seed(0)
    model = small_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    it = iter(image_batches(40, 32))

    def step(i):
        with CLOCK("input"):
            x, y = next(it)
        ce_step(model, opt, x, y)
    return Loop(step)


@case("pt_train_grad_accum", "pytorch", "training", 8,
      facts("training", dataloader_workers=0, optimizer="sgd"),
      tags=["grad_accum"])
def pt_train_grad_accum(variant):
    """Gradient accumulation: 4 micro-batches (fetch, forward, backward) per optimizer
    step, compute-bound."""
    torch.manual_seed(0)
    model = mlp(2048)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(loader(4 * 40))

    def step(i):
        for _ in range(4):
            with CLOCK("input"):
                x, y = next(it)
            (F.mse_loss(model(x), y) / 4).backward()
        opt.step()
        opt.zero_grad()
    return Loop(step)


@case("pt_train_periodic_eval", "pytorch", "training", 15,
      facts("training", dataloader_workers=0, optimizer="adam"),
      tags=["periodic_eval"])
def pt_train_periodic_eval(variant):
    """Training with a 6-batch validation pass after every 5th step."""
    torch.manual_seed(0)
    model = mlp(2048)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it, val = iter(loader(60)), loader(6)

    def step(i):
        with CLOCK("input"):
            x, y = next(it)
        train_step(model, opt, x, y)
        if i % 5 == 4:
            with CLOCK("periodic"):
                evaluate(model, val)
    return Loop(step)


@case("pt_train_checkpoint", "pytorch", "training", 12,
      facts("training", optimizer="adam"), split="holdout", tags=["checkpoint"])
def pt_train_checkpoint(variant):
    """Training that saves model and optimizer state with ``torch.save`` every 4th
    step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(mlp(2048), torch.nn.Linear(1, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    folder = tempfile.mkdtemp(prefix="corpus-ckpt-")

    def step(i):
        x, y = torch.randn(64, 256), torch.randn(64, 1)
        train_step(model, opt, x, y)
        if i % 4 == 3:
            with CLOCK("periodic"):
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                           Path(folder) / "ckpt.pt")
    return Loop(step)


@case("pt_train_autocast_bf16", "pytorch", "training", 10,
      facts("training", precision="bf16", optimizer="sgd"), fix="autocast off (fp32)",
      tags=["amp"])
def pt_train_autocast_bf16(variant):
    """CPU ``torch.autocast(device_type="cpu", dtype=torch.bfloat16)`` training of an
    MLP: compute-bound, the matmuls run in bf16. The change measured is autocast off
    (fp32): faster on a CPU without bf16 instructions, slower on one with them
    (avx512_bf16, AMX)."""
    torch.manual_seed(0)
    model = bf16_mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step(i):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=variant != "fix"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return Loop(step)


def bf16_mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


@case("pt_infer_bf16", "pytorch", "inference", 12,
      facts("inference", precision="bf16"), tags=["amp"])
def pt_infer_bf16(variant):
    """MLP inference under CPU bf16 autocast (``torch.inference_mode``), no DataLoader:
    compute-bound."""
    torch.manual_seed(0)
    model = bf16_mlp().eval()
    x = torch.randn(128, 256)

    def step(i):
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            model(x).softmax(1)
    return Loop(step)


class Module:
    """Lightning-style hooks around a plain torch model (no Lightning installed)."""

    def __init__(self):
        self.net = small_cnn(24)
        self.logged = []

    def configure_optimizers(self):
        return torch.optim.SGD(self.net.parameters(), lr=0.01, momentum=0.9)

    def on_train_batch_start(self, batch, i):
        self.net.train()

    def training_step(self, batch, i):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def log(self, name, value):
        self.logged.append((name, float(value.detach())))

    def on_train_batch_end(self, loss, i):
        self.log("train_loss", loss)


@case("pt_train_lightning_hooks", "pytorch", "training", 12,
      facts("training", dataloader_workers=0, optimizer="sgd"), split="holdout",
      tags=["lightning_hooks"])
def pt_train_lightning_hooks(variant):
    """A Lightning-style loop (hooks, ``training_step``, ``log`` reading the loss each
    step) in plain torch: compute-bound CNN training."""
    torch.manual_seed(0)
    mod = Module()
    opt = mod.configure_optimizers()
    it = iter(image_batches(40, 32, seed=1))

    def step(i):
        with CLOCK("input"):
            batch = next(it)
        mod.on_train_batch_start(batch, i)
        loss = mod.training_step(batch, i)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mod.on_train_batch_end(loss, i)
    return Loop(step)


@case("pt_train_variable_length", "pytorch", "training", 14,
      facts("training", optimizer="adamw"), share_from_fix="host_overhead",
      share_variant="fused", also=("foreach",), tags=["variable_length"])
def pt_train_variable_length(variant):
    """A transformer encoder layer trained on batches of 16 sequences of 16..160 tokens
    (a new length every step): compute-bound with uneven steps. AdamW's default on a CPU
    runs a few ops per parameter tensor; what ``AdamW(fused=True)`` saves is the share of
    that per-tensor overhead (``AdamW(foreach=True)`` is measured beside it)."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
    head = torch.nn.Linear(128, 1)
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}}.get(variant, {})
    opt = torch.optim.AdamW([*layer.parameters(), *head.parameters()], lr=1e-3, **impl)
    lengths = torch.randint(16, 161, (64,), generator=torch.Generator().manual_seed(3))

    def step(i):
        x = torch.randn(16, int(lengths[i % 64]), 128)
        loss = head(layer(x)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return Loop(step)


@case("pt_train_adamw_foreach", "pytorch", "training", 12,
      facts("training", optimizer="adamw_foreach"), tags=["foreach"])
def pt_train_adamw_foreach(variant):
    """A 12-layer MLP trained with ``AdamW(foreach=True)``; the training loop reads the
    loss once per step. Compute-bound."""
    torch.manual_seed(0)
    layers = []
    for _ in range(12):
        layers += [torch.nn.Linear(256, 256), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(256, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(32, 256), torch.randn(32, 1)

    def step(i):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()
    return Loop(step)


@case("pt_infer_no_dataloader", "pytorch", "inference", 12, facts("inference"),
      tags=["no_dataloader"])
def pt_infer_no_dataloader(variant):
    """Inference of an MLP on tensors made in the loop (no DataLoader): compute-bound."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 512)).eval()

    def step(i):
        x = torch.randn(64, 512)
        with torch.no_grad():
            model(x).relu().sum(1)
    return Loop(step)


# -- start-up ----------------------------------------------------------------------------------
def compiled(model):
    torch._dynamo.reset()
    return torch.compile(model, backend="aot_eager")


@case("pt_train_compile_startup", "pytorch", "training", 8,
      facts("training", compiled="torch.compile", optimizer="sgd"),
      startup_in_window=True, warmup=2, tags=["torch_compile", "warmup"])
def pt_train_compile_startup(variant):
    """``torch.compile`` (aot_eager backend: graph capture and AOT autograd, no C++
    build) of an MLP, captured from its first step: compilation dominates the window."""
    torch.manual_seed(0)
    model = mlp(512)
    fwd = compiled(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(i):
        x, y = torch.randn(64, 256), torch.randn(64, 1)
        F.mse_loss(fwd(x), y).backward()
        opt.step()
        opt.zero_grad()
    return Loop(step)


@case("pt_infer_compile_startup", "pytorch", "inference", 10,
      facts("inference", compiled="torch.compile"), split="holdout",
      startup_in_window=True, warmup=2, tags=["torch_compile", "warmup"])
def pt_infer_compile_startup(variant):
    """Compiled CNN inference captured cold: the first calls trace and compile."""
    torch.manual_seed(0)
    model = compiled(small_cnn().eval())
    x = torch.randn(8, 3, 32, 32)

    def step(i):
        with torch.no_grad():
            model(x).argmax(1)
    return Loop(step)


# -- host sync / read-back ---------------------------------------------------------------------
@case("pt_train_item_sync", "pytorch", "training", 6,
      facts("training", optimizer="sgd"), fix="vectorised metric (one .item() per step)",
      tags=["item"])
def pt_train_item_sync(variant):
    """A per-sample accuracy metric in Python: 1536 ``.item()`` reads per step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(1536, 32), torch.randn(1536, 1)

    def step(i):
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        with CLOCK("sync"):
            det = out.detach()
            if variant == "fix":
                hits = int((det[:, 0] > 0).sum().item())
            else:
                hits = sum(det[k, 0].item() > 0 for k in range(1536))
        return hits
    return Loop(step)


@case("pt_infer_readback", "pytorch", "inference", 12, facts("inference"),
      split="holdout", fix="one .tolist() of the whole batch", tags=["readback"])
def pt_infer_readback(variant):
    """Inference whose post-processing reads each result row back with ``.tolist()`` and
    ``.item()`` in a Python loop."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8)).eval()
    x = torch.randn(512, 128)

    def step(i):
        with torch.no_grad():
            out = model(x).softmax(1)
        with CLOCK("sync"):
            if variant == "fix":
                rows = out.tolist()
                best = [max(r) for r in rows]
            else:
                best = [out[k].max().item() for k in range(out.shape[0])]
        return best
    return Loop(step)


# -- per-op overhead ---------------------------------------------------------------------------
def tiny_convnet(w=8):
    """A small conv net with batch norm for 16x16 images: a few ms of work per image."""
    conv = torch.nn.Conv2d
    return torch.nn.Sequential(
        conv(3, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
        conv(w, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), conv(w, 2 * w, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * w, 10))


@case("pt_infer_batch1_convnet", "pytorch", "inference", 50, facts("inference", batch=1),
      fix="batch the 50 images (one call of batch 50)", share_from_fix="host_overhead",
      per_item=1, fix_per_item=50, tags=["batch1", "no_dataloader"])
def pt_infer_batch1_convnet(variant):
    """Batch-1 inference of a small conv net: 50 requests, one image each; per-op
    framework overhead dominates (batching the same images is the fix)."""
    torch.manual_seed(0)
    model = tiny_convnet().eval()
    n = 50 if variant == "fix" else 1
    images = torch.randn(64, 3, 16, 16)

    def step(i):
        with torch.inference_mode():
            model(images[:n] if n > 1 else images[i % 64:i % 64 + 1]).argmax(1)
    return Loop(step)


@case("pt_infer_batched_convnet", "pytorch", "inference", 8, facts("inference", batch=50),
      tags=["no_dataloader"])
def pt_infer_batched_convnet(variant):
    """The batched counterpart: the same conv net on batches of 50 images, compute-bound."""
    torch.manual_seed(0)
    model = tiny_convnet().eval()
    images = torch.randn(50, 3, 16, 16)

    def step(i):
        with torch.inference_mode():
            model(images).argmax(1)
    return Loop(step)


@case("pt_train_tiny_ops", "pytorch", "training", 4, facts("training", optimizer="sgd"),
      fix="one batched matmul (torch.bmm)", share_from_fix="host_overhead",
      tags=["tiny_ops"])
def pt_train_tiny_ops(variant):
    """A mixture of 400 tiny experts applied one by one in Python (400 small matmuls
    forward and backward): per-op overhead; one bmm is the fix."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(400, 16, 16) * 0.1)
    opt = torch.optim.SGD([w], lr=0.01)
    x = torch.randn(400, 8, 16)

    def step(i):
        if variant == "fix":
            out = torch.bmm(x, w)
        else:
            out = torch.stack([x[k] @ w[k] for k in range(400)])
        out.pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    return Loop(step)


# -- memory-bound copies -----------------------------------------------------------------------
@case("pt_train_memcopy", "pytorch", "training", 10, facts("training", optimizer="sgd"),
      fix="keep the channels-last batch (no permute/contiguous/clone copies)",
      tags=["copies"])
def pt_train_memcopy(variant):
    """Each step re-lays out an 8 MB feature buffer (permute + contiguous, clone, cat)
    before a light model reads a slice of it: memory-bound copies."""
    torch.manual_seed(0)
    feats = torch.randn(32, 256, 256)
    model = torch.nn.Linear(256, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(i):
        with CLOCK("copy"):
            t = None
            if variant == "fix":
                x = feats[:, :8]
            else:
                t = feats.permute(0, 2, 1).contiguous()
                t = torch.cat([t, t.clone()], 1)
                x = t[:, :8]
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        with CLOCK("copy"):  # the copies' buffers are freed here: their cost too
            del t, x
    return Loop(step)
