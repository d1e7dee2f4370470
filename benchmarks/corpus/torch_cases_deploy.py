"""Held-out PyTorch deployment programs, written without looking at the advisor's rules: a
request handler that builds its model and loads the checkpoint's ``state_dict`` again for
every request; a prediction endpoint whose images arrive as TensorFlow-Serving-style JSON
``instances`` (nested lists of pixel values) parsed and turned into a tensor in Python; a
physics surrogate trained in float64 whose handler casts every weight to float32 on each
call; and an image classifier served with ``torch.no_grad()`` but never switched to
``eval()``, so its batch norms use each batch's statistics and its dropout runs.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import torch

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts
from corpus.torch_cases_common import conv_bn
from corpus.torch_cases_serving import scratch

nn = torch.nn
F = torch.nn.functional


# -- a handler that loads the checkpoint for every request --------------------------------------
class ChurnNet(nn.Module):
    """A tabular classifier: 96 features, three 768-wide layers with batch norm and
    dropout, 4 classes."""

    def __init__(self, features: int = 96, hidden: int = 768, classes: int = 4):
        super().__init__()
        layers, width = [], features
        for _ in range(3):
            layers += [nn.Linear(width, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                       nn.Dropout(0.2)]
            width = hidden
        self.body, self.head = nn.Sequential(*layers), nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.body(x))


CHECKPOINTS: list = []


def churn_checkpoint():
    """The trained model's ``state_dict`` saved with ``torch.save`` (made once)."""
    if not CHECKPOINTS:
        torch.manual_seed(0)
        path = scratch("churn-ckpt-") / "churn_net.pt"
        torch.save(ChurnNet().state_dict(), path)
        CHECKPOINTS.append(path)
    return CHECKPOINTS[0]


def load_model(path) -> ChurnNet:
    """The model as the handler's tutorial loads it: built, its weights loaded, eval()."""
    model = ChurnNet()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    model.eval()
    return model


CHURN_ROWS = 16


@case("pt_infer_reload_checkpoint_per_request", "pytorch", "inference", 6,
      facts("inference", batch=CHURN_ROWS), split="holdout", warmup=3,
      fix="the model built and its checkpoint loaded once, when the service starts",
      tags=["server", "checkpoint", "state_dict", "torch.load"])
def pt_infer_reload_checkpoint_per_request(variant):
    """A churn-prediction endpoint written as a function per request: each request (16
    customers' 96 features) builds the model (three 768-wide ``Linear`` + ``BatchNorm1d``
    + dropout layers, 1.3 M parameters, initialised by their constructors), loads the
    5 MB checkpoint with ``torch.load`` and ``load_state_dict``, calls ``eval()``, then
    answers under ``torch.no_grad()`` with the class probabilities as a list.  The
    rebuild and the load are timed as start-up work (phase ``startup``).  The fix builds
    and loads the model once, when the service starts."""
    path = churn_checkpoint()
    rows = torch.randn(256, 96, generator=torch.Generator().manual_seed(1))
    loaded = load_model(path) if variant == "fix" else None

    def step(i):
        with CLOCK("startup"):
            model = loaded if loaded is not None else load_model(path)
        x = rows[(CHURN_ROWS * i) % 256:(CHURN_ROWS * i) % 256 + CHURN_ROWS]
        with torch.no_grad():
            return model(x).softmax(1).tolist()
    return Loop(step)


# -- images sent as JSON lists of pixel values ---------------------------------------------------
class PetNet(nn.Module):
    """A small image classifier for 64x64 RGB photos: four conv-BN-ReLU blocks (16 to 96
    channels, stride 2 but the last), global average pooling, 12 classes."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 16, 2), conv_bn(16, 32, 2), conv_bn(32, 64, 2),
                                      conv_bn(64, 96, 1), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(96, 12)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


PET_IMAGES, PET_SIDE = 8, 64
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def request_bodies(b64: bool, n: int = 12) -> list[str]:
    """The JSON bodies clients post: ``{"instances": [...]}`` with each 64x64x3 uint8
    photo as nested lists of ints (TensorFlow Serving's row format), or, for the fix,
    each photo's raw bytes base64-encoded (``{"b64": ...}``) beside its shape."""
    rng = np.random.default_rng(12)
    bodies = []
    for _ in range(n):
        imgs = rng.integers(0, 256, (PET_IMAGES, PET_SIDE, PET_SIDE, 3), dtype=np.uint8)
        if b64:
            inst = [{"b64": base64.b64encode(im.tobytes()).decode(), "shape": list(im.shape)}
                    for im in imgs]
        else:
            inst = imgs.tolist()
        bodies.append(json.dumps({"instances": inst}))
    return bodies


def decode_lists(body: str) -> torch.Tensor:
    """The handler's ``preprocess``: the body parsed, the nested lists made a uint8
    tensor, NHWC to NCHW."""
    payload = json.loads(body)
    return torch.tensor(payload["instances"], dtype=torch.uint8).permute(0, 3, 1, 2)


def decode_b64(body: str) -> torch.Tensor:
    """The same images from their base64 bytes: one ``np.frombuffer`` each, stacked."""
    payload = json.loads(body)
    arrs = [np.frombuffer(base64.b64decode(inst["b64"]), np.uint8).reshape(inst["shape"])
            for inst in payload["instances"]]
    return torch.from_numpy(np.stack(arrs)).permute(0, 3, 1, 2)


@case("pt_infer_json_pixel_lists", "pytorch", "inference", 6,
      facts("inference", batch=PET_IMAGES), split="holdout", warmup=3,
      fix="the photos sent as base64 raw bytes, decoded with np.frombuffer",
      tags=["server", "json", "preprocess", "python_lists"])
def pt_infer_json_pixel_lists(variant):
    """A pet-photo classifier behind a REST endpoint that accepts TensorFlow Serving's
    request format: each request is a JSON body of 8 64x64 RGB photos as nested lists of
    pixel values, which the handler parses with ``json.loads`` and turns into a tensor
    with ``torch.tensor(payload["instances"], dtype=torch.uint8)`` (phase ``input``),
    then scales, normalises with the ImageNet mean and standard deviation and classifies
    with a small conv net in ``eval()`` under ``torch.inference_mode()``, answering each
    photo's top class and probability as lists.  The 40,000 lists a request's parse
    makes live through the interpreter's young collections, so every third or fourth
    request also pays for a full garbage collection inside the parse.  The fix has
    clients send each photo's raw bytes base64-encoded, decoded with
    ``np.frombuffer``."""
    torch.manual_seed(0)
    model = PetNet().eval()
    fixed = variant == "fix"
    bodies = request_bodies(fixed)
    decode = decode_b64 if fixed else decode_lists

    def step(i):
        with CLOCK("input"):
            images = decode(bodies[i % len(bodies)])
        with torch.inference_mode():
            x = (images.float() / 255 - MEAN) / STD
            prob, cls = model(x).softmax(1).max(1)
        return cls.tolist(), prob.tolist()
    return Loop(step)


# -- a float64 checkpoint cast to float32 on every call -----------------------------------------
def surrogate_state(widths=(48, 1024, 1024, 1024, 6), seed: int = 3) -> dict:
    """A heat-exchanger surrogate trained in float64 (``torch.set_default_dtype`` in the
    research code): its ``state_dict`` of float64 weights and biases."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for k, (a, b) in enumerate(zip(widths, widths[1:])):
        state[f"layers.{k}.weight"] = torch.randn(b, a, generator=g, dtype=torch.float64) / a ** 0.5
        state[f"layers.{k}.bias"] = torch.zeros(b, dtype=torch.float64)
    return state


def surrogate_forward(weights: dict, x: torch.Tensor) -> torch.Tensor:
    """The functional forward the service reuses from the research code: ``F.linear``
    layer after layer with SiLU between them."""
    n = len(weights) // 2
    for k in range(n):
        x = F.linear(x, weights[f"layers.{k}.weight"], weights[f"layers.{k}.bias"])
        if k < n - 1:
            x = F.silu(x)
    return x


SURROGATE_ROWS = 1


@case("pt_infer_float64_weights_cast_per_call", "pytorch", "inference", 6,
      facts("inference", batch=SURROGATE_ROWS), split="tuned", warmup=3,
      fix="the float64 state_dict cast to float32 once, when it is loaded",
      tags=["server", "float64", "dtype", "cast"])
def pt_infer_float64_weights_cast_per_call(variant):
    """A physics surrogate (48 inputs, three 1024-wide SiLU layers, 6 outputs, 2.2 M
    parameters) trained in float64 and served with its functional forward
    (``F.linear`` per layer): the operating points arrive as float32, so every call
    first casts the checkpoint's weights with ``{k: v.float() for k, v in
    state.items()}`` (17 MB read, 9 MB written; phase ``copy``, the casts' buffers freed
    in it) and then runs the request, one operating point from the design optimiser that
    calls the service, under ``torch.no_grad()``, the prediction read with ``.numpy()``.
    The fix casts the ``state_dict`` once, when the service loads it."""
    state = surrogate_state()
    once = {k: v.float() for k, v in state.items()} if variant == "fix" else None
    points = torch.randn(512, 48, generator=torch.Generator().manual_seed(4))

    def step(i):
        x = points[(SURROGATE_ROWS * i) % 512:(SURROGATE_ROWS * i) % 512 + SURROGATE_ROWS]
        with torch.no_grad():
            if once is not None:
                return surrogate_forward(once, x).numpy()
            with CLOCK("copy"):
                weights = {k: v.float() for k, v in state.items()}
            out = surrogate_forward(weights, x).numpy()
            with CLOCK("copy"):
                del weights
        return out
    return Loop(step)


# -- a classifier served in train() mode ---------------------------------------------------------
class SceneNet(nn.Module):
    """A CIFAR-sized scene classifier: three stages of two conv-BN-ReLU blocks (32, 64, 128
    channels, max-pooled between stages), global average pooling, dropout 0.3, 10
    classes."""

    def __init__(self):
        super().__init__()
        stages, cin = [], 3
        for cout in (32, 64, 128):
            stages += [conv_bn(cin, cout, 1), conv_bn(cout, cout, 1), nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*stages, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Sequential(nn.Dropout(0.3), nn.Linear(128, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


SCENE_BATCH = 32


@case("pt_infer_train_mode_left_on", "pytorch", "inference", 5,
      facts("inference", batch=SCENE_BATCH), split="holdout", warmup=2,
      fix="model.eval() after loading: batch norm from its running statistics, no dropout",
      tags=["train_mode", "batchnorm", "dropout", "no_grad"])
def pt_infer_train_mode_left_on(variant):
    """Batch prediction of a scene classifier (six conv-BN-ReLU blocks of 32 to 128
    channels, dropout before the head) over 32x32 RGB images, 32 a step, under
    ``torch.no_grad()``, but the model was never put in ``eval()`` after it was built
    and loaded: every batch norm normalises with the batch's own mean and variance and
    updates its running statistics, and the dropout draws a mask; the classes are read
    with one ``.tolist()``.  The fix calls ``model.eval()``."""
    torch.manual_seed(0)
    model = SceneNet()
    if variant == "fix":
        model.eval()
    images = torch.rand(256, 3, 32, 32, generator=torch.Generator().manual_seed(9))

    def step(i):
        x = images[(SCENE_BATCH * i) % 256:(SCENE_BATCH * i) % 256 + SCENE_BATCH]
        with torch.no_grad():
            return model(x).argmax(1).tolist()
    return Loop(step)
