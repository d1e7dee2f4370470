"""Held-out PyTorch fine-tuning, compiled and evaluation programs, written without looking
at the advisor's rules: LoRA fine-tuning of a small pretrained transformer classifier with
its base frozen and only the low-rank adapters and the head trained; a tabular residual MLP
under ``torch.compile`` whose forward checks its activations for NaNs with a Python ``if``
(a graph break on every call); a validation pass that scores each batch with scikit-learn's
``roc_auc_score``, ``f1_score`` and ``accuracy_score`` on ``.numpy()`` views of the batch's
labels and probabilities; and a HiFi-GAN-style vocoder served with
``torch.nn.utils.parametrizations.weight_norm`` still on every convolution.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm
from torch.utils.data import DataLoader, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, compiled, facts
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- compute: LoRA adapters on a frozen transformer classifier ---------------------------------
class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update, as LoRA's reference code
    and PEFT write it: ``base(x) + B(A(dropout(x))) * alpha / r``, A Kaiming-initialised,
    B zero."""

    def __init__(self, base: nn.Linear, r: int = 8, alpha: int = 16, dropout: float = 0.05):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        self.drop, self.scaling = nn.Dropout(dropout), alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(self.drop(x))) * self.scaling


class BertLayer(nn.Module):
    """A BERT layer: separate query, key and value projections, scaled dot-product
    attention with the padding masked, post-layer norms, a GELU feed-forward."""

    def __init__(self, width: int, heads: int, ff: int):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(width, width) for _ in range(3))
        self.attn_out, self.ln1 = nn.Linear(width, width), nn.LayerNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, ff), nn.GELU(), nn.Linear(ff, width))
        self.ln2, self.drop = nn.LayerNorm(width), nn.Dropout(0.1)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = (p(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
                   for p in (self.query, self.key, self.value))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        x = self.ln1(x + self.drop(self.attn_out(a.transpose(1, 2).reshape(B, T, C))))
        return self.ln2(x + self.drop(self.ff(x)))


class TextClassifier(nn.Module):
    """A BERT-tiny-sized encoder (a 4,000-word vocabulary, width 128, 2 layers, 4 heads,
    feed-forward 512) and a classification head on the first token."""

    def __init__(self, vocab: int = 4000, width: int = 128, layers: int = 2, classes: int = 4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(128, width)
        self.ln = nn.LayerNorm(width)
        self.layers = nn.ModuleList(BertLayer(width, 4, 4 * width) for _ in range(layers))
        self.head = nn.Linear(width, classes)

    def forward(self, ids, mask):
        x = self.ln(self.tok(ids) + self.pos(torch.arange(ids.size(1))))
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x[:, 0])


def add_lora(model: TextClassifier, r: int = 8) -> list[nn.Parameter]:
    """The base frozen, LoRA on every layer's query and value projections; returns what
    trains: the adapters and the classification head."""
    model.requires_grad_(False)
    for layer in model.layers:
        layer.query, layer.value = LoRALinear(layer.query, r), LoRALinear(layer.value, r)
    model.head.requires_grad_(True)
    return [p for p in model.parameters() if p.requires_grad]


@case("pt_train_lora_frozen_base", "pytorch", "training", 3,
      facts("training", optimizer="adamw", dataloader_workers=0, batch=16), split="holdout",
      warmup=3, tags=["lora", "finetune", "transformer", "frozen"])
def pt_train_lora_frozen_base(variant):
    """LoRA fine-tuning of a small pretrained text classifier (a BERT-tiny-sized encoder:
    width 128, 2 layers, 4 heads) on 4-way topic labels: the base frozen with
    ``requires_grad_(False)``, rank-8 adapters (alpha 16, dropout 0.05) on every layer's
    query and value projections and the classification head trained with AdamW (lr 2e-4)
    on 10 tensors; 2,048 tokenised texts of 32 tokens (padding masked) held in memory, a
    shuffled ``DataLoader`` of batches of 16, no workers.  A well-written loop: nothing
    but the model's forward and backward (through the frozen layers, for the adapters'
    gradients) and the optimizer's step."""
    torch.manual_seed(0)
    model = TextClassifier()
    params = add_lora(model)
    opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.01)
    g = torch.Generator().manual_seed(11)
    lengths = torch.randint(8, 33, (2048,), generator=g)
    mask = torch.arange(32)[None, :] < lengths[:, None]
    ids = torch.randint(5, 4000, (2048, 32), generator=g).masked_fill(~mask, 0)
    labels = torch.randint(0, 4, (2048,), generator=g)
    batches = epochs(DataLoader(TensorDataset(ids, mask, labels), batch_size=16,
                                shuffle=True, drop_last=True))
    model.train()

    def step(i):
        with CLOCK("input"):
            x, m, y = next(batches)
        loss = F.cross_entropy(model(x, m), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)


# -- a compiled model whose forward breaks its graph on every call -----------------------------
class ResidualMLP(nn.Module):
    """A residual MLP for tabular rows (as in "Revisiting Deep Learning Models for Tabular
    Data"): a 48-feature input projected to width 192, 4 blocks of LayerNorm, Linear,
    ReLU, dropout and Linear added back, a LayerNorm and a linear head.  ``nan_guard``
    checks the activations for NaNs before the head with a Python ``if``."""

    def __init__(self, features: int = 48, width: int = 192, blocks: int = 4,
                 classes: int = 3, nan_guard: bool = True):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.ReLU(),
                          nn.Dropout(0.1), nn.Linear(2 * width, width))
            for _ in range(blocks))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)
        self.nan_guard = nan_guard

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        if self.nan_guard and torch.isnan(h).any():
            raise FloatingPointError("NaN in the activations")
        return self.head(F.relu(self.norm(h)))


@case("pt_train_compile_nan_guard_break", "pytorch", "training", 4,
      facts("training", compiled="torch.compile", optimizer="adam", batch=128),
      split="holdout", warmup=4, fix="the NaN check out of the forward: one graph",
      share_from_fix="host_overhead", tags=["torch_compile", "graph_break", "tabular"])
def pt_train_compile_nan_guard_break(variant):
    """A residual MLP for tabular data (48 features, width 192, 4 blocks, 3 classes)
    trained with Adam under ``torch.compile`` on batches of 128 rows sliced from a tensor
    of 16,384 rows held in memory.  The forward ends with ``if torch.isnan(h).any(): raise
    ...``, a guard against diverging training: Dynamo cannot trace a Python branch on a
    tensor's value, so every call runs the compiled graph up to the check, returns to
    Python for the branch, and resumes in a second compiled graph (two graphs forward,
    two backward).  The fix drops the check from the forward (one graph)."""
    torch.manual_seed(0)
    model = ResidualMLP(nan_guard=variant != "fix")
    net = compiled(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(12)
    rows = torch.randn(16384, 48, generator=g)
    labels = torch.randint(0, 3, (16384,), generator=g)

    def step(i):
        k = (128 * i) % 16384
        loss = F.cross_entropy(net(rows[k:k + 128]), labels[k:k + 128])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return Loop(step)


# -- scikit-learn metrics on every validation batch --------------------------------------------
VAL_ROWS, VAL_BATCH = 8192, 256


class ChurnMLP(nn.Module):
    """A churn classifier for 64 customer features: 64-512-512-1 with batch norm and
    ReLUs, one logit."""

    def __init__(self, features: int = 64, hidden: int = 512):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.BatchNorm1d(hidden),
                                 nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(1)


@case("pt_infer_sklearn_metrics_per_batch", "pytorch", "inference", 4,
      facts("inference", dataloader_workers=0, batch=VAL_BATCH), split="holdout", warmup=3,
      fix="labels and probabilities gathered over the pass, the metrics once at its end",
      share_from_fix="host_overhead", tags=["eval", "sklearn", "metrics", "numpy"])
def pt_infer_sklearn_metrics_per_batch(variant):
    """A validation pass of a churn classifier (a 64-512-512-1 MLP with batch norm, in
    ``eval()`` under ``torch.no_grad()``) over 8,192 held-out customers, a
    ``DataLoader`` of batches of 256 with no workers: each batch's probabilities
    (``sigmoid``) and labels go to scikit-learn as ``.numpy()`` views, and
    ``roc_auc_score``, ``f1_score`` and ``accuracy_score`` are computed per batch and
    averaged at the end of the pass.  The fix gathers the pass's probabilities and labels
    (``torch.cat``) and computes the three metrics once, at the end of the pass."""
    torch.manual_seed(0)
    model = ChurnMLP().eval()
    g = torch.Generator().manual_seed(13)
    x = torch.randn(VAL_ROWS, 64, generator=g)
    y = (x[:, :8].sum(1) + torch.randn(VAL_ROWS, generator=g) > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=VAL_BATCH)
    batches = epochs(loader)
    per_pass = VAL_ROWS // VAL_BATCH
    seen, scores, probs, targets = [0], [], [], []

    def step(i):
        with CLOCK("input"):
            xb, yb = next(batches)
        with torch.no_grad():
            p = torch.sigmoid(model(xb))
        if variant == "fix":
            probs.append(p)
            targets.append(yb)
        else:
            y_np, p_np = yb.numpy(), p.numpy()
            scores.append((roc_auc_score(y_np, p_np), f1_score(y_np, p_np > 0.5),
                           accuracy_score(y_np, p_np > 0.5)))
        seen[0] += 1
        if seen[0] % per_pass == 0:
            with CLOCK("periodic"):
                if variant == "fix":
                    y_np, p_np = torch.cat(targets).numpy(), torch.cat(probs).numpy()
                    result = (roc_auc_score(y_np, p_np), f1_score(y_np, p_np > 0.5),
                              accuracy_score(y_np, p_np > 0.5))
                    probs.clear()
                    targets.clear()
                else:
                    result = tuple(np.mean(scores, axis=0))
                    scores.clear()
            return result
        return p
    return Loop(step, batches.close)


# -- a vocoder served with its weight norm still on --------------------------------------------
def wn_conv(cin: int, cout: int, k: int, dilation: int = 1) -> nn.Conv1d:
    return weight_norm(nn.Conv1d(cin, cout, k, dilation=dilation,
                                 padding=dilation * (k - 1) // 2))


class ResBlock(nn.Module):
    """HiFi-GAN's ResBlock1: three pairs of dilated (1, 3, 5) and plain convolutions with
    leaky ReLUs, each pair added back."""

    def __init__(self, ch: int, k: int = 3, dilations=(1, 3, 5)):
        super().__init__()
        self.convs1 = nn.ModuleList(wn_conv(ch, ch, k, d) for d in dilations)
        self.convs2 = nn.ModuleList(wn_conv(ch, ch, k) for _ in dilations)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, 0.1)), 0.1))
        return x


class Vocoder(nn.Module):
    """A HiFi-GAN V3-like generator scaled down: an 80-band mel spectrogram to a waveform,
    ``conv_pre`` to 128 channels, three transposed-convolution upsamplings (8, 8, 4)
    halving the channels, each followed by two residual blocks (kernels 3 and 7) averaged,
    ``conv_post`` and ``tanh``; every convolution under ``weight_norm``."""

    def __init__(self, mels: int = 80, ch: int = 128, rates=(8, 8, 4)):
        super().__init__()
        self.conv_pre = wn_conv(mels, ch, 7)
        self.ups, self.resblocks = nn.ModuleList(), nn.ModuleList()
        for r in rates:
            self.ups.append(weight_norm(nn.ConvTranspose1d(ch, ch // 2, 2 * r, r,
                                                           padding=r // 2)))
            ch //= 2
            self.resblocks.append(nn.ModuleList([ResBlock(ch, 3), ResBlock(ch, 7)]))
        self.conv_post = wn_conv(ch, 1, 7)

    def forward(self, mel):
        x = self.conv_pre(mel)
        for up, blocks in zip(self.ups, self.resblocks):
            x = up(F.leaky_relu(x, 0.1))
            x = sum(b(x) for b in blocks) / len(blocks)
        return torch.tanh(self.conv_post(F.leaky_relu(x)))

    def remove_weight_norm(self):
        for m in self.modules():
            if parametrize.is_parametrized(m, "weight"):
                parametrize.remove_parametrizations(m, "weight")


@case("pt_infer_vocoder_weight_norm_kept", "pytorch", "inference", 3,
      facts("inference", batch=1), split="holdout", warmup=2,
      fix="remove_parametrizations on every convolution before serving",
      share_from_fix="host_overhead", tags=["audio", "vocoder", "weight_norm", "conv1d"])
def pt_infer_vocoder_weight_norm_kept(variant):
    """A text-to-speech server's vocoder: a HiFi-GAN-style generator (3 upsamplings to
    256 samples per frame, two residual blocks each, 41 convolutions) built with
    ``torch.nn.utils.parametrizations.weight_norm`` on every convolution as it was
    trained, loaded and run in ``eval()`` under ``torch.inference_mode()`` on one
    request's 24-frame mel spectrogram a step (6,144 samples).  Every forward recomputes
    each convolution's weight from its ``original0`` and ``original1`` through the
    parametrization.  The fix removes the weight norm (``remove_parametrizations``, as
    HiFi-GAN's ``remove_weight_norm()`` does) after loading."""
    torch.manual_seed(0)
    model = Vocoder().eval()
    if variant == "fix":
        model.remove_weight_norm()
    mels = torch.randn(16, 1, 80, 24, generator=torch.Generator().manual_seed(14))

    def step(i):
        with torch.inference_mode():
            return model(mels[i % 16])
    return Loop(step)
