"""Held-out PyTorch cases of training techniques as papers' reference code writes them,
written without looking at the advisor's rules: WGAN-GP on the paper's toy data (five
critic iterations per generator iteration, the gradient penalty taken with
``autograd.grad(create_graph=True)`` and differentiated again), knowledge distillation
with a frozen teacher run forward on every batch (Hinton's softened KL term beside the
cross-entropy), and mixup drawn sample by sample in a Python ``collate_fn`` of a
``DataLoader(num_workers=0)``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- WGAN-GP on the 8 Gaussians, as the paper's toy script writes it ---------------------------
DIM, BATCH_GP, CRITIC_ITERS, LAMBDA = 256, 128, 5, 0.1


def eight_gaussians(rng: np.random.Generator, batch: int) -> torch.Tensor:
    """A batch of the toy data: points around 8 centres on a circle of radius 2, scaled
    by 1/1.414 as the reference script does."""
    scale = 2.0
    centers = [(1, 0), (-1, 0), (0, 1), (0, -1), (1 / np.sqrt(2), 1 / np.sqrt(2)),
               (1 / np.sqrt(2), -1 / np.sqrt(2)), (-1 / np.sqrt(2), 1 / np.sqrt(2)),
               (-1 / np.sqrt(2), -1 / np.sqrt(2))]
    centers = [(scale * x, scale * y) for x, y in centers]
    dataset = []
    for _ in range(batch):
        point = rng.standard_normal(2) * 0.02
        center = centers[rng.integers(len(centers))]
        point[0] += center[0]
        point[1] += center[1]
        dataset.append(point)
    return torch.from_numpy(np.array(dataset, dtype="float32") / 1.414)


def toy_mlp(d_in: int, d_out: int) -> nn.Module:
    """The reference script's generator and critic: three ReLU layers (256 units here)."""
    return nn.Sequential(nn.Linear(d_in, DIM), nn.ReLU(True), nn.Linear(DIM, DIM),
                         nn.ReLU(True), nn.Linear(DIM, DIM), nn.ReLU(True),
                         nn.Linear(DIM, d_out))


def gradient_penalty(net_d, real, fake):
    """The paper's penalty: the critic's gradient at random interpolates of real and
    fake points, ``(||grad||_2 - 1)^2`` times lambda, kept in the graph for the critic's
    backward pass."""
    alpha = torch.rand(real.size(0), 1).expand(real.size())
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    disc = net_d(interpolates)
    gradients = torch.autograd.grad(outputs=disc, inputs=interpolates,
                                    grad_outputs=torch.ones(disc.size()),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA


@case("pt_train_wgan_gp_toy", "pytorch", "training", 4,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      tags=["gan", "wgan_gp", "double_backward", "paper_code"])
def pt_train_wgan_gp_toy(variant):
    """The WGAN-GP paper's toy script on its 8 Gaussians: a generator and a critic of three
    256-unit ReLU layers, Adam (lr 1e-4, betas 0.5, 0.9); each generator iteration runs 5
    critic iterations on fresh batches of 128 points drawn point by point in NumPy (the
    input phase), each with the critic's loss on real and fake points and the gradient
    penalty (``autograd.grad(..., create_graph=True)`` at random interpolates, lambda 0.1)
    backpropagated through the double backward, then the generator's step; the script's
    ``D_cost`` and ``Wasserstein_D`` are read with ``.item()`` after the critic's
    iterations."""
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    net_g, net_d = toy_mlp(2, 2), toy_mlp(2, 1)
    opt_d = torch.optim.Adam(net_d.parameters(), lr=1e-4, betas=(0.5, 0.9))
    opt_g = torch.optim.Adam(net_g.parameters(), lr=1e-4, betas=(0.5, 0.9))
    log = {"D_cost": [], "W": []}

    def step(i):
        for p in net_d.parameters():
            p.requires_grad = True
        for _ in range(CRITIC_ITERS):
            with CLOCK("input"):
                real = eight_gaussians(rng, BATCH_GP)
            net_d.zero_grad()
            d_real = net_d(real).mean()
            with torch.no_grad():
                fake = net_g(torch.randn(BATCH_GP, 2))
            d_fake = net_d(fake).mean()
            gp = gradient_penalty(net_d, real, fake)
            d_cost = d_fake - d_real + gp
            d_cost.backward()
            opt_d.step()
        with CLOCK("sync"):
            log["D_cost"].append(d_cost.item())
            log["W"].append((d_real - d_fake).item())
        for p in net_d.parameters():
            p.requires_grad = False
        net_g.zero_grad()
        g_cost = -net_d(net_g(torch.randn(BATCH_GP, 2))).mean()
        g_cost.backward()
        opt_g.step()
        return log["W"][-1]
    return Loop(step)


# -- knowledge distillation: a frozen teacher run forward on every batch -----------------------
def conv_net(widths: tuple[int, ...], classes: int = 10) -> nn.Module:
    """A VGG-style CIFAR net: 3x3 convolutions with batch norm and ReLU, max-pooling
    between the stages, global average pooling and a linear head."""
    layers, c_in = [], 3
    for k, w in enumerate(widths):
        layers += [nn.Conv2d(c_in, w, 3, padding=1, bias=False), nn.BatchNorm2d(w),
                   nn.ReLU(inplace=True)]
        if k % 2 == 1:
            layers.append(nn.MaxPool2d(2))
        c_in = w
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(c_in, classes))


def distillation_loss(student_logits, teacher_logits, labels, temperature=4.0, alpha=0.9):
    """Hinton et al.'s loss: the KL divergence between the softened distributions, times
    T^2, weighted against the cross-entropy on the true labels."""
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.softmax(teacher_logits / temperature, dim=1),
                    reduction="batchmean") * temperature * temperature
    return alpha * soft + (1 - alpha) * F.cross_entropy(student_logits, labels)


def cifar_like(n: int = 1024, seed: int = 4) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 3, 32, 32, generator=g),
                         torch.randint(0, 10, (n,), generator=g))


@case("pt_train_distill_frozen_teacher", "pytorch", "training", 4,
      facts("training", optimizer="sgd", dataloader_workers=0), split="tuned",
      warmup=3, also=("teacher_logits_cached",),
      tags=["distillation", "teacher", "paper_code"])
def pt_train_distill_frozen_teacher(variant):
    """Knowledge distillation as reference code writes it: a VGG-style teacher (32-32-64-64
    channels), trained beforehand, is put in ``eval()`` with ``requires_grad_(False)`` and
    run forward under ``torch.no_grad()`` on every batch of 32 CIFAR-shaped images from a
    shuffled ``DataLoader``; a small student (16-16-32-32) is trained with SGD (momentum
    0.9, weight decay 5e-4) on the KL divergence of the softened outputs (T = 4, times
    T^2, alpha 0.9) plus the cross-entropy, and its loss read with ``.item()`` each step.
    Beside it the truth has the teacher's logits computed once for the (unaugmented)
    data set and looked up per batch (``teacher_logits_cached``)."""
    torch.manual_seed(0)
    data = cifar_like()
    teacher = conv_net((32, 32, 64, 64)).eval().requires_grad_(False)
    student = conv_net((16, 16, 32, 32))
    opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    cached = variant == "teacher_logits_cached"
    if cached:
        with torch.no_grad():
            logits = torch.cat([teacher(x) for x, _ in DataLoader(data, batch_size=256)])
        data = TensorDataset(*data.tensors, logits)
    batches = epochs(DataLoader(data, batch_size=32, shuffle=True))
    losses = []

    def step(i):
        with CLOCK("input"):
            batch = next(batches)
        x, y = batch[0], batch[1]
        if cached:
            t_logits = batch[2]
        else:
            with torch.no_grad():
                t_logits = teacher(x)
        loss = distillation_loss(student(x), t_logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with CLOCK("sync"):
            losses.append(loss.item())
        return losses[-1]
    return Loop(step, batches.close)


# -- mixup drawn sample by sample in the collate_fn ---------------------------------------------
MIX_ALPHA, N_CLASSES = 0.4, 10


def mixup_collate(samples):
    """Mixup in the loader as per-sample code writes it: the batch stacked by
    ``default_collate``, then, sample by sample, a partner picked at random, a mixing
    weight drawn from Beta(alpha, alpha) and the images and one-hot targets blended."""
    x, y = default_collate(samples)
    y = F.one_hot(y, N_CLASSES).float()
    mixed_x, mixed_y = torch.empty_like(x), torch.empty_like(y)
    for k in range(x.size(0)):
        j = np.random.randint(x.size(0))
        lam = float(np.random.beta(MIX_ALPHA, MIX_ALPHA))
        mixed_x[k] = lam * x[k] + (1 - lam) * x[j]
        mixed_y[k] = lam * y[k] + (1 - lam) * y[j]
    return mixed_x, mixed_y


def mixup_collate_batched(samples):
    """The same per-sample mixup done on the whole batch: the partners and a vector of Beta
    weights drawn at once, two broadcast blends."""
    x, y = default_collate(samples)
    y = F.one_hot(y, N_CLASSES).float()
    n = x.size(0)
    j = torch.from_numpy(np.random.randint(n, size=n))
    lam = torch.from_numpy(np.random.beta(MIX_ALPHA, MIX_ALPHA, size=n).astype("float32"))
    return (lam.view(n, 1, 1, 1) * x + (1 - lam.view(n, 1, 1, 1)) * x[j],
            lam.view(n, 1) * y + (1 - lam.view(n, 1)) * y[j])


def soft_target_ce(logits, target):
    """Cross-entropy against the mixed (soft) targets."""
    return torch.sum(-target * F.log_softmax(logits, dim=1), dim=1).mean()


@case("pt_train_mixup_collate_loop", "pytorch", "training", 6,
      facts("training", optimizer="sgd", dataloader_workers=0), split="holdout",
      warmup=3, fix="mixup done on the whole batch in the collate_fn",
      also=("num_workers=2",), tags=["dataloader", "collate", "mixup", "paper_code"])
def pt_train_mixup_collate_loop(variant):
    """A CIFAR-shaped classifier trained with mixup (alpha 0.4) done in the
    ``DataLoader``'s ``collate_fn`` (``num_workers=0``, batches of 128, shuffled): after
    ``default_collate`` each sample gets a random partner and its own Beta-drawn weight,
    and the image and one-hot target are blended in a Python loop over the batch; the
    model (one 3x3 convolution of 8 channels, pooling, a linear head) is trained
    with SGD on the soft-target cross-entropy. The fix draws the partners and weights for
    the whole batch and blends it with two broadcast ops; the truth also has the
    per-sample collate run by two loader workers (``num_workers=2``)."""
    torch.manual_seed(0)
    np.random.seed(0)
    g = torch.Generator().manual_seed(9)
    data = TensorDataset(torch.randn(4096, 3, 32, 32, generator=g),
                         torch.randint(0, N_CLASSES, (4096,), generator=g))
    n = 0 if variant == "fix" else workers(variant)  # the fix keeps the main-process loader
    collate = mixup_collate_batched if variant == "fix" else mixup_collate
    loader = DataLoader(data, batch_size=128, shuffle=True, collate_fn=collate,
                        num_workers=n, persistent_workers=n > 0)
    batches = epochs(loader)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 16 * 16, N_CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        loss = soft_target_ce(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)
