"""Held-out PyTorch generation and search inference programs, written without looking at
the advisor's rules: a tiny character GPT sampling tokens as nanoGPT's ``generate`` does,
the whole prefix run through the model again for every new token; a DDPM sampler that
denoises each image of a request on its own, 50 calls of a small convolutional denoiser at
batch 1; a nearest-neighbour service that answers its queries one at a time with
``torch.cdist`` against an embedding bank and ``topk``; and a sentence-embedding job whose
``collate_fn`` runs a WordPiece tokeniser written in Python (BERT's basic tokeniser and
greedy longest-match-first word pieces) before a small transformer encoder.
"""

from __future__ import annotations

import math
import random
import unicodedata

import torch
from torch.utils.data import DataLoader

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- a tiny GPT sampling without a KV cache ----------------------------------------------------
class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one linear for q, k and v, ``scaled_dot_product_attention``;
    with ``past`` (the layer's keys and values so far) it attends the new positions to
    them and hands back the grown cache."""

    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x, past=None):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in (q, k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y), (k, v)


class GPTBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x, past=None):
        a, kv = self.attn(self.ln_1(x), past)
        x = x + a
        return x + self.mlp(self.ln_2(x)), kv


class TinyGPT(nn.Module):
    """nanoGPT's ``shakespeare_char`` model scaled down: 65 characters, 3 layers of width
    64, 4 heads, a context of 128; at inference the head runs on the last position only."""

    def __init__(self, vocab: int = 65, block_size: int = 128, n_layer: int = 3,
                 n_embd: int = 64, n_head: int = 4):
        super().__init__()
        self.block_size = block_size
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList(GPTBlock(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx, start: int = 0, past=None):
        pos = torch.arange(start, start + idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        cache = []
        for k, block in enumerate(self.h):
            x, kv = block(x, None if past is None else past[k])
            cache.append(kv)
        return self.lm_head(self.ln_f(x[:, [-1], :])), cache


def sample_next(logits, temperature: float, top_k: int, gen: torch.Generator):
    """nanoGPT's sampling: the last position's logits over the temperature, all but the
    top k set to -inf, softmax, ``torch.multinomial``."""
    logits = logits[:, -1, :] / temperature
    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
    logits[logits < v[:, [-1]]] = -float("Inf")
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1, generator=gen)


PROMPT, NEW_TOKENS, PROMPTS_BATCHED = 96, 8, 8


@case("pt_infer_gpt_no_kv_cache", "pytorch", "inference", 3, facts("inference", batch=1),
      split="tuned", warmup=2, fix="a KV cache: the prompt once, then one position a token",
      share_from_fix="host_overhead", share_variant="batched",
      share_per_item=PROMPTS_BATCHED,
      tags=["generation", "transformer", "decode", "batch1"])
def pt_infer_gpt_no_kv_cache(variant):
    """Sampling from a tiny character-level GPT (nanoGPT's ``shakespeare_char`` model
    scaled to 3 layers of width 64) as nanoGPT's ``generate`` does it: each step answers
    one request, a 96-character prompt continued by 8 characters (temperature 0.8, top-k
    20, ``torch.multinomial``), and every new character runs the whole sequence so far
    through the model again (96 to 103 positions) under ``torch.no_grad()``.  The fix
    keeps each layer's keys and values: the prompt runs once, then one position a
    character.  The per-op overhead's share is measured against the same generation
    without a cache for 8 prompts as one batch (``batched``, per prompt): the same work,
    each op dispatched once for 8 prompts."""
    torch.manual_seed(0)
    model = TinyGPT().eval()
    prompts = torch.randint(0, 65, (16, PROMPT), generator=torch.Generator().manual_seed(3))
    gen = torch.Generator().manual_seed(4)

    def step(i):
        n = PROMPTS_BATCHED if variant == "batched" else 1
        idx = prompts[(n * i) % 16:(n * i) % 16 + n]
        with torch.no_grad():
            if variant == "fix":
                logits, past = model(idx)
                for t in range(NEW_TOKENS):
                    idx_next = sample_next(logits, 0.8, 20, gen)
                    idx = torch.cat((idx, idx_next), dim=1)
                    if t < NEW_TOKENS - 1:
                        logits, past = model(idx_next, idx.size(1) - 1, past)
                return idx
            for _ in range(NEW_TOKENS):
                idx_cond = idx if idx.size(1) <= model.block_size else idx[:, -model.block_size:]
                logits, _ = model(idx_cond)
                idx = torch.cat((idx, sample_next(logits, 0.8, 20, gen)), dim=1)
        return idx
    return Loop(step)


# -- a DDPM sampler, each image of a request denoised on its own -------------------------------
class MLPDenoiser(nn.Module):
    """The noise predictor of a small DDPM for 8x8 digits: the flattened image through a
    64-512-512-64 MLP with SiLUs, a learned embedding of the diffusion step added after
    the first layer."""

    def __init__(self, pixels: int = 64, hidden: int = 512, train_steps: int = 1000):
        super().__init__()
        self.inp, self.temb = nn.Linear(pixels, hidden), nn.Embedding(train_steps, hidden)
        self.net = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, pixels))

    def forward(self, x, t):
        return self.net(self.inp(x) + self.temb(t))


class DDPMSchedule:
    """A linear beta schedule over 1,000 training steps, sampled on 50 evenly spaced ones
    (the betas respaced as ``diffusers``' DDPM scheduler does for fewer inference steps)."""

    def __init__(self, train_steps: int = 1000, steps: int = 50):
        betas = torch.linspace(1e-4, 0.02, train_steps, dtype=torch.float64)
        abar = torch.cumprod(1 - betas, 0)
        self.timesteps = list(range(train_steps - 1, -1, -train_steps // steps))
        prev = self.timesteps[1:] + [-1]
        self.coefs = []
        for t, p in zip(self.timesteps, prev):
            a_t, a_p = float(abar[t]), float(abar[p]) if p >= 0 else 1.0
            beta = 1 - a_t / a_p
            sigma = math.sqrt(beta * (1 - a_p) / (1 - a_t)) if p >= 0 else 0.0
            self.coefs.append((1 / math.sqrt(1 - beta), beta / math.sqrt(1 - a_t), sigma))


def ddpm_sample(model, sched: DDPMSchedule, n: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` images denoised together from pure noise over the schedule's 50 steps: the
    model's noise prediction, the DDPM posterior mean, fresh noise but at the last step."""
    x = torch.randn(n, 64, generator=gen)
    for t, (inv_sqrt_alpha, eps_coef, sigma) in zip(sched.timesteps, sched.coefs):
        eps = model(x, torch.full((n,), t, dtype=torch.long))
        x = inv_sqrt_alpha * (x - eps_coef * eps)
        if sigma > 0:
            x = x + sigma * torch.randn(x.shape, generator=gen)
    return x.clamp(-1, 1)


DIFFUSION_REQUEST = 4


@case("pt_infer_ddpm_per_image", "pytorch", "inference", 3, facts("inference", batch=1),
      split="holdout", warmup=2,
      fix=f"the {DIFFUSION_REQUEST} images of a request sampled as one batch",
      share_from_fix="host_overhead", per_item=1, fix_per_item=DIFFUSION_REQUEST,
      tags=["diffusion", "sampler", "batch1", "python_loop"])
def pt_infer_ddpm_per_image(variant):
    """A digit generator serving requests of 4 images with a DDPM sampler: a small MLP
    noise predictor (64-512-512-64, SiLU, a learned step embedding) in ``eval()`` under
    ``torch.inference_mode()`` denoises one flattened 8x8 image at a time, 50 sampling
    steps of a 1,000-step linear schedule, each a model call at batch 1 and the posterior
    update with fresh noise: a step of the loop is one image.  The fix samples the
    request's 4 images as one batch (one step of the fix is a whole request)."""
    torch.manual_seed(0)
    model, sched = MLPDenoiser().eval(), DDPMSchedule()
    gen = torch.Generator().manual_seed(5)

    def step(i):
        with torch.inference_mode():
            n = DIFFUSION_REQUEST if variant == "fix" else 1
            return ddpm_sample(model, sched, n, gen)
    return Loop(step)


# -- nearest neighbours, one query at a time through torch.cdist -------------------------------
KNN_QUERIES, KNN_K = 64, 10


@case("pt_infer_knn_cdist_per_query", "pytorch", "inference", 3, facts("inference"),
      split="tuned", warmup=2, fix=f"the {KNN_QUERIES} queries as one matrix: one cdist, "
      "one topk, one .tolist()", share_from_fix="host_overhead",
      tags=["knn", "search", "cdist", "python_loop"])
def pt_infer_knn_cdist_per_query(variant):
    """A nearest-neighbour lookup service over a bank of 4,096 image embeddings (128
    dimensions, float32): each step answers 64 queries one at a time, as a per-request
    handler written for one query does, ``torch.cdist(q.unsqueeze(0), bank)``, the 10
    nearest with ``topk(largest=False)`` and their indices and distances read with
    ``.tolist()`` into labels of the bank's items.  The fix answers the 64 queries as one
    matrix: one ``cdist``, one ``topk``, one ``.tolist()`` each of indices and
    distances."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(8)
    bank = torch.randn(4096, 128, generator=g)
    labels = [f"item-{k:04d}" for k in range(4096)]
    queries = torch.randn(1024, 128, generator=g)

    def step(i):
        qs = queries[(KNN_QUERIES * i) % 1024:(KNN_QUERIES * i) % 1024 + KNN_QUERIES]
        with torch.no_grad():
            if variant == "fix":
                dist, idx = torch.cdist(qs, bank).topk(KNN_K, dim=1, largest=False)
                with CLOCK("sync"):
                    rows, dists = idx.tolist(), dist.tolist()
                return [[(labels[j], d) for j, d in zip(r, ds)] for r, ds in zip(rows, dists)]
            answers = []
            for q in qs:
                dist, idx = torch.cdist(q.unsqueeze(0), bank).topk(KNN_K, largest=False)
                with CLOCK("sync"):
                    row, ds = idx[0].tolist(), dist[0].tolist()
                answers.append([(labels[j], d) for j, d in zip(row, ds)])
        return answers
    return Loop(step)


# -- sentence embeddings behind a WordPiece tokeniser written in Python ------------------------
def is_punctuation(ch: str) -> bool:
    """BERT's ``_is_punctuation``: ASCII symbols and Unicode's P* categories."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp: int) -> bool:
    """BERT's ``_is_chinese_char``: the CJK Unified Ideographs blocks."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F
            or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


class WordPieceTokenizer:
    """BERT's slow tokeniser in Python: clean-up, CJK characters spaced apart, lower case,
    accents stripped (NFD),
    split on white space and on every punctuation character, then each word cut into the
    longest vocabulary pieces from its start (``##`` marks a piece inside a word)."""

    def __init__(self, vocab: list[str], max_chars: int = 100):
        self.vocab = {w: k for k, w in enumerate(vocab)}
        self.unk, self.max_chars = self.vocab["[UNK]"], max_chars

    def basic(self, text: str) -> list[str]:
        text = "".join(" " if ch.isspace() else ch for ch in text
                       if ord(ch) not in (0, 0xFFFD) and unicodedata.category(ch) != "Cc")
        text = "".join(f" {ch} " if is_cjk(ord(ch)) else ch for ch in text)
        words = []
        for token in text.strip().split():
            token = unicodedata.normalize("NFD", token.lower())
            token = "".join(ch for ch in token if unicodedata.category(ch) != "Mn")
            current = []
            for ch in token:
                if is_punctuation(ch):
                    if current:
                        words.append("".join(current))
                    words.append(ch)
                    current = []
                else:
                    current.append(ch)
            if current:
                words.append("".join(current))
        return words

    def wordpiece(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end, piece = len(word), None
            while start < end:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab:
                    piece = self.vocab[sub]
                    break
                end -= 1
            if piece is None:
                return [self.unk]
            ids.append(piece)
            start = end
        return ids

    def encode(self, text: str) -> list[int]:
        ids = [self.vocab["[CLS]"]]
        for word in self.basic(text):
            ids.extend(self.wordpiece(word))
        return ids[:127] + [self.vocab["[SEP]"]]


def corpus_text(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Support tickets of 20 to 45 words made of syllables (some words accented or
    capitalised, commas and full stops), and a vocabulary of their syllables, the
    syllables' ``##`` pieces, the letters and the words that occur most."""
    rng = random.Random(seed)
    syll = ["ka", "lo", "mi", "ne", "ta", "ro", "su", "vi", "de", "pa", "qui", "zen", "or",
            "an", "el", "is", "um", "ber", "cal", "dor", "fen", "gri", "hul", "jas"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    texts = []
    for _ in range(n):
        out = []
        for _ in range(rng.randint(20, 45)):
            w = rng.choice(words)
            if rng.random() < 0.05:
                w = w.replace("e", "\u00e9", 1)
            if rng.random() < 0.1:
                w = w.capitalize()
            out.append(w + (rng.choice([",", ".", "?"]) if rng.random() < 0.12 else ""))
        texts.append(" ".join(out))
    letters = sorted(set("abcdefghijklmnopqrstuvwxyz,.?"))
    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + letters + ["##" + c for c in letters]
             + syll + ["##" + s for s in syll] + sorted(set(words))[:1500])
    return texts, vocab


class SentenceEncoder(nn.Module):
    """A MiniLM-like encoder scaled down: token and position embeddings of width 32, two
    transformer encoder layers (4 heads, feed-forward 64) with the padding masked, mean
    pooling over the real tokens and L2 normalisation."""

    def __init__(self, vocab: int, width: int = 32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(128, width)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, ids, mask):
        x = self.tok(ids) + self.pos(torch.arange(ids.size(1)))
        x = self.encoder(x, src_key_padding_mask=~mask)
        keep = mask.unsqueeze(2).float()
        return F.normalize((x * keep).sum(1) / keep.sum(1), dim=1)


def tokenize_collate(tokenizer: WordPieceTokenizer):
    """The batch's texts encoded, padded to the longest with ``[PAD]`` as Python lists (as
    a slow tokeniser's ``padding=True`` does), and the attention mask, as tensors."""
    def collate(texts):
        encoded = [tokenizer.encode(t) for t in texts]
        width = max(len(e) for e in encoded)
        ids = [e + [0] * (width - len(e)) for e in encoded]
        mask = [[1] * len(e) + [0] * (width - len(e)) for e in encoded]
        return torch.tensor(ids), torch.tensor(mask, dtype=torch.bool)
    return collate


@case("pt_infer_wordpiece_embed_nw0", "pytorch", "inference", 3,
      facts("inference", dataloader_workers=0), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS,
      tags=["text", "tokenizer", "embedding", "dataloader", "collate_fn"])
def pt_infer_wordpiece_embed_nw0(variant):
    """Embedding a collection of 2,048 support tickets (20 to 45 words each) for a search
    index: a ``DataLoader(texts, batch_size=32, num_workers=0)`` whose ``collate_fn``
    runs BERT's slow tokeniser written in Python (clean-up, lower case, accents stripped,
    split on punctuation character by character, greedy longest-match-first WordPiece over
    a 1,600-entry vocabulary) and pads the batch, then a small two-layer sentence encoder
    (width 32, masked mean pooling, L2 normalised) in ``eval()`` under
    ``torch.inference_mode()``, the embeddings kept with ``.numpy()``."""
    torch.manual_seed(0)
    texts, vocab = corpus_text(2048, 31)
    tokenizer = WordPieceTokenizer(vocab)
    model = SentenceEncoder(len(vocab)).eval()
    n = workers(variant)
    loader = DataLoader(texts, batch_size=32, num_workers=n, persistent_workers=n > 0,
                        collate_fn=tokenize_collate(tokenizer))
    batches = epochs(loader)
    index = []

    def step(i):
        with CLOCK("input"):
            ids, mask = next(batches)
        with torch.inference_mode():
            index.append(model(ids, mask).numpy())
        if len(index) > 64:
            index.clear()
        return index[-1]
    return Loop(step, batches.close)
