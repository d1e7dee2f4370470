"""PyTorch cases of programs as their users commonly write them, written without
looking at the advisor's rules: SimCLR-style contrastive training of a small CNN (two
views of each image augmented on the batch, an NT-Xent loss over the batch's similarity
matrix), a graph classifier whose batches' edge lists are built in Python by a
``collate_fn`` from each graph's adjacency matrix and aggregated with ``index_add_``,
beam-search decoding of a GRU translator with the hypotheses kept in Python lists, and a
small CNN served through ``torch.jit.script`` (saved, then loaded with ``torch.jit.load``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- compute: SimCLR-style contrastive training ------------------------------------------------
def conv_bn(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class SimCLR(nn.Module):
    """A small CNN encoder (3 conv-BN-ReLU blocks, global average pool) and the projection
    head SimCLR trains through (128-128-64)."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(conv_bn(3, 16, 1), conv_bn(16, 32, 2), conv_bn(32, 64, 2),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projector = nn.Sequential(nn.Linear(64, 128), nn.ReLU(inplace=True),
                                       nn.Linear(128, 64))

    def forward(self, x):
        return self.projector(self.encoder(x))


def augment(x: torch.Tensor) -> torch.Tensor:
    """One random view of a batch, made on the batch: a random shift (reflect-padded
    crop), a horizontal flip of half the images, brightness and contrast jitter."""
    b = x.size(0)
    dx, dy = torch.randint(0, 9, (2,)).tolist()
    x = F.pad(x, (4, 4, 4, 4), mode="reflect")[:, :, dy:dy + 32, dx:dx + 32]
    flip = torch.rand(b, 1, 1, 1) < 0.5
    x = torch.where(flip, x.flip(3), x)
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * (0.6 + 0.8 * torch.rand(b, 1, 1, 1)) + mean
    return x * (0.6 + 0.8 * torch.rand(b, 1, 1, 1))


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """The NT-Xent loss as SimCLR implementations write it: the 2N x 2N cosine similarity
    matrix, its diagonal masked, each view's positive the other view of its image."""
    n = z1.size(0)
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


@case("pt_train_simclr_ntxent", "pytorch", "training", 5,
      facts("training", optimizer="adam", dataloader_workers=0), split="holdout", warmup=3,
      tags=["contrastive", "augment_on_batch"])
def pt_train_simclr_ntxent(variant):
    """SimCLR-style contrastive pre-training of a small CNN on 32x32 RGB images (2,048 in
    memory as uint8, a shuffled ``DataLoader`` of batches of 32, no workers): two views of
    each batch made with tensor ops on the batch (shifted crop, flip, brightness and
    contrast jitter), both through the encoder and projection head, the NT-Xent loss over
    the 64 x 64 similarity matrix, Adam.  Nothing but the model's work in the step."""
    torch.manual_seed(0)
    model = SimCLR()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    images = torch.randint(0, 256, (2048, 3, 32, 32), dtype=torch.uint8,
                           generator=torch.Generator().manual_seed(4))
    batches = epochs(DataLoader(TensorDataset(images), batch_size=32, shuffle=True,
                                drop_last=True))
    losses = []

    def step(i):
        with CLOCK("input"):
            x = next(batches)[0].float().div_(255)
        loss = nt_xent(model(augment(x)), model(augment(x)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        return loss
    return Loop(step, batches.close)


# -- input: a graph network whose batches' edge lists are built in Python -----------------------
class Molecules(Dataset):
    """Small graphs as a notebook holds them: per graph a node-feature array, a symmetric
    0/1 adjacency matrix (numpy) and a label.  With ``edge_cache`` each graph's
    ``edge_index`` is made once, at load, as PyTorch Geometric's datasets hold it."""

    def __init__(self, n: int = 2048, feat: int = 16, seed: int = 8, edge_cache=False):
        rng = np.random.default_rng(seed)
        self.graphs = []
        for _ in range(n):
            nodes = int(rng.integers(30, 81))
            upper = np.triu(rng.random((nodes, nodes)) < 3.0 / nodes, 1)
            adj = (upper | upper.T).astype(np.int64)
            x = rng.standard_normal((nodes, feat)).astype(np.float32)
            edges = torch.from_numpy(np.argwhere(adj).T.copy()) if edge_cache else None
            self.graphs.append((x, adj, int(adj.sum() > 2 * nodes), edges))

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, k):
        return self.graphs[k]


def collate_graphs(batch):
    """The batch as one disjoint graph, built in Python: node features stacked, each
    graph's edges read off its adjacency matrix pair by pair and offset by the nodes before
    it, a graph id per node."""
    xs, src, dst, graph_of, ys, offset = [], [], [], [], [], 0
    for g, (x, adj, y, _) in enumerate(batch):
        n = x.shape[0]
        for i in range(n):
            for j in range(n):
                if adj[i][j]:
                    src.append(i + offset)
                    dst.append(j + offset)
        xs.append(torch.from_numpy(x))
        graph_of += [g] * n
        ys.append(y)
        offset += n
    return (torch.cat(xs), torch.tensor([src, dst]), torch.tensor(graph_of),
            torch.tensor(ys))


def collate_cached(batch):
    """The same batch from each graph's ``edge_index`` made once: offsets added to the
    tensors and concatenated (PyTorch Geometric's ``Batch``)."""
    xs, edges, graph_of, offset = [], [], [], 0
    for g, (x, _, _, e) in enumerate(batch):
        xs.append(torch.from_numpy(x))
        edges.append(e + offset)
        graph_of.append(torch.full((x.shape[0],), g))
        offset += x.shape[0]
    return (torch.cat(xs), torch.cat(edges, 1), torch.cat(graph_of),
            torch.tensor([b[2] for b in batch]))


class GraphConv(nn.Module):
    """Mean aggregation of the neighbours' features with ``index_add_``, a linear map of
    it and of the node itself."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.lin, self.root = nn.Linear(cin, cout), nn.Linear(cin, cout)

    def forward(self, h, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(h).index_add_(0, dst, h[src])
        deg = torch.zeros(h.size(0)).index_add_(0, dst, torch.ones(dst.numel()))
        return self.root(h) + self.lin(agg / deg.clamp(min=1).unsqueeze(1))


class GraphClassifier(nn.Module):
    def __init__(self, feat: int = 16, hidden: int = 64, layers: int = 3):
        super().__init__()
        dims = [feat] + [hidden] * layers
        self.convs = nn.ModuleList(GraphConv(a, b) for a, b in zip(dims, dims[1:]))
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, x, edge_index, graph_of, graphs: int):
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
        pooled = torch.zeros(graphs, x.size(1)).index_add_(0, graph_of, x)
        count = torch.zeros(graphs).index_add_(0, graph_of, torch.ones(x.size(0)))
        return self.head(pooled / count.unsqueeze(1))


GRAPHS_PER_BATCH = 32


@case("pt_train_gnn_python_edges", "pytorch", "training", 6,
      facts("training", optimizer="adam", dataloader_workers=0), split="holdout", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS, also=("edge_index_cache",),
      tags=["graph", "collate_fn", "dataloader", "index_add"])
def pt_train_gnn_python_edges(variant):
    """A 3-layer graph network (mean aggregation with ``index_add_``, width 64, mean
    pooling per graph with ``index_add_``) trained with Adam on 2,048 small graphs of 30
    to 80 nodes held as numpy adjacency matrices; a ``DataLoader(batch_size=32,
    shuffle=True, collate_fn=collate_graphs)`` with no workers builds each batch's edge
    list in Python, pair by pair of each graph's nodes.  Beside the loader's workers the
    truth has each graph's ``edge_index`` made once and concatenated with offsets
    (``edge_index_cache``)."""
    torch.manual_seed(0)
    cached = variant == "edge_index_cache"
    n = workers(variant)
    loader = DataLoader(Molecules(edge_cache=cached), batch_size=GRAPHS_PER_BATCH,
                        shuffle=True, collate_fn=collate_cached if cached else collate_graphs,
                        num_workers=n, persistent_workers=n > 0)
    batches = epochs(loader)
    model = GraphClassifier()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(i):
        with CLOCK("input"):
            x, edge_index, graph_of, y = next(batches)
        loss = F.cross_entropy(model(x, edge_index, graph_of, y.numel()), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)


# -- host overhead: beam search with Python bookkeeping of the hypotheses -----------------------
VOCAB, BOS, EOS = 800, 1, 2


class Translator(nn.Module):
    """A GRU encoder-decoder (embeddings 128, hidden 256, a 800-word vocabulary)."""

    def __init__(self, emb: int = 128, hidden: int = 256):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(VOCAB, emb), nn.Embedding(VOCAB, emb)
        self.encoder = nn.GRU(emb, hidden, batch_first=True)
        self.decoder = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, VOCAB)

    def encode(self, src):
        return self.encoder(self.src_emb(src))[1]

    def decode_step(self, tokens, h):
        """Log-probabilities of the next token for each row of ``tokens`` (B,) from states
        ``h`` (1, B, hidden)."""
        out, h = self.decoder(self.tgt_emb(tokens).unsqueeze(1), h)
        return F.log_softmax(self.out(out[:, 0]), dim=-1), h


def beam_search(model: Translator, src, beam: int = 6, max_len: int = 20):
    """Beam search as it is often first written: the hypotheses a Python list of (tokens,
    score, state), each extended by its own decoder call, its ``topk`` read with
    ``.item()``, the candidates sorted in Python."""
    hyps, done = [([BOS], 0.0, model.encode(src))], []
    for _ in range(max_len):
        candidates = []
        for tokens, score, h in hyps:
            logp, h2 = model.decode_step(torch.tensor([tokens[-1]]), h)
            top_v, top_i = logp[0].topk(beam)
            for v, k in zip(top_v, top_i):
                candidates.append((tokens + [k.item()], score + v.item(), h2))
        candidates.sort(key=lambda c: c[1], reverse=True)
        hyps = []
        for c in candidates[:beam]:
            (done if c[0][-1] == EOS else hyps).append(c)
        if not hyps:
            break
    done += hyps
    return max(done, key=lambda c: c[1] / len(c[0]))[0]


def beam_search_batched(model: Translator, src, beam: int = 6, max_len: int = 20):
    """The same search with the beam as the batch: one decoder call for all hypotheses,
    one ``topk`` over beam x vocabulary, the states reordered by index, the tokens read
    once at the end."""
    h = model.encode(src)
    tokens = torch.full((1, 1), BOS)
    scores = torch.zeros(1)
    finished = torch.zeros(1, dtype=torch.bool)
    for _ in range(max_len):
        logp, h = model.decode_step(tokens[:, -1], h)
        logp = torch.where(finished.unsqueeze(1), torch.full_like(logp, float("-inf")), logp)
        logp[:, EOS] = torch.where(finished, 0.0, logp[:, EOS])
        top_v, top_i = (scores.unsqueeze(1) + logp).view(-1).topk(beam)
        rows, words = top_i // VOCAB, top_i % VOCAB
        tokens = torch.cat([tokens[rows], words.unsqueeze(1)], 1)
        h, scores, finished = h[:, rows], top_v, finished[rows] | (words == EOS)
        if bool(finished.all()):
            break
    lengths = (tokens != EOS).sum(1) + finished.long()
    return tokens[(scores / lengths).argmax()].tolist()


@case("pt_infer_beam_search_python", "pytorch", "inference", 3, facts("inference"),
      split="holdout", warmup=2,
      fix="the beam as the batch: one decoder call and one topk over the beam per token",
      share_from_fix="host_overhead", tags=["decode", "beam_search", "item", "python_loop"])
def pt_infer_beam_search_python(variant):
    """Beam-search translation (beam 6, up to 20 tokens) of one 12-token request a step by
    a GRU encoder-decoder under ``torch.no_grad()``, the hypotheses kept as Python lists of
    (tokens, score, state): per token each hypothesis gets its own decoder call, a
    ``topk(6)`` whose values and indices are read with ``.item()``, and the 36 candidates
    are sorted in Python.  The fix searches with the beam as the batch."""
    torch.manual_seed(0)
    model = Translator().eval()
    requests = torch.randint(3, VOCAB, (64, 12), generator=torch.Generator().manual_seed(2))
    search = beam_search_batched if variant == "fix" else beam_search

    def step(i):
        with torch.no_grad():
            return search(model, requests[i % 64:i % 64 + 1])
    return Loop(step)


# -- compute: a model served with torch.jit.script ---------------------------------------------
class DefectNet(nn.Module):
    """A small CNN classifying 64x64 grayscale inspection images into 6 defect classes."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(conv_bn(1, 16, 2), conv_bn(16, 32, 2), conv_bn(32, 64, 2),
                                      conv_bn(64, 64, 1), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(64, 6)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def scripted(model: nn.Module) -> torch.jit.ScriptModule:
    """``torch.jit.script`` of the model, saved and loaded back as a server loads it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "defectnet.pt"
        torch.jit.script(model).save(str(path))
        return torch.jit.load(str(path))


@case("pt_infer_torchscript_server", "pytorch", "inference", 8,
      facts("inference", compiled="torch.jit.script"), warmup=4,
      also=("eager",), tags=["torchscript", "server"])
def pt_infer_torchscript_server(variant):
    """A defect classifier (a small CNN with batch norm) exported with ``torch.jit.script``,
    saved and loaded with ``torch.jit.load`` by the serving process, which answers a batch
    of 64 64x64 images a step under ``torch.no_grad()`` and returns each image's class and
    probability with one ``.tolist()`` each.  The eager model is measured beside it."""
    torch.manual_seed(0)
    model = DefectNet().eval()
    net = model if variant == "eager" else scripted(model)
    images = torch.rand(512, 1, 64, 64, generator=torch.Generator().manual_seed(6))

    def step(i):
        x = images[(64 * i) % 512:(64 * i) % 512 + 64]
        with torch.no_grad():
            prob, cls = net(x).softmax(1).max(1)
        return cls.tolist(), prob.tolist()
    return Loop(step)
