"""Held-out DDP cases written without looking at the advisor's rules (captured and measured
by ``run_ddp.py`` on 2 CPU ranks over gloo), the parts of DDP that act around the step
rather than in it: shards of unequal size trained under the ``Join`` context manager (the
rank that runs out shadows the other's all-reduces), a distributed evaluation of a text
classifier that gathers every batch's predictions and labels with
``all_gather_into_tensor``, a minGPT-style model whose causal-mask buffers DDP broadcasts
from rank 0 before every forward (``broadcast_buffers=True``, the default), and the
speech-commands tutorial's M5 network trained with DDP, where nothing is wrong.

:func:`register` registers the cases with the DDP generator's facts and returns each
case's model builder (for the all-reduce of its gradients alone).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from corpus.common import case

nn = torch.nn
F = nn.functional


# -- uneven shards under Join ------------------------------------------------------------------
def tabular_mlp() -> nn.Module:
    """64 features, 512-512 ReLU, one logit: 0.3 M parameters."""
    return nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 1))


#: Rows in each rank's shard: the log files split by day, rank 0's days the quiet ones.
SHARD_ROWS = (512, 1536)
BATCH_ROWS = 256


def shard(rows: int, seed: int) -> list:
    """A shard of ``rows`` (features, click labels) cut in batches of :data:`BATCH_ROWS`."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 64, generator=g)
    y = (torch.rand(rows, 1, generator=g) < 0.1).float()
    return list(zip(x.split(BATCH_ROWS), y.split(BATCH_ROWS)))


# -- a minGPT-style language model ---------------------------------------------------------
class CausalSelfAttention(nn.Module):
    """minGPT's attention: one qkv projection, the causal mask kept as a ``block x block``
    buffer, softmax attention written out."""

    def __init__(self, dim: int, heads: int, block: int):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, block: int):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class MiniGPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks of ``dim`` with ``heads`` heads, a
    language-model head; the context (``block``) is GPT-2's 1024 tokens, so each block's
    mask buffer holds 1024 x 1024 floats (4 MB)."""

    def __init__(self, vocab: int = 2048, block: int = 1024, dim: int = 192, heads: int = 6,
                 layers: int = 1):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.h = nn.ModuleList(Block(dim, heads, block) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# -- the speech-commands tutorial's M5 ----------------------------------------------------------
class M5(nn.Module):
    """M5 over 1 s of 8 kHz audio: a conv of 80 taps stride 16, three more convs of 3 taps,
    BatchNorm and max pooling after each, global average pooling, 35 classes."""

    def __init__(self, n_output: int = 35, stride: int = 16, n_channel: int = 32):
        super().__init__()
        c = n_channel
        self.conv1 = nn.Conv1d(1, c, kernel_size=80, stride=stride)
        self.bn1, self.pool1 = nn.BatchNorm1d(c), nn.MaxPool1d(4)
        self.conv2, self.bn2, self.pool2 = nn.Conv1d(c, c, 3), nn.BatchNorm1d(c), nn.MaxPool1d(4)
        self.conv3 = nn.Conv1d(c, 2 * c, 3)
        self.bn3, self.pool3 = nn.BatchNorm1d(2 * c), nn.MaxPool1d(4)
        self.conv4 = nn.Conv1d(2 * c, 2 * c, 3)
        self.bn4, self.pool4 = nn.BatchNorm1d(2 * c), nn.MaxPool1d(4)
        self.fc1 = nn.Linear(2 * c, n_output)

    def forward(self, x):
        x = self.pool1(F.relu(self.bn1(self.conv1(x))))
        x = self.pool2(F.relu(self.bn2(self.conv2(x))))
        x = self.pool3(F.relu(self.bn3(self.conv3(x))))
        x = self.pool4(F.relu(self.bn4(self.conv4(x))))
        x = F.avg_pool1d(x, x.shape[-1]).permute(0, 2, 1)
        return F.log_softmax(self.fc1(x), dim=2)


# -- the evaluated classifier -----------------------------------------------------------------
class TextClassificationModel(nn.Module):
    """The AG_NEWS tutorial's classifier: an ``EmbeddingBag`` (mean) over a 95,811-token
    vocabulary, 64 wide, and a linear layer to 4 classes: 6.1 M parameters."""

    def __init__(self, vocab_size: int = 95811, embed_dim: int = 64, num_class: int = 4):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)

    def forward(self, text, offsets):
        return self.fc(self.embedding(text, offsets))


def news_batches(n: int, batch: int, seed: int) -> list:
    """``n`` batches of ``batch`` texts of 20-60 token ids, concatenated with their offsets
    as the tutorial's ``collate_batch`` makes them, and their labels."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        lengths = torch.randint(20, 61, (batch,), generator=g)
        text = torch.randint(0, 95811, (int(lengths.sum()),), generator=g)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        out.append((text, offsets, torch.randint(0, 4, (batch,), generator=g)))
    return out


def register(facts: dict) -> dict:
    """Register this module's cases; {case: its model builder}."""
    infer = {k: v for k, v in facts.items() if k != "optimizer"}

    @case("pt_ddp_gloo_join_uneven_shards", "pytorch", "training", 2,
          {**facts, "optimizer": "adam", "batch": BATCH_ROWS}, split="holdout",
          fix="the rows pooled and split evenly (4 batches a rank), no Join",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "join", "uneven_inputs", "straggler"])
    def pt_ddp_gloo_join_uneven_shards(variant):
        """DDP over gloo on 2 CPU ranks training a click-through MLP (64-512-512-1, Adam,
        binary cross-entropy) on log shards split by day: rank 0's shard holds 512 rows,
        rank 1's 1536, in batches of 256, so an epoch is 2 batches on rank 0 and 6 on rank
        1.  The epoch runs under ``with Join([model]):`` as the uneven-inputs tutorial
        shows: rank 0 finishes its 2 batches and then shadows rank 1's 4 remaining
        gradient all-reduces, waiting for rank 1's compute, and every forward all-reduces
        Join's flag.  One step here is one epoch.  The fix pools the 2048 rows and gives
        each rank 1024 (4 batches, the same rows an epoch), no Join; the communication
        share is what the same epochs without DDP (``bare``, each rank its own shard)
        save."""
        torch.manual_seed(0)
        net = tabular_mlp()
        model = net if variant == "bare" else DDP(net)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        rank = dist.get_rank()
        if variant == "fix":
            rows = sum(SHARD_ROWS) // dist.get_world_size()
            data = shard(rows, 70 + rank)
        else:
            data = shard(SHARD_ROWS[rank], 70 + rank)

        def epoch():
            for x, y in data:
                loss = F.binary_cross_entropy_with_logits(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()

        def step(i):
            if variant == "run":
                with Join([model]):
                    epoch()
            else:
                epoch()
        return step

    @case("pt_ddp_gloo_eval_gather_preds", "pytorch", "inference", 8,
          {**infer, "mode": "inference", "batch": 64}, split="holdout",
          fix="predictions and labels kept on each rank, gathered once every 50 batches",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "all_gather_into_tensor", "evaluation", "text"])
    def pt_ddp_gloo_eval_gather_preds(variant):
        """A distributed evaluation over gloo on 2 CPU ranks: each rank runs its half of the
        AG_NEWS test split through the DDP-wrapped text classifier it trained (the
        tutorial's ``EmbeddingBag`` of 64 over 95,811 tokens and a 4-way linear layer) in
        ``model.eval()`` and ``torch.no_grad()``, batches of 64 texts of 20-60 tokens, and
        after every batch gathers both ranks' predicted classes and labels with
        ``dist.all_gather_into_tensor`` so rank 0 can build the confusion matrix at the
        end.  The fix keeps each rank's predictions and labels and gathers them once at the
        end of the evaluation (every 50 batches here); the communication share is what the
        same evaluation on the unwrapped model without any gather (``bare``) saves."""
        torch.manual_seed(0)
        net = TextClassificationModel()
        model = net if variant == "bare" else DDP(net)
        model.eval()
        data = news_batches(4, 64, 80 + dist.get_rank())
        world = dist.get_world_size()
        kept, table = [], []

        def gather(local: torch.Tensor) -> torch.Tensor:
            out = torch.empty(world * local.numel(), dtype=local.dtype)
            dist.all_gather_into_tensor(out, local)
            return out

        def step(i):
            text, offsets, labels = data[i % len(data)]
            with torch.no_grad():
                preds = model(text, offsets).argmax(1)
            if variant == "run":
                table.append((gather(preds), gather(labels)))
            elif variant == "fix":
                kept.append((preds, labels))
                if len(kept) == 50:
                    table.append((gather(torch.cat([p for p, _ in kept])),
                                  gather(torch.cat([y for _, y in kept]))))
                    kept.clear()
            if len(table) > 50:
                table.clear()
            return preds
        return step

    @case("pt_ddp_gloo_mingpt_mask_buffers", "pytorch", "training", 2,
          {**facts, "optimizer": "adamw", "batch": 8}, split="holdout",
          fix="DDP(model, broadcast_buffers=False)", share_from_fix="communication",
          share_variant="bare", tags=["ddp", "gloo", "broadcast_buffers", "transformer"])
    def pt_ddp_gloo_mingpt_mask_buffers(variant):
        """DDP over gloo on 2 CPU ranks training a minGPT-style language model (one block of
        192, 6 heads, a vocabulary of 2048, 1.4 M parameters, AdamW) on batches of 8
        sequences of 64 tokens, its context set to GPT-2's 1024: the attention block keeps its
        causal mask as a 1024 x 1024 float buffer (4 MB), and DDP's default
        ``broadcast_buffers=True`` broadcasts every buffer from rank 0 before each
        forward, though the masks never change.  The fix is ``broadcast_buffers=False``;
        the communication share is what the loop without DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = MiniGPT()
        if variant == "bare":
            model = net
        else:
            model = DDP(net, broadcast_buffers=variant != "fix")
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        g = torch.Generator().manual_seed(90 + dist.get_rank())
        data = [torch.randint(0, 2048, (8, 65), generator=g) for _ in range(4)]

        def step(i):
            tokens = data[i % len(data)]
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss
        return step

    @case("pt_ddp_gloo_m5_speech_commands", "pytorch", "training", 3,
          {**facts, "optimizer": "adam", "batch": 64}, split="holdout",
          share_from_fix="communication", share_variant="bare",
          tags=["ddp", "gloo", "audio", "conv1d", "batchnorm"])
    def pt_ddp_gloo_m5_speech_commands(variant):
        """DDP over gloo on 2 CPU ranks training the speech-commands tutorial's M5 network
        (a conv of 80 taps, stride 16, over 1 s of 8 kHz audio, three 3-tap convs of 32-64
        channels, BatchNorm and max pooling, 35 classes: 26 K parameters) with Adam (lr
        0.01, weight decay 1e-4) and the negative log-likelihood loss on batches of 64
        clips per rank.  Its gradients are 0.1 MB and its BatchNorm buffers a few KB; the
        convolutions are the step.  No fix claimed; the communication share is what the
        loop without DDP (``bare``) saves."""
        torch.manual_seed(0)
        net = M5()
        model = net if variant == "bare" else DDP(net)
        opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=1e-4)
        g = torch.Generator().manual_seed(100 + dist.get_rank())
        data = [(torch.randn(64, 1, 8000, generator=g), torch.randint(0, 35, (64,), generator=g))
                for _ in range(4)]

        def step(i):
            audio, target = data[i % len(data)]
            loss = F.nll_loss(model(audio).squeeze(1), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step

    return {"pt_ddp_gloo_join_uneven_shards": tabular_mlp,
            "pt_ddp_gloo_eval_gather_preds": TextClassificationModel,
            "pt_ddp_gloo_mingpt_mask_buffers": MiniGPT,
            "pt_ddp_gloo_m5_speech_commands": M5}
