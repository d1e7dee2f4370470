"""Held-out PyTorch cases of ordinary model kinds, written without looking at the advisor's
rules: the translation tutorial's GRU encoder and attention decoder trained one sentence
pair at a time with teacher forcing, a two-tower recommender trained with in-batch
negatives, quantization-aware training of a small CNN through ``torch.ao.quantization``'s
``prepare_qat``, and an autoregressive forecaster backtested series by series, each rolled
out 24 hours one call at a time.
"""

from __future__ import annotations

import random

import torch

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts

nn = torch.nn
F = torch.nn.functional


# -- host overhead: the seq2seq translation tutorial, one pair and one token at a time ------
SOS, EOS, MAX_LENGTH = 0, 1, 10
SRC_WORDS, TGT_WORDS, HIDDEN = 1500, 1200, 128


def sentence_pairs(n: int = 1000, seed: int = 4) -> list[tuple[list[int], list[int]]]:
    """Word-index pairs as the tutorial's ``tensorsFromPair`` makes them: 3 to 9 words, the
    end-of-sentence token appended."""
    rng = random.Random(seed)

    def sentence(words):
        return [rng.randrange(2, words) for _ in range(rng.randint(3, MAX_LENGTH - 1))] + [EOS]
    return [(sentence(SRC_WORDS), sentence(TGT_WORDS)) for _ in range(n)]


class EncoderRNN(nn.Module):
    """An embedding and a one-layer GRU."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(SRC_WORDS, HIDDEN)
        self.gru = nn.GRU(HIDDEN, HIDDEN, batch_first=True)

    def forward(self, x, hidden):
        return self.gru(self.embedding(x), hidden)


class AttnDecoderRNN(nn.Module):
    """The tutorial's Bahdanau attention decoder: the previous word's embedding (dropout
    0.1), additive attention of the hidden state over the encoder outputs, a GRU step on
    both and a log-softmax over the target words."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(TGT_WORDS, HIDDEN)
        self.Wa, self.Ua = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.Va = nn.Linear(HIDDEN, 1)
        self.gru = nn.GRU(2 * HIDDEN, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, TGT_WORDS)
        self.dropout = nn.Dropout(0.1)

    def forward_step(self, word, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(word))
        query = hidden.permute(1, 0, 2)
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(encoder_outputs)))
        weights = F.softmax(scores.squeeze(2).unsqueeze(1), dim=-1)
        context = torch.bmm(weights, encoder_outputs)
        output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
        return F.log_softmax(self.out(output), dim=-1), hidden


PAIRS_PER_BATCH = 32


@case("pt_train_seq2seq_gru_attention", "pytorch", "training", 2,
      facts("training", optimizer="sgd", batch=1), split="tuned", warmup=4,
      fix=f"batches of {PAIRS_PER_BATCH} padded pairs: the encoder in one nn.GRU call, "
          "the decoder one batched call a position",
      share_from_fix="host_overhead", fix_per_item=PAIRS_PER_BATCH,
      tags=["seq2seq", "attention", "teacher_forcing", "python_loop", "tutorial", "batch1"])
def pt_train_seq2seq_gru_attention(variant):
    """The PyTorch "translation with a sequence to sequence network and attention" tutorial
    as first written: one random sentence pair a step; the encoder (embedding, 128-wide
    GRU) fed one word a call in a Python loop, its outputs kept in a ``MAX_LENGTH x 128``
    tensor; the Bahdanau attention decoder run one target word a call with teacher forcing
    (the true previous word fed back); ``NLLLoss`` added word by word; two SGD optimizers
    (encoder, decoder), and ``loss.item() / target_length`` kept for the printed average.
    The fix is the tutorial's later batched form: 32 pairs padded to ``MAX_LENGTH``, the
    encoder in one ``nn.GRU`` call over the batch and the decoder one batched call a
    position, one ``NLLLoss`` over the logits."""
    torch.manual_seed(0)
    pairs, rng = sentence_pairs(), random.Random(9)
    encoder, decoder = EncoderRNN(), AttnDecoderRNN()
    enc_opt = torch.optim.SGD(encoder.parameters(), lr=0.01)
    dec_opt = torch.optim.SGD(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    totals = {"loss": 0.0}

    def batched(i):
        with CLOCK("input"):
            picked = [rng.choice(pairs) for _ in range(PAIRS_PER_BATCH)]
            src = torch.ones(PAIRS_PER_BATCH, MAX_LENGTH, dtype=torch.long)
            tgt = torch.ones(PAIRS_PER_BATCH, MAX_LENGTH, dtype=torch.long)
            for k, (s, t) in enumerate(picked):
                src[k, :len(s)] = torch.tensor(s)
                tgt[k, :len(t)] = torch.tensor(t)
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        encoder_outputs, hidden = encoder(src, None)
        word = torch.full((PAIRS_PER_BATCH, 1), SOS, dtype=torch.long)
        outputs = []
        for di in range(MAX_LENGTH):
            out, hidden = decoder.forward_step(word, hidden, encoder_outputs)
            outputs.append(out)
            word = tgt[:, di].unsqueeze(1)
        logits = torch.cat(outputs, dim=1)
        loss = criterion(logits.view(-1, TGT_WORDS), tgt.view(-1))
        loss.backward()
        enc_opt.step()
        dec_opt.step()
        with CLOCK("sync"):
            totals["loss"] += loss.item()
        return totals["loss"]

    def one_pair(i):
        with CLOCK("input"):
            src, tgt = rng.choice(pairs)
            input_tensor = torch.tensor(src, dtype=torch.long).view(1, -1)
            target_tensor = torch.tensor(tgt, dtype=torch.long).view(1, -1)
        hidden = torch.zeros(1, 1, HIDDEN)
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        input_length, target_length = input_tensor.size(1), target_tensor.size(1)
        encoder_outputs = torch.zeros(1, MAX_LENGTH, HIDDEN)
        for ei in range(input_length):
            out, hidden = encoder(input_tensor[:, ei:ei + 1], hidden)
            encoder_outputs[0, ei] = out[0, 0]
        word = torch.tensor([[SOS]])
        loss = 0
        for di in range(target_length):
            out, hidden = decoder.forward_step(word, hidden, encoder_outputs)
            loss += criterion(out[:, 0], target_tensor[:, di])
            word = target_tensor[:, di:di + 1]  # teacher forcing
        loss.backward()
        enc_opt.step()
        dec_opt.step()
        with CLOCK("sync"):
            totals["loss"] += loss.item() / target_length
        return totals["loss"]
    return Loop(batched if variant == "fix" else one_pair)


# -- compute: a two-tower recommender trained with in-batch negatives ------------------------
USERS, ITEMS, CATEGORIES, TOWER = 20000, 30000, 200, 64


class Tower(nn.Module):
    """An id embedding and a side-feature embedding, concatenated, through a 2-layer MLP
    to a normalised 64-wide vector."""

    def __init__(self, ids: int, side: int):
        super().__init__()
        self.ids, self.side = nn.Embedding(ids, TOWER), nn.Embedding(side, 16)
        self.mlp = nn.Sequential(nn.Linear(TOWER + 16, 256), nn.ReLU(), nn.Linear(256, TOWER))

    def forward(self, ids, side):
        return F.normalize(self.mlp(torch.cat([self.ids(ids), self.side(side)], dim=1)), dim=1)


@case("pt_train_two_tower_inbatch", "pytorch", "training", 4,
      facts("training", optimizer="adam"), split="holdout", warmup=3,
      tags=["recsys", "two_tower", "contrastive"])
def pt_train_two_tower_inbatch(variant):
    """A retrieval model as the two-tower tutorials write it: a user tower (user id and
    age-bucket embeddings, MLP 80-256-64) and an item tower (item id and category
    embeddings, same MLP), both L2-normalised; each step takes the next 1,024 (user, item)
    interactions of a shuffled in-memory log, scores every user against every item of the
    batch in one matmul (temperature 0.05) and trains with cross-entropy on the diagonal
    (in-batch negatives), Adam.  Nothing in it waits: the matmuls, the embedding
    gradients and Adam's update of the tables are the step."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(12)
    n = 1024 * 64
    users = torch.randint(0, USERS, (n,), generator=g)
    items = torch.randint(0, ITEMS, (n,), generator=g)
    ages = torch.randint(0, 10, (USERS,), generator=g)
    cats = torch.randint(0, CATEGORIES, (ITEMS,), generator=g)
    user_tower, item_tower = Tower(USERS, 10), Tower(ITEMS, CATEGORIES)
    params = list(user_tower.parameters()) + list(item_tower.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    state = {"order": torch.randperm(n, generator=g)}

    def step(i):
        with CLOCK("input"):
            k = (i % 64) * 1024
            idx = state["order"][k:k + 1024]
            u, it = users[idx], items[idx]
        scores = user_tower(u, ages[u]) @ item_tower(it, cats[it]).T / 0.05
        loss = F.cross_entropy(scores, torch.arange(len(idx)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step)


# -- compute: quantization-aware training with fake-quant modules -----------------------------
class QatNet(nn.Module):
    """A small MNIST-style CNN ready for eager-mode quantization: quant and dequant stubs,
    two conv-batchnorm-ReLU blocks (fused for QAT), max pooling and a linear head."""

    def __init__(self):
        super().__init__()
        tq = torch.ao.quantization
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1, self.bn1 = nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.relu1, self.relu2 = nn.ReLU(), nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = self.pool(self.relu1(self.bn1(self.conv1(self.quant(x)))))
        x = self.pool(self.relu2(self.bn2(self.conv2(x))))
        return self.dequant(self.fc(torch.flatten(x, 1)))


def qat_model() -> nn.Module:
    """``QatNet`` fused and prepared as the quantization tutorial does:
    ``fuse_modules_qat`` on the conv-bn-relu blocks, the fbgemm QAT qconfig,
    ``prepare_qat``."""
    tq = torch.ao.quantization
    model = QatNet().train()
    model = tq.fuse_modules_qat(model, [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"]])
    model.qconfig = tq.get_default_qat_qconfig("fbgemm")
    return tq.prepare_qat(model)


@case("pt_train_qat_fake_quant", "pytorch", "training", 4,
      facts("training", optimizer="sgd"), split="holdout", warmup=3,
      also=("observers_frozen",), tags=["quantization", "qat", "fake_quant", "cnn"])
def pt_train_qat_fake_quant(variant):
    """Quantization-aware training as the eager-mode quantization tutorial writes it: a
    small CNN (QuantStub, conv-bn-ReLU 16 and 32 fused with ``fuse_modules_qat``, max
    pooling, linear head, DeQuantStub) given ``get_default_qat_qconfig("fbgemm")`` and
    ``prepare_qat``, so every weight and activation passes a ``FakeQuantize`` with a moving
    min/max observer; trained with SGD (momentum 0.9) on 28x28 images in memory, 64 a
    batch.  Nothing in it waits: the convolutions, the fake quantization and the
    observers' statistics are the step.  Beside it the truth times what the tutorial does
    after a few epochs (``observers_frozen``: ``model.apply(disable_observer)`` and
    ``model.apply(freeze_bn_stats)``, the fake quantization kept), a later phase of
    training rather than a fix."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(8)
    images = torch.randn(64 * 32, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (64 * 32,), generator=g)
    model = qat_model()
    if variant == "observers_frozen":
        model.apply(torch.ao.quantization.disable_observer)
        model.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(i):
        with CLOCK("input"):
            k = (i % 32) * 64
            x, y = images[k:k + 64], labels[k:k + 64]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return Loop(step)


# -- host overhead: an autoregressive forecaster rolled out one series and one step a call ---
LAGS, HORIZON, SERIES_PER_STEP = 48, 24, 8


class LagForecaster(nn.Module):
    """An MLP from the last 48 hourly values and the next hour's sine and cosine to the
    next value."""

    def __init__(self, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LAGS + 2, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, lags, hour):
        return self.net(torch.cat([lags, hour], dim=1))


def hour_features(t: torch.Tensor) -> torch.Tensor:
    """Sine and cosine of the hour of day, last dimension 2."""
    angle = 2 * torch.pi * (t % 24) / 24
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1)


def rollout(model, history, start):
    """Forecast ``HORIZON`` hours after ``history`` (batch x LAGS values), one call an
    hour, each prediction appended to the lag window the next call reads."""
    hours = hour_features(torch.arange(start + LAGS, start + LAGS + HORIZON,
                                       dtype=torch.float32))
    window, preds = history, []
    for k in range(HORIZON):
        y = model(window, hours[k].expand(window.size(0), 2))
        preds.append(y)
        window = torch.cat([window[:, 1:], y], dim=1)
    return torch.cat(preds, dim=1)


@case("pt_infer_forecast_rollout_24", "pytorch", "inference", 2,
      facts("inference", batch=1), split="holdout", warmup=3,
      fix=f"the {SERIES_PER_STEP} series of a step rolled out together, one batched call "
          "an hour",
      share_from_fix="host_overhead",
      tags=["forecasting", "autoregressive", "python_loop", "batch1"])
def pt_infer_forecast_rollout_24(variant):
    """Backtesting an autoregressive load forecaster (an MLP from the last 48 hourly
    values and the hour-of-day sine and cosine to the next value, 128 wide) under
    ``torch.no_grad()``: each step takes the next 8 meter series and, series by series,
    rolls the forecast out 24 hours one call at a time, each prediction appended to the
    lag window the next call reads; the series' mean absolute error is read with
    ``.item()`` into a Python list.  The fix rolls the 8 series out together (batch 8,
    still 24 calls) and reads their errors with one ``.tolist()``."""
    torch.manual_seed(0)
    model = LagForecaster().eval()
    g = torch.Generator().manual_seed(2)
    t = torch.arange(512 * 8, dtype=torch.float32)
    load = (torch.sin(2 * torch.pi * t / 24) + 0.1 * torch.randn(256, t.numel(), generator=g))
    errors: list[float] = []

    def step(i):
        with CLOCK("input"):
            rows = torch.arange(i * SERIES_PER_STEP, (i + 1) * SERIES_PER_STEP) % 256
            start = (i * 37) % (t.numel() - LAGS - HORIZON)
            window = load[rows, start:start + LAGS + HORIZON]
            history, actual = window[:, :LAGS], window[:, LAGS:]
        with torch.no_grad():
            if variant == "fix":
                mae = (rollout(model, history, start) - actual).abs().mean(dim=1)
                with CLOCK("sync"):
                    errors.extend(mae.tolist())
                return errors[-1]
            for s in range(SERIES_PER_STEP):
                forecast = rollout(model, history[s:s + 1], start)
                mae = (forecast - actual[s:s + 1]).abs().mean()
                with CLOCK("sync"):
                    errors.append(mae.item())
        return errors[-1]
    return Loop(step)
