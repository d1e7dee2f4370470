"""Held-out PyTorch cases of numerical programs a user of a CPU box writes, written
without looking at the advisor's rules: a neural ODE fitted to spiral trajectories
through a hand-written fixed-step RK4 integrator (many small steps, backpropagated
through the solver), a full-batch regression trained with ``torch.optim.LBFGS`` and a
closure, DP-SGD with per-sample gradients taken in a Python loop over the batch's samples
(fix: ``torch.func.vmap(grad(...))``), and an embedding net trained with an online
triplet loss whose hardest negatives are mined in Python, anchor-positive pair by pair.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts

nn = torch.nn
F = torch.nn.functional


# -- compute: a neural ODE through a hand-written RK4 solver ----------------------------------
TRUE_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])


class ODEFunc(nn.Module):
    """The learned dynamics dy/dt = f(y**3), a 2-50-2 tanh MLP."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 50), nn.Tanh(), nn.Linear(50, 2))
        for m in self.net.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0, std=0.1)
                nn.init.constant_(m.bias, val=0)

    def forward(self, t, y):
        return self.net(y ** 3)


def rk4_odeint(func, y0: torch.Tensor, t: torch.Tensor, step_size: float) -> torch.Tensor:
    """The solution at each time of ``t``, integrated with the classic fixed-step RK4
    method, ``step_size`` apart (a hand-written ``odeint(method="rk4")``)."""
    ys, y = [y0], y0
    for t0, t1 in zip(t[:-1].tolist(), t[1:].tolist()):
        n = max(1, round((t1 - t0) / step_size))
        h = (t1 - t0) / n
        for k in range(n):
            s = t0 + k * h
            k1 = func(s, y)
            k2 = func(s + h / 2, y + h / 2 * k1)
            k3 = func(s + h / 2, y + h / 2 * k2)
            k4 = func(s + h, y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        ys.append(y)
    return torch.stack(ys)


@case("pt_train_neural_ode_rk4", "pytorch", "training", 3,
      facts("training", optimizer="rmsprop"), warmup=3,
      fix="the solver's forward and loss under one torch.compile",
      share_from_fix="host_overhead", also=("batch_size=200",),
      tags=["neural_ode", "solver_loop", "scientific"])
def pt_train_neural_ode_rk4(variant):
    """The neural-ODE demo without its library: a spiral's true trajectory (dy/dt =
    y**3 A, 1,000 times over 25 time units) is solved once; each step draws 20 starting
    points of it with ``np.random.choice`` and fits a 2-50-2 tanh dynamics net (RMSprop)
    to the next 8 points of each through a hand-written fixed-step RK4 ``odeint`` with a
    step of 0.00625, a quarter of the data's spacing (28 RK4 steps, 112 calls of the net),
    the L1 loss backpropagated through the solver.  The solver's steps are a chain, each
    on the last one's state, so nothing batches them; the fix compiles the solve and the
    loss as one function with ``torch.compile`` (the dynamics net compiled alone is slower
    than eager: each of its 112 calls pays a compiled call's cost).  Beside it the truth
    has the same loop on 200 starting points a step (``batch_size=200``): what the step's
    per-call cost is next to its arithmetic."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    data_size, batch_time = 1000, 8
    batch_size = 200 if variant == "batch_size=200" else 20
    t = torch.linspace(0.0, 25.0, data_size)
    with torch.no_grad():
        true_y = rk4_odeint(lambda s, y: (y ** 3) @ TRUE_A, torch.tensor([[2.0, 0.0]]), t,
                            0.025)
    func = ODEFunc()
    opt = torch.optim.RMSprop(func.parameters(), lr=1e-3)

    def solve_loss(batch_y0, batch_t, batch_y):
        pred_y = rk4_odeint(func, batch_y0, batch_t, 0.00625)
        return torch.mean(torch.abs(pred_y - batch_y))
    loss_of = solve_loss
    if variant == "fix":  # the times a constant of the compiled function (their values
        times = t[:batch_time]  # set the solver's steps), the rest its inputs
        compiled = torch.compile(lambda y0, y: solve_loss(y0, times, y))

        def loss_of(batch_y0, batch_t, batch_y):
            return compiled(batch_y0, batch_y)

    def step(i):
        with CLOCK("input"):
            s = torch.from_numpy(rng.choice(np.arange(data_size - batch_time), batch_size,
                                            replace=False))
            batch_y0, batch_t = true_y[s], t[:batch_time]
            batch_y = torch.stack([true_y[s + k] for k in range(batch_time)], dim=0)
        opt.zero_grad()
        loss = loss_of(batch_y0, batch_t, batch_y)
        loss.backward()
        opt.step()
        return loss.item()
    return Loop(step)


# -- compute: full-batch L-BFGS with a closure ------------------------------------------------
@case("pt_train_lbfgs_closure", "pytorch", "training", 4,
      facts("training", optimizer="lbfgs"), warmup=2,
      tags=["lbfgs", "closure", "full_batch"])
def pt_train_lbfgs_closure(variant):
    """A 16-64-64-1 tanh MLP fitted to 4,096 rows of a smooth regression target held in
    memory with ``torch.optim.LBFGS(lr=1, max_iter=4, history_size=10,
    line_search_fn="strong_wolfe")``: each step calls ``optimizer.step(closure)``, the
    closure zeroing the gradients and running the full batch's MSE forward and backward,
    and the loss it returns is logged with ``.item()``.  No fix claimed: the closure's
    full-batch passes are the work."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4096, 16, generator=gen)
    w = torch.randn(16, 1, generator=gen)
    y = torch.sin(x @ w) + 0.1 * (x[:, :1] * x[:, 1:2]) + 0.01 * torch.randn(4096, 1,
                                                                              generator=gen)
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 1))
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=4, history_size=10,
                            line_search_fn="strong_wolfe")
    history = []

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    def step(i):
        loss = opt.step(closure)
        history.append(loss.item())
        return history[-1]
    return Loop(step)


# -- host overhead: per-sample gradients in a Python loop (DP-SGD by hand) ----------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 64), nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


MAX_NORM, NOISE = 1.0, 1.1


def private_grads_loop(model, x, y):
    """Each sample's gradient by its own forward and backward, clipped to ``MAX_NORM`` and
    summed, parameter by parameter."""
    params = list(model.parameters())
    summed = [torch.zeros_like(p) for p in params]
    for xi, yi in zip(x, y):
        model.zero_grad()
        F.cross_entropy(model(xi.unsqueeze(0)), yi.unsqueeze(0)).backward()
        per_sample = [p.grad.detach().clone() for p in params]
        norm = torch.sqrt(sum(g.pow(2).sum() for g in per_sample))
        factor = (MAX_NORM / (norm + 1e-6)).clamp(max=1.0)
        for acc, g in zip(summed, per_sample):
            acc.add_(g * factor)
    return summed


def private_grads_vmap(model, x, y):
    """The same clipped sum from one ``vmap(grad(...))`` over the batch (the per-sample
    gradients tutorial's ``torch.func`` way)."""
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_one(p, xi, yi):
        out = functional_call(model, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in per_sample.values()))
    factor = (MAX_NORM / (norms + 1e-6)).clamp(max=1.0)
    return [torch.einsum("b,b...->...", factor, per_sample[k])
            for k, _ in model.named_parameters()]


@case("pt_train_dpsgd_per_sample_loop", "pytorch", "training", 3,
      facts("training", optimizer="sgd"), split="tuned", warmup=2,
      fix="per-sample gradients from torch.func.vmap(grad(...))",
      share_from_fix="host_overhead", tags=["dp_sgd", "per_sample_gradients", "python_loop"])
def pt_train_dpsgd_per_sample_loop(variant):
    """Differentially private SGD written by hand for a small 784-64-32-10 MLP on batches of 32
    flattened 28x28 images held in memory: each sample gets its own forward and backward,
    its gradients are cloned, their joint norm clipped to 1.0 and added to a running sum,
    parameter by parameter; Gaussian noise (multiplier 1.1) is added to the sum, which is
    set as ``.grad`` for an SGD step.  The fix takes the per-sample gradients with
    ``torch.func.vmap(grad(...))`` over ``functional_call`` and clips and sums them
    batched."""
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    images = torch.rand(1024, 784, generator=torch.Generator().manual_seed(9))
    labels = torch.randint(0, 10, (1024,), generator=torch.Generator().manual_seed(9))
    private_grads = private_grads_vmap if variant == "fix" else private_grads_loop

    def step(i):
        with CLOCK("input"):
            k = (32 * i) % 1024
            x, y = images[k:k + 32], labels[k:k + 32]
        summed = private_grads(model, x, y)
        for p, g in zip(model.parameters(), summed):
            p.grad = (g + torch.randn_like(g) * NOISE * MAX_NORM) / len(x)
        opt.step()
    return Loop(step)


# -- host overhead: online triplet loss, hardest negatives mined pair by pair --------------------
class EmbeddingNet(nn.Module):
    """Two conv-PReLU-pool blocks and a 256-128-128-16 head: 28x28 digits to a 16-d
    embedding."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(1, 8, 5), nn.PReLU(), nn.MaxPool2d(2, 2),
                                     nn.Conv2d(8, 16, 5), nn.PReLU(), nn.MaxPool2d(2, 2))
        self.fc = nn.Sequential(nn.Linear(16 * 4 * 4, 128), nn.PReLU(), nn.Linear(128, 128),
                                nn.PReLU(), nn.Linear(128, dim))

    def forward(self, x):
        return self.fc(self.convnet(x).flatten(1))


def pdist(vectors: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distances of every pair of rows."""
    sq = vectors.pow(2).sum(dim=1)
    return -2 * vectors.mm(vectors.t()) + sq.view(1, -1) + sq.view(-1, 1)


def hardest_negative_triplets(embeddings: torch.Tensor, labels: torch.Tensor,
                              margin: float) -> torch.Tensor:
    """Online triplet selection as the popular selectors write it: for each label, each
    anchor-positive pair, the negatives' losses computed and read into NumPy, the hardest
    one picked; a pair with no violating negative is skipped."""
    distance_matrix = pdist(embeddings.detach())
    labels = labels.numpy()
    triplets = []
    for label in set(labels):
        label_mask = labels == label
        label_indices = np.where(label_mask)[0]
        negative_indices = np.where(np.logical_not(label_mask))[0]
        anchor_positives = np.array(list(combinations(label_indices, 2)))
        ap_distances = distance_matrix[anchor_positives[:, 0], anchor_positives[:, 1]]
        for anchor_positive, ap_distance in zip(anchor_positives, ap_distances):
            loss_values = (ap_distance - distance_matrix[
                torch.LongTensor(np.array([anchor_positive[0]])),
                torch.LongTensor(negative_indices)] + margin)
            loss_values = loss_values.numpy()
            hard_negative = int(np.argmax(loss_values))
            if loss_values[hard_negative] > 0:
                triplets.append([anchor_positive[0], anchor_positive[1],
                                 negative_indices[hard_negative]])
    if not triplets:
        triplets.append([anchor_positives[0][0], anchor_positives[0][1], negative_indices[0]])
    return torch.LongTensor(np.array(triplets))


def hardest_negative_triplets_batched(embeddings: torch.Tensor, labels: torch.Tensor,
                                      margin: float) -> torch.Tensor:
    """The same triplets from the distance matrix at once: every anchor-positive pair's
    losses against every sample, non-negatives masked, one ``max`` over the rows."""
    d = pdist(embeddings.detach())
    same = labels[:, None] == labels[None, :]
    a, p = torch.triu(same, diagonal=1).nonzero(as_tuple=True)
    losses = (d[a, p][:, None] - d[a] + margin).masked_fill(same[a], float("-inf"))
    best, neg = losses.max(dim=1)
    keep = best > 0
    if not bool(keep.any()):
        keep[0] = True
    return torch.stack([a[keep], p[keep], neg[keep]], dim=1)


@case("pt_train_triplet_hard_mining", "pytorch", "training", 3,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      fix="the hardest negatives mined from the distance matrix at once",
      share_from_fix="host_overhead", tags=["metric_learning", "triplet", "mining", "numpy"])
def pt_train_triplet_hard_mining(variant):
    """A 28x28 digit embedding net (two conv-PReLU-pool blocks of 8 and 16 channels, a
    256-128-128-16 head) trained with Adam and an online triplet loss (margin 1.0) on
    balanced batches of 4 classes x 16 images held in memory: the triplets are selected
    from the detached squared distance matrix label by label and anchor-positive pair by
    pair (480 pairs a batch), each pair's losses against the negatives indexed out, read
    into NumPy and the hardest violating one picked with ``np.argmax``; the loss is then
    computed on the selected triplets at once.  The fix mines the same triplets from the
    distance matrix with masks and one ``max``."""
    torch.manual_seed(0)
    model = EmbeddingNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(12)
    images = torch.rand(16, 64, 1, 28, 28, generator=gen)
    labels = torch.arange(4).repeat_interleave(16)
    select = hardest_negative_triplets_batched if variant == "fix" else \
        hardest_negative_triplets
    margin = 1.0

    def step(i):
        with CLOCK("input"):
            x = images[i % 16]
        emb = model(x)
        t = select(emb, labels, margin)
        ap = (emb[t[:, 0]] - emb[t[:, 1]]).pow(2).sum(1)
        an = (emb[t[:, 0]] - emb[t[:, 2]]).pow(2).sum(1)
        loss = F.relu(ap - an + margin).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), len(t)
    return Loop(step)
