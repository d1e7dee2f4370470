"""PyTorch inference services of kinds the others lack, written without looking at the
advisor's rules: a Siamese verification service that scores the pairs of a request one
pair at a time, a segmentation model run over a large image tile by tile with overlap and
the tiles stitched back, an autoencoder anomaly detector over a sensor stream whose
reconstruction errors are compared with a threshold in NumPy, and a CRNN text recogniser
whose CTC greedy decode collapses repeats by indexing the best path's tensor position by
position.
"""

from __future__ import annotations

import numpy as np
import torch

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts

nn = torch.nn
F = torch.nn.functional


def conv_bn_relu(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True)]


# -- a Siamese verification service, one pair at a time ----------------------------------------
class SiameseNet(nn.Module):
    """The twin of a Siamese network: three conv-BN-ReLU blocks (8, 16, 32 channels, the
    first two max-pooled) on a 28x28 grayscale crop (MNIST-sized), global average pooling
    and a 64-d embedding."""

    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(*conv_bn_relu(1, 8), nn.MaxPool2d(2),
                                 *conv_bn_relu(8, 16), nn.MaxPool2d(2),
                                 *conv_bn_relu(16, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(32, 128), nn.ReLU(inplace=True), nn.Linear(128, 64))

    def forward_once(self, x):
        return self.fc(self.cnn(x))

    def forward(self, a, b):
        return self.forward_once(a), self.forward_once(b)


PAIRS, MARGIN = 16, 1.0


@case("pt_infer_siamese_pairs_loop", "pytorch", "inference", 3, facts("inference", batch=1),
      split="holdout", warmup=3, fix=f"the {PAIRS} pairs of a request as one batch",
      share_from_fix="host_overhead", tags=["siamese", "python_loop", "batch1", "server"])
def pt_infer_siamese_pairs_loop(variant):
    """A handwriting verification endpoint: each step answers one request of 16 pairs of
    28x28 grayscale crops; per pair the Siamese network (in ``eval()`` under
    ``torch.no_grad()``) embeds both crops (``net(a.unsqueeze(0), b.unsqueeze(0))``), the
    Euclidean distance is taken with ``F.pairwise_distance`` and read with ``.item()``
    against the margin, one answer per pair.  The fix stacks the request's pairs into two
    batches of 16, one call, the distances read with one ``.tolist()``."""
    torch.manual_seed(0)
    net = SiameseNet().eval()
    crops = torch.rand(10 * 2 * PAIRS, 1, 28, 28, generator=torch.Generator().manual_seed(21))

    def step(i):
        k = (i % 10) * 2 * PAIRS
        a, b = crops[k:k + PAIRS], crops[k + PAIRS:k + 2 * PAIRS]
        with torch.no_grad():
            if variant == "fix":
                ea, eb = net(a, b)
                dist = F.pairwise_distance(ea, eb).tolist()
                return [(d, d < MARGIN) for d in dist]
            answers = []
            for p in range(PAIRS):
                ea, eb = net(a[p].unsqueeze(0), b[p].unsqueeze(0))
                d = F.pairwise_distance(ea, eb).item()
                answers.append((d, d < MARGIN))
            return answers
    return Loop(step)


# -- a segmentation model over a large image, tile by tile -------------------------------------
class TinyUNet(nn.Module):
    """A two-level U-Net (8 and 16 channels, one skip connection) with 4 output classes."""

    def __init__(self, classes: int = 4):
        super().__init__()
        self.enc1 = nn.Sequential(*conv_bn_relu(3, 8), *conv_bn_relu(8, 8))
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), *conv_bn_relu(8, 16), *conv_bn_relu(16, 16))
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec = nn.Sequential(*conv_bn_relu(16, 8))
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        s = self.enc1(x)
        return self.head(self.dec(torch.cat([self.up(self.enc2(s)), s], 1)))


IMAGE, TILE, OVERLAP = 256, 64, 16


def tile_origins(size: int = IMAGE, tile: int = TILE, overlap: int = OVERLAP) -> list[int]:
    stride = tile - overlap
    return list(range(0, size - tile + 1, stride))


@case("pt_infer_tiled_segmentation", "pytorch", "inference", 3, facts("inference", batch=1),
      split="tuned", warmup=2, fix="the 25 tiles of an image as one batch",
      share_from_fix="host_overhead", tags=["segmentation", "tiling", "python_loop", "batch1"])
def pt_infer_tiled_segmentation(variant):
    """Semantic segmentation of a 256x256 aerial image with a small U-Net trained on 64x64
    crops: the image is cut into 25 tiles of 64x64 overlapping by 16 pixels, each tile
    runs through the model on its own (batch 1, ``eval()``, ``torch.no_grad()``), its
    logits are added into a full-size canvas and a count map, and the averaged logits'
    ``argmax`` is the mask.  The fix stacks the 25 tiles into one batch, one call, and
    stitches the outputs the same way."""
    torch.manual_seed(0)
    model = TinyUNet().eval()
    images = torch.rand(8, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(22))
    origins = [(y, x) for y in tile_origins() for x in tile_origins()]

    def step(i):
        img = images[i % 8:i % 8 + 1]
        canvas = torch.zeros(1, 4, IMAGE, IMAGE)
        count = torch.zeros(1, 1, IMAGE, IMAGE)
        with torch.no_grad():
            if variant == "fix":
                tiles = torch.cat([img[:, :, y:y + TILE, x:x + TILE] for y, x in origins])
                outs = model(tiles)
            else:
                outs = [model(img[:, :, y:y + TILE, x:x + TILE]) for y, x in origins]
            for k, (y, x) in enumerate(origins):
                canvas[:, :, y:y + TILE, x:x + TILE] += outs[k:k + 1] if variant == "fix" \
                    else outs[k]
                count[:, :, y:y + TILE, x:x + TILE] += 1
            return (canvas / count).argmax(1)
    return Loop(step)


# -- an autoencoder anomaly detector over a sensor stream --------------------------------------
class DenseAutoencoder(nn.Module):
    """A dense autoencoder over flattened windows of 128 readings of 4 sensors
    (512-256-64-16-64-256-512)."""

    def __init__(self, n: int = 512):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                                     nn.Linear(64, 16))
        self.decoder = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 256), nn.ReLU(),
                                     nn.Linear(256, n))

    def forward(self, x):
        return self.decoder(self.encoder(x))


WINDOWS, THRESHOLD = 512, 1.0


def sensor_stream(n: int = 8192, seed: int = 23) -> torch.Tensor:
    """``n`` windows of 128 readings of 4 sensors (sines with noise, a few spikes),
    flattened to 512 values each."""
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 8 * np.pi, 128)
    base = torch.stack([torch.sin(t * (k + 1) / 2) for k in range(4)], 1)
    x = base + 0.1 * torch.randn(n, 128, 4, generator=g)
    spikes = torch.rand(n, generator=g) < 0.02
    x[spikes] += 2.0 * torch.rand(int(spikes.sum()), 128, 4, generator=g)
    return x.reshape(n, 512)


@case("pt_infer_autoencoder_anomaly_numpy", "pytorch", "inference", 5,
      facts("inference", batch=WINDOWS), split="holdout", warmup=3,
      fix="the errors and the threshold in torch, one read of the flagged windows",
      tags=["anomaly", "autoencoder", "numpy", "stream"])
def pt_infer_autoencoder_anomaly_numpy(variant):
    """Anomaly detection over a stream of sensor windows: each step takes the next 512
    windows of 128 readings of 4 sensors, reconstructs them with a dense autoencoder
    (``eval()``, ``torch.no_grad()``), converts input and reconstruction with ``.numpy()``
    and computes each window's mean squared reconstruction error in NumPy, compares it
    with the threshold and appends an alert (window index, error) for each window above
    it.  The fix computes the errors and the comparison in torch and reads only the
    flagged windows' indices and errors with one ``.tolist()`` each."""
    torch.manual_seed(0)
    model = DenseAutoencoder().eval()
    stream = sensor_stream()
    alerts = []

    def step(i):
        k = (i * WINDOWS) % stream.size(0)
        x = stream[k:k + WINDOWS]
        with torch.no_grad():
            recon = model(x)
        if variant == "fix":
            err = (recon - x).pow(2).mean(1)
            idx = (err > THRESHOLD).nonzero().squeeze(1)
            with CLOCK("sync"):
                found = list(zip((idx + k).tolist(), err[idx].tolist()))
        else:
            with CLOCK("sync"):
                x_np, recon_np = x.numpy(), recon.numpy()
            err = np.mean((x_np - recon_np) ** 2, axis=1)
            found = [(k + int(j), float(err[j])) for j in np.nonzero(err > THRESHOLD)[0]]
        alerts.extend(found)
        if len(alerts) > 10000:
            alerts.clear()
        return found
    return Loop(step)


# -- a CRNN text recogniser, its CTC greedy decode indexing the best path ----------------------
ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


class CRNN(nn.Module):
    """A CRNN for 32x128 grayscale text lines: three conv-BN-ReLU blocks (16, 32, 64
    channels; pooled to 4x32), the columns as a 32-step sequence, a bidirectional LSTM
    (hidden 64) and a linear layer to the 36 characters and the CTC blank (class 0)."""

    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(*conv_bn_relu(1, 16), nn.MaxPool2d(2),
                                 *conv_bn_relu(16, 32), nn.MaxPool2d(2),
                                 *conv_bn_relu(32, 64), nn.MaxPool2d((2, 1)))
        self.rnn = nn.LSTM(64 * 4, 64, bidirectional=True)
        self.fc = nn.Linear(128, len(ALPHABET) + 1)

    def forward(self, x):
        f = self.cnn(x)  # (B, 64, 4, 32)
        b, c, h, w = f.shape
        seq = f.view(b, c * h, w).permute(2, 0, 1)  # (T, B, 256)
        out, _ = self.rnn(seq)
        return self.fc(out)  # (T, B, classes)


def ctc_decode_indexed(t: torch.Tensor) -> str:
    """Greedy CTC decode of one best path as the CRNN reference code writes it: the path
    tensor indexed position by position, blanks and repeats dropped."""
    chars = []
    for i in range(t.numel()):
        if t[i] != 0 and not (i > 0 and t[i - 1] == t[i]):
            chars.append(ALPHABET[t[i] - 1])
    return "".join(chars)


def ctc_decode_list(path: list[int]) -> str:
    """The same decode on a Python list of the path's classes."""
    chars, prev = [], 0
    for c in path:
        if c != 0 and c != prev:
            chars.append(ALPHABET[c - 1])
        prev = c
    return "".join(chars)


LINES = 8


@case("pt_infer_crnn_ctc_decode_loop", "pytorch", "inference", 3,
      facts("inference", batch=LINES), split="tuned", warmup=2,
      fix="one .tolist() of the batch's best paths, the repeats collapsed on Python lists",
      share_from_fix="host_overhead", tags=["ocr", "ctc", "python_loop", "decode"])
def pt_infer_crnn_ctc_decode_loop(variant):
    """Text recognition of cropped word images: each step reads a batch of 8 32x128
    grayscale lines with a CRNN (``eval()``, ``torch.no_grad()``), takes the best path
    with ``argmax`` over the classes and decodes each line as the CRNN reference code's
    ``strLabelConverter.decode`` does: the line's path tensor indexed position by
    position (``t[i] != 0``, ``t[i - 1] == t[i]``), blanks and repeats dropped.  The fix
    reads the best paths with one ``.tolist()`` and collapses the repeats on the lists."""
    torch.manual_seed(0)
    model = CRNN().eval()
    lines = torch.rand(64, 1, 32, 128, generator=torch.Generator().manual_seed(24))

    def step(i):
        k = (i * LINES) % 64
        with torch.no_grad():
            best = model(lines[k:k + LINES]).argmax(2)  # (T, B)
        if variant == "fix":
            return [ctc_decode_list(p) for p in best.t().tolist()]
        return [ctc_decode_indexed(best[:, b]) for b in range(LINES)]
    return Loop(step)
