"""Tuned PyTorch cases of host reads and per-call overhead: a scorer that writes each
batch's report with f-strings of tensors (``str(tensor)`` reads every value it prints, one
at a time), a tiny language model decoding one unbatched request at a time (no batch
dimension in its shapes: per-call cost is the step), and a tagger trained with its head
applied in a Python loop over the positions (one small call per position where one call
over the sequence does).
"""

from __future__ import annotations

import torch

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts

F = torch.nn.functional


# -- sync: a report written with tensors in f-strings ------------------------------------------
@case("pt_infer_report_tensors", "pytorch", "inference", 5, facts("inference"),
      fix="the report's numbers read with one .tolist() each and formatted as floats",
      tags=["logging", "readback"])
def pt_infer_report_tensors(variant):
    """A classifier scoring batches of 128 whose loop writes a text report per batch: the
    mean confidence, the top-3 scores and classes of the first 6 rows and the class
    histogram, formatted as tensors in an f-string (``str(tensor)``)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(96, 192), torch.nn.ReLU(),
                                torch.nn.Linear(192, 12)).eval()
    x = torch.randn(128, 96)
    report: list[str] = []

    def step(i):
        with torch.inference_mode():
            probs = model(x).softmax(1)
            top, cls = probs[:6].topk(3, 1)
            hist = torch.bincount(probs.argmax(1), minlength=12)
        with CLOCK("sync"):
            if variant == "fix":
                mean, rows, ids, counts = (probs.max(1).values.mean().item(), top.tolist(),
                                           cls.tolist(), hist.tolist())
                report.append(f"step {i} mean={mean:.4f} top={rows} classes={ids} "
                              f"hist={counts}")
            else:
                report.append(f"step {i} mean={probs.max(1).values.mean()} top={top} "
                              f"classes={cls} hist={hist}")
        del report[:-50]
    return Loop(step)


# -- per-call overhead: decoding one unbatched request at a time -------------------------------
class WindowLM(torch.nn.Module):
    """Next token from the last 3 tokens: embeddings, one hidden layer, the logits."""

    def __init__(self, vocab: int = 500, dim: int = 24, hidden: int = 96):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.hidden = torch.nn.Linear(3 * dim, hidden)
        self.out = torch.nn.Linear(hidden, vocab)

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        """Logits for the next token; ``window`` is (3,) for one request, (n, 3) for n."""
        e = self.emb(window).flatten(-2)
        return self.out(F.relu(self.hidden(e)))

    def decode(self, prompt: torch.Tensor, new: int) -> torch.Tensor:
        """Greedy decoding of ``new`` tokens after ``prompt`` ((3,) or (n, 3))."""
        seq = prompt
        for _ in range(new):
            nxt = self(seq[..., -3:]).argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], -1)
        return seq[..., 3:]


@case("pt_infer_decode_unbatched", "pytorch", "inference", 3, facts("inference"),
      fix="decode the 3 requests of a step together (one (3, 3) window per token)",
      share_from_fix="host_overhead", per_item=3, fix_per_item=3,
      tags=["decode", "no_dataloader"])
def pt_infer_decode_unbatched(variant):
    """Greedy decoding of a small window language model for 3 requests per step, each
    request decoded alone with unbatched tensors (a 3-token window, no batch dimension):
    12 new tokens per request, a few dozen framework calls per token; decoding the 3
    together is the fix."""
    torch.manual_seed(0)
    model = WindowLM().eval()
    prompts = torch.randint(0, 500, (48, 3), generator=torch.Generator().manual_seed(1))

    def step(i):
        reqs = prompts[(3 * i) % 48:(3 * i) % 48 + 3]
        with torch.inference_mode():
            if variant == "fix":
                return model.decode(reqs, 12)
            return [model.decode(reqs[k], 12) for k in range(3)]
    return Loop(step)


# -- per-call overhead in training: a head applied once per position ---------------------------
class PositionTagger(torch.nn.Module):
    """A sequence tagger: embedding, a 1-D convolution over the positions, an MLP head
    (Linear-GELU-Linear) giving each position's tag logits.  With ``per_position`` the head
    runs as a per-token classifier is often written, once per position on ``h[:, t]``, the
    logits stacked; without, once on the whole ``[batch, positions, features]`` tensor
    (``nn.Linear`` takes any leading dimensions)."""

    def __init__(self, vocab: int = 1000, width: int = 128, tags: int = 24,
                 per_position: bool = True):
        super().__init__()
        self.per_position = per_position
        self.embed = torch.nn.Embedding(vocab, width)
        self.conv = torch.nn.Conv1d(width, width, 3, padding=1)
        self.head = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                        torch.nn.Linear(2 * width, tags))

    def forward(self, tokens):
        h = F.relu(self.conv(self.embed(tokens).transpose(1, 2))).transpose(1, 2)
        if not self.per_position:
            return self.head(h)
        return torch.stack([self.head(h[:, t]) for t in range(h.shape[1])], 1)


@case("pt_train_tagger_head_per_position", "pytorch", "training", 3,
      facts("training", optimizer="adamw"), warmup=3,
      fix="the head applied once over the sequence", share_from_fix="host_overhead",
      tags=["python_loop", "per_position", "tagging"])
def pt_train_tagger_head_per_position(variant):
    """A token tagger (embedding 1000x128, a 128-wide ``Conv1d`` of width 3, a
    128-256-24 Linear-GELU-Linear head) trained with AdamW on batches of 32 sequences of
    24 tokens held in memory: the head is applied in a Python loop over the positions,
    once per token column ``h[:, t]``, the logits stacked for one cross-entropy.  The fix
    applies the same head once to the whole ``[batch, positions, features]`` tensor."""
    torch.manual_seed(0)
    model = PositionTagger(per_position=variant != "fix")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(8)
    words = torch.randint(0, 1000, (512, 24), generator=gen)
    labels = torch.randint(0, 24, (512, 24), generator=gen)

    def step(i):
        with CLOCK("input"):
            k = (32 * i) % 512
            x, y = words[k:k + 32], labels[k:k + 32]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, 24), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    return Loop(step)
