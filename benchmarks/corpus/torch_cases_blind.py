"""Held-out PyTorch cases of programs a user of a CPU box writes, written without looking
at the advisor's rules: a small U-Net trained for binary segmentation with a Dice loss,
the DQN tutorial's loop (a ``deque`` replay memory of transitions sampled and
concatenated every step, a soft update of the target network through its state dict),
a CTC speech model whose ``Dataset`` computes each clip's log-mel spectrogram with
``torch.stft``, and a learning-rate sweep training its small models one after another in
one process.
"""

from __future__ import annotations

import math
import random
from collections import deque, namedtuple

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from corpus.common import CLOCK, case
from corpus.torch_cases import LOADER_FIX, LOADER_VARIANTS, Loop, facts, workers
from corpus.torch_cases_users import epochs

nn = torch.nn
F = torch.nn.functional


# -- compute: a small U-Net with a Dice loss -------------------------------------------------
def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class UNet(nn.Module):
    """A three-level U-Net (8-16-32 channels, a 64-channel bottleneck), max-pool down,
    transposed convolutions up, the skips concatenated, one logit per pixel."""

    def __init__(self, base: int = 8):
        super().__init__()
        c = [base, base * 2, base * 4, base * 8]
        self.downs = nn.ModuleList([double_conv(1, c[0]), double_conv(c[0], c[1]),
                                    double_conv(c[1], c[2])])
        self.bottom = double_conv(c[2], c[3])
        self.ups = nn.ModuleList(nn.ConvTranspose2d(c[k + 1], c[k], 2, stride=2)
                                 for k in (2, 1, 0))
        self.dec = nn.ModuleList(double_conv(2 * c[k], c[k]) for k in (2, 1, 0))
        self.head = nn.Conv2d(c[0], 1, 1)

    def forward(self, x):
        skips = []
        for down in self.downs:
            x = down(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, dec, skip in zip(self.ups, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], 1))
        return self.head(x)


def dice_loss(logits: torch.Tensor, target: torch.Tensor, eps: float = 1.0) -> torch.Tensor:
    """The soft Dice loss of the sigmoid of the logits, per image, averaged."""
    p = torch.sigmoid(logits).flatten(1)
    t = target.flatten(1)
    inter = (p * t).sum(1)
    return (1 - (2 * inter + eps) / (p.sum(1) + t.sum(1) + eps)).mean()


def blobs(n: int, size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy grayscale images of one or two bright discs and their 0/1 masks."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    masks = torch.zeros(n, 1, size, size)
    for k in range(n):
        for _ in range(int(torch.randint(1, 3, (1,), generator=g))):
            cy, cx = torch.randint(8, size - 8, (2,), generator=g).tolist()
            r = int(torch.randint(4, 12, (1,), generator=g))
            masks[k, 0] += (((yy - cy) ** 2 + (xx - cx) ** 2) < r * r).float()
    masks = masks.clamp_(max=1)
    images = masks * 0.6 + 0.4 * torch.rand(n, 1, size, size, generator=g)
    return images, masks


@case("pt_train_unet_dice", "pytorch", "training", 5,
      facts("training", optimizer="adam", dataloader_workers=0), split="holdout", warmup=3,
      tags=["segmentation", "unet", "dice"])
def pt_train_unet_dice(variant):
    """Binary segmentation with a small U-Net (three levels of 8, 16 and 32 channels,
    batch norm, transposed convolutions up) on 512 64x64 grayscale images and their masks
    held in memory, a shuffled ``DataLoader(batch_size=8)`` without workers, the loss the
    soft Dice loss of the sigmoid plus ``BCEWithLogitsLoss``, Adam (lr 1e-3).  Nothing but
    the model's work in the step."""
    torch.manual_seed(0)
    images, masks = blobs(512, 64, seed=11)
    batches = epochs(DataLoader(TensorDataset(images, masks), batch_size=8, shuffle=True))
    model = UNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()

    def step(i):
        with CLOCK("input"):
            x, y = next(batches)
        logits = model(x)
        loss = dice_loss(logits, y) + bce(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)


# -- the DQN tutorial: a deque replay memory sampled and concatenated every step -----------------
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class CartPole:
    """Gym's CartPole-v1 dynamics in plain Python (Euler steps of 0.02 s), reset when the
    pole falls or the cart leaves the track."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.reset()

    def reset(self):
        self.s = [self.rng.uniform(-0.05, 0.05) for _ in range(4)]
        return list(self.s)

    def step(self, action: int):
        x, x_dot, th, th_dot = self.s
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(th), math.sin(th)
        temp = (force + 0.05 * th_dot ** 2 * sin) / 1.1
        th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * th_acc * cos / 1.1
        self.s = [x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot,
                  th_dot + 0.02 * th_acc]
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.2095
        return list(self.s), 1.0, done


class ReplayMemory:
    """The tutorial's replay memory: a ``deque(maxlen=capacity)`` of transitions whose
    fields are tensors, sampled with ``random.sample``."""

    def __init__(self, capacity: int):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size: int):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class TensorMemory:
    """A ring buffer of preallocated tensors, one row per transition, sampled with
    ``torch.randint`` and gathered by index."""

    def __init__(self, capacity: int, n_obs: int):
        self.states = torch.zeros(capacity, n_obs)
        self.next_states = torch.zeros(capacity, n_obs)
        self.actions = torch.zeros(capacity, 1, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.final = torch.zeros(capacity, dtype=torch.bool)
        self.capacity, self.n, self.at = capacity, 0, 0

    def push(self, state, action, next_state, reward):
        k = self.at
        self.states[k] = state[0]
        self.actions[k] = action[0]
        self.rewards[k] = reward[0]
        self.final[k] = next_state is None
        if next_state is not None:
            self.next_states[k] = next_state[0]
        self.at, self.n = (k + 1) % self.capacity, min(self.n + 1, self.capacity)

    def sample(self, batch_size: int):
        idx = torch.randint(self.n, (batch_size,))
        return (self.states[idx], self.actions[idx], self.rewards[idx], self.next_states[idx],
                ~self.final[idx])

    def __len__(self):
        return self.n


class DQN(nn.Module):
    def __init__(self, n_obs: int = 4, n_actions: int = 2, hidden: int = 128):
        super().__init__()
        self.layer1, self.layer2 = nn.Linear(n_obs, hidden), nn.Linear(hidden, hidden)
        self.layer3 = nn.Linear(hidden, n_actions)

    def forward(self, x):
        return self.layer3(F.relu(self.layer2(F.relu(self.layer1(x)))))


DQN_BATCH, GAMMA, TAU, ENV_STEPS = 128, 0.99, 0.005, 4


@case("pt_train_dqn_replay_deque", "pytorch", "training", 6,
      facts("training", optimizer="adamw"), split="tuned", warmup=3,
      fix="a replay memory of preallocated tensors sampled with torch.randint",
      share_from_fix="host_overhead", share_variant="adamw_fused",
      tags=["reinforcement", "dqn", "replay_buffer", "tutorial"])
def pt_train_dqn_replay_deque(variant):
    """The PyTorch DQN tutorial's training loop on CartPole (the dynamics in Python): per
    environment step an epsilon-greedy action from ``policy_net(state).max(1)``, the
    transition pushed as tensors onto a ``deque`` replay memory of 10,000, then
    ``optimize_model``: 128 transitions drawn with ``random.sample``, regrouped with
    ``Transition(*zip(*transitions))``, a mask of the non-final next states built in Python
    and the fields joined with ``torch.cat``; the Huber loss of the Q-values against the
    target network's, ``clip_grad_value_``, ``AdamW(amsgrad=True)``, and the target
    network soft-updated key by key through ``state_dict()``.  A captured step is 4
    environment steps.  The fix keeps the memory in preallocated tensors and samples it
    with ``torch.randint``; the optimizer's per-tensor loop is measured apart: its share is
    what ``AdamW(amsgrad=True, fused=True)`` saves (``adamw_fused``)."""
    torch.manual_seed(0)
    random.seed(0)
    fixed = variant == "fix"
    env = CartPole(seed=3)
    policy_net, target_net = DQN(), DQN()
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = torch.optim.AdamW(policy_net.parameters(), lr=1e-4, amsgrad=True,
                                  fused=variant == "adamw_fused" or None)
    memory = TensorMemory(10000, 4) if fixed else ReplayMemory(10000)
    state = torch.tensor(env.reset(), dtype=torch.float32).unsqueeze(0)
    done_steps = [0]
    rng = random.Random(5)

    def select_action(s):
        eps = 0.05 + 0.85 * math.exp(-done_steps[0] / 1000)
        done_steps[0] += 1
        if rng.random() > eps:
            with torch.no_grad():
                return policy_net(s).max(1).indices.view(1, 1)
        return torch.tensor([[rng.randrange(2)]], dtype=torch.long)

    def batch_of_deque():
        transitions = memory.sample(DQN_BATCH)
        batch = Transition(*zip(*transitions))
        non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)),
                                      dtype=torch.bool)
        non_final_next = torch.cat([s for s in batch.next_state if s is not None])
        return (torch.cat(batch.state), torch.cat(batch.action), torch.cat(batch.reward),
                non_final_next, non_final_mask)

    def optimize_model():
        with CLOCK("input"):
            if fixed:
                states, actions, rewards, nexts, mask = memory.sample(DQN_BATCH)
                nexts = nexts[mask]
            else:
                states, actions, rewards, nexts, mask = batch_of_deque()
        q = policy_net(states).gather(1, actions)
        next_values = torch.zeros(DQN_BATCH)
        with torch.no_grad():
            next_values[mask] = target_net(nexts).max(1).values
        expected = next_values * GAMMA + rewards
        loss = F.smooth_l1_loss(q, expected.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()

    def env_step():
        nonlocal state
        action = select_action(state)
        obs, reward, terminated = env.step(action.item())
        reward = torch.tensor([reward])
        next_state = None if terminated else torch.tensor(obs, dtype=torch.float32).unsqueeze(0)
        memory.push(state, action, next_state, reward)
        state = (torch.tensor(env.reset(), dtype=torch.float32).unsqueeze(0) if terminated
                 else next_state)
        optimize_model()
        target_sd, policy_sd = target_net.state_dict(), policy_net.state_dict()
        for key in policy_sd:
            target_sd[key] = policy_sd[key] * TAU + target_sd[key] * (1 - TAU)
        target_net.load_state_dict(target_sd)

    while len(memory) < 1000:  # the memory filled by a random policy before training
        s = torch.tensor(env.s, dtype=torch.float32).unsqueeze(0)
        obs, r, term = env.step(rng.randrange(2))
        nxt = None if term else torch.tensor(obs, dtype=torch.float32).unsqueeze(0)
        memory.push(s, torch.tensor([[rng.randrange(2)]]), nxt, torch.tensor([r]))
        if term:
            env.reset()
    state = torch.tensor(env.reset(), dtype=torch.float32).unsqueeze(0)

    def step(i):
        for _ in range(ENV_STEPS):
            env_step()
    return Loop(step)


# -- input: a CTC model on log-mel spectrograms made in the Dataset with torch.stft ---------------
CHARS = " abcdefghijklmnopqrstuvwxyz'"
SAMPLE_RATE, RECORDED_RATE, N_FFT, HOP, N_MELS = 16000, 48000, 400, 160, 64


def resample(wave: torch.Tensor, orig: int, new: int, width: int = 6) -> torch.Tensor:
    """Band-limited sinc resampling with a Hann window, as
    ``torchaudio.functional.resample`` does it: the kernel made for the two rates, then
    one strided ``conv1d`` over the clip."""
    g = math.gcd(orig, new)
    orig, new = orig // g, new // g
    base = min(orig, new) * 0.99
    pad = math.ceil(width * orig / base)
    idx = torch.arange(-pad, pad + orig, dtype=torch.float64)[None] / orig
    t = (torch.arange(0, -new, -1, dtype=torch.float64)[:, None] / new + idx) * base
    t = t.clamp(-width, width)
    window = torch.cos(t * math.pi / width / 2) ** 2
    t = t * math.pi
    kernel = torch.where(t == 0, torch.tensor(1.0, dtype=torch.float64), t.sin() / t)
    kernel = (kernel * window * base / orig).to(wave.dtype)[:, None]
    out = F.conv1d(F.pad(wave[None, None], (pad, pad + orig)), kernel, stride=orig)
    return out[0].T.reshape(-1)[:math.ceil(new * wave.numel() / orig)]


def mel_filters(n_mels: int = N_MELS, n_fft: int = N_FFT, sr: int = SAMPLE_RATE) -> torch.Tensor:
    """Triangular mel filters (n_fft // 2 + 1 bins x n_mels), as ``torchaudio`` makes them."""
    def mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)
    pts = torch.linspace(mel(0.0), mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (pts / 2595.0) - 1.0)
    freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1)
    lo, mid, hi = hz[:-2], hz[1:-1], hz[2:]
    up = (freqs[:, None] - lo) / (mid - lo)
    down = (hi - freqs[:, None]) / (hi - mid)
    return torch.clamp(torch.minimum(up, down), min=0.0)


class SpeechClips(Dataset):
    """Utterances of 1 to 2.5 s recorded at 48 kHz with their transcripts; an item is the
    clip resampled to 16 kHz, its speed perturbed (0.9, 1.0 or 1.1 by resampling) and its
    normalised log-mel spectrogram (``torch.stft``, 25 ms windows every 10 ms,
    64 mel bands), with SpecAugment-style time and frequency masks, and the transcript's
    character indices."""

    def __init__(self, n: int = 256, seed: int = 13):
        g = torch.Generator().manual_seed(seed)
        self.clips, self.texts = [], []
        for _ in range(n):
            length = int(torch.randint(16000, 40001, (1,), generator=g)) * 3
            t = torch.arange(length) / RECORDED_RATE
            f0 = 100 + 200 * torch.rand(1, generator=g)
            wave = torch.sin(2 * math.pi * f0 * t) * 0.3 + 0.05 * torch.randn(length, generator=g)
            self.clips.append(wave)
            n_chars = length // 4800
            self.texts.append(torch.randint(1, len(CHARS) + 1, (n_chars,), generator=g))
        self.window = torch.hann_window(N_FFT)
        self.mel = mel_filters()
        self.rng = random.Random(seed)

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, k):
        wave = resample(self.clips[k], RECORDED_RATE, SAMPLE_RATE)
        speed = self.rng.choice((0.9, 1.0, 1.1))  # speed perturbation, as Kaldi recipes do
        if speed != 1.0:
            wave = resample(wave, int(SAMPLE_RATE * speed), SAMPLE_RATE)
        spec = torch.stft(wave, N_FFT, HOP, window=self.window, return_complex=True)
        feats = torch.log(spec.abs().pow(2).T @ self.mel + 1e-6)
        feats = (feats - feats.mean(0)) / (feats.std(0) + 1e-5)
        for _ in range(2):  # SpecAugment: two frequency masks, two time masks
            f = self.rng.randrange(0, 8)
            f0 = self.rng.randrange(0, N_MELS - f)
            feats[:, f0:f0 + f] = 0
            t = self.rng.randrange(0, 20)
            t0 = self.rng.randrange(0, feats.size(0) - t)
            feats[t0:t0 + t, :] = 0
        return feats, self.texts[k]


def collate_speech(batch):
    """Spectrograms and transcripts padded to the batch's longest, with their lengths."""
    feats, texts = zip(*batch)
    return (nn.utils.rnn.pad_sequence(feats, batch_first=True),
            torch.tensor([f.size(0) for f in feats]),
            nn.utils.rnn.pad_sequence(texts, batch_first=True),
            torch.tensor([t.numel() for t in texts]))


class SpeechCTC(nn.Module):
    """Two strided 1-D convolutions over the mel bands (a quarter of the frames), a GRU of
    64 and a linear layer to the 28 characters and the CTC blank."""

    def __init__(self, hidden: int = 64):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(N_MELS, hidden, 3, stride=2, padding=1), nn.GELU(),
                                  nn.Conv1d(hidden, hidden, 3, stride=2, padding=1), nn.GELU())
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, len(CHARS) + 1)

    def forward(self, x):
        h = self.conv(x.transpose(1, 2)).transpose(1, 2)
        return self.out(self.gru(h)[0])


@case("pt_train_ctc_stft_dataset", "pytorch", "training", 3,
      facts("training", optimizer="adam", dataloader_workers=0), split="tuned", warmup=3,
      fix=LOADER_FIX, variants=LOADER_VARIANTS,
      tags=["speech", "ctc", "stft", "dataloader"])
def pt_train_ctc_stft_dataset(variant):
    """A small CTC speech recogniser (two strided ``Conv1d`` over 64 mel bands, a GRU of
    64, 28 characters and the blank) trained with Adam on 256 utterances of 1-2.5 s
    recorded at 48 kHz; the ``Dataset`` resamples each clip to 16 kHz (a windowed-sinc
    ``conv1d`` as ``torchaudio.functional.resample``), perturbs its speed by 0.9, 1.0 or
    1.1 the same way, computes its log-mel spectrogram with
    ``torch.stft`` and a mel matrix, normalises it and applies SpecAugment masks; a
    ``DataLoader(batch_size=16, shuffle=True, collate_fn=...)`` without workers pads the
    batch, and ``nn.CTCLoss`` takes the log-softmax (time first) with the output lengths."""
    torch.manual_seed(0)
    n = workers(variant)
    loader = DataLoader(SpeechClips(), batch_size=16, shuffle=True, collate_fn=collate_speech,
                        num_workers=n, persistent_workers=n > 0)
    batches = epochs(loader)
    model = SpeechCTC()
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)

    def step(i):
        with CLOCK("input"):
            feats, feat_lens, texts, text_lens = next(batches)
        log_probs = model(feats).log_softmax(2).transpose(0, 1)
        loss = ctc(log_probs, texts, (feat_lens + 3) // 4, text_lens)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step, batches.close)


# -- host overhead: a learning-rate sweep of small models trained one after another ------------
SWEEP_LRS = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
SWEEP_EPOCHS, SWEEP_BATCH = 25, 32


def tabular(n: int = 512, d: int = 20, seed: int = 17):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(n, 1, generator=g)
    return x[:384], y[:384], x[384:], y[384:]


def sweep_model() -> nn.Sequential:
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 1))


@case("pt_train_lr_sweep_models", "pytorch", "training", 4,
      facts("training", optimizer="adam"), split="tuned", warmup=2,
      fix="the sweep's 8 models stacked and trained at once with torch.func.vmap",
      share_from_fix="host_overhead", fix_per_item=len(SWEEP_LRS),
      tags=["sweep", "small_model", "python_loop", "vmap"])
def pt_train_lr_sweep_models(variant):
    """A learning-rate sweep in one process: for each of 8 rates a fresh MLP
    (20-64-64-1) and ``Adam`` are made and trained for 25 epochs on 384 rows (shuffled
    with ``torch.randperm`` and sliced into batches of 32, MSE loss), each epoch ending
    with the validation loss on 128 rows read with ``.item()``; a captured step is one
    epoch of one model.  The fix stacks the 8 models' parameters
    (``torch.func.stack_module_state``) and trains them at once: one ``vmap`` of
    ``functional_call`` per batch, one backward, an Adam update written on the stacked
    tensors with each model's rate, the 8 validation losses read with one ``.tolist()``."""
    torch.manual_seed(0)
    x, y, xv, yv = tabular()
    history: dict[float, list[float]] = {lr: [] for lr in SWEEP_LRS}
    if variant == "fix":
        return Loop(stacked_sweep(x, y, xv, yv, history))
    current: dict = {}

    def step(i):
        k = (i // SWEEP_EPOCHS) % len(SWEEP_LRS)
        if current.get("k") != k:
            lr = SWEEP_LRS[k]
            model = sweep_model()
            current.update(k=k, lr=lr, model=model,
                           opt=torch.optim.Adam(model.parameters(), lr=lr))
        model, opt = current["model"], current["opt"]
        model.train()
        perm = torch.randperm(x.size(0))
        for b in range(0, x.size(0), SWEEP_BATCH):
            idx = perm[b:b + SWEEP_BATCH]
            loss = F.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            with CLOCK("sync"):
                history[current["lr"]].append(F.mse_loss(model(xv), yv).item())
    return Loop(step)


def stacked_sweep(x, y, xv, yv, history):
    """One epoch of all the sweep's models at once (``torch.func``), as ``step(i)``."""
    from torch.func import functional_call, stack_module_state

    models = [sweep_model() for _ in SWEEP_LRS]
    params, _ = stack_module_state(models)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    base = sweep_model().to("meta")
    lrs = torch.tensor(SWEEP_LRS)
    m = {k: torch.zeros_like(v) for k, v in params.items()}
    v2 = {k: torch.zeros_like(v) for k, v in params.items()}
    t = [0]

    def forward(p, xb):
        return functional_call(base, p, (xb,))

    batched = torch.func.vmap(forward, in_dims=(0, None))

    def adam_update():
        t[0] += 1
        c1, c2 = 1 - 0.9 ** t[0], 1 - 0.999 ** t[0]
        with torch.no_grad():
            for k, p in params.items():
                g = p.grad
                m[k].mul_(0.9).add_(g, alpha=0.1)
                v2[k].mul_(0.999).addcmul_(g, g, value=0.001)
                step_size = (lrs / c1).view(-1, *([1] * (p.dim() - 1)))
                p.sub_(step_size * m[k] / ((v2[k] / c2).sqrt() + 1e-8))
                p.grad = None

    def step(i):
        perm = torch.randperm(x.size(0))
        for b in range(0, x.size(0), SWEEP_BATCH):
            idx = perm[b:b + SWEEP_BATCH]
            out = batched(params, x[idx])  # (models, batch, 1)
            # each model's mean loss, summed: each model's gradient is its own loss's
            loss = ((out - y[idx]) ** 2).mean(dim=(1, 2)).sum()
            loss.backward()
            adam_update()
        with torch.no_grad():
            val = ((batched(params, xv) - yv) ** 2).mean(dim=(1, 2))
            with CLOCK("sync"):
                for lr, v in zip(SWEEP_LRS, val.tolist()):
                    history[lr].append(v)
    return step
