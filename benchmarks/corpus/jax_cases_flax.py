"""Held-out JAX cases written with the libraries JAX users train with, without looking at
the advisor's rules (captured and measured by ``run_jax.py``): a Flax linen CNN trained
with ``flax.training.train_state.TrainState`` and an optax chain wrapped in
``optax.MultiSteps`` (two micro-batches an update) in one jitted step; a Flax NNX
classifier trained with ``nnx.jit`` over the model, its ``nnx.Optimizer`` and its
``nnx.MultiMetric``; a Keras 3 model on the JAX backend fitted on a
``keras.utils.PyDataset`` that builds every batch from Python records; and the
evaluation of a Flax linen classifier whose metrics (loss, accuracy, per-class precision,
recall and F1) are computed op by op outside the jitted forward.

Generator-only packages, in the JAX venv beside jax 0.10.2: flax 0.12.8, optax 0.2.8,
keras 3.15.1 (``KERAS_BACKEND=jax``).

A Keras ``fit`` case (:data:`FIT`) runs inside one ``model.fit``: its steps are timed
batch begin to batch begin by a callback, and its captures are ``jax.profiler`` traces
started and stopped by a callback at batch boundaries, as Keras' own ``TensorBoard``
callback does on this backend (:func:`capture_fit`, :func:`fit_round`).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable

os.environ.setdefault("KERAS_BACKEND", "jax")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402
from flax.training import train_state  # noqa: E402

from corpus.common import Others, case, measure  # noqa: E402

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


def photo_set(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` CIFAR-sized float32 images (smooth colour fields plus noise) and 10-way
    labels, as NumPy arrays in memory."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, 8, 8, 3), dtype=np.float32)
    x = base.repeat(4, 1).repeat(4, 2) + 0.3 * rng.standard_normal((n, 32, 32, 3),
                                                                    dtype=np.float32)
    return x, rng.integers(0, 10, n).astype(np.int32)


class CNN(nn.Module):
    """The Flax tutorial's small CNN, sized for 32x32 colour images."""

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), (2, 2))
        x = nn.relu(nn.Conv(32, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), (2, 2))
        x = nn.relu(nn.Dense(128)(x.reshape((x.shape[0], -1))))
        return nn.Dense(10)(x)


# -- Flax linen TrainState, optax chain in MultiSteps, one jitted step ------------------------
MICRO_BATCH, ACCUM = 64, 2


@case("jax_train_flax_trainstate_multisteps", "jax", "training", 4,
      {**JX, "mode": "training", "batch": MICRO_BATCH},
      split="holdout", warmup=4, tags=["flax", "optax", "train_state", "multisteps"])
def jax_train_flax_trainstate_multisteps(variant):
    """A Flax linen CNN (two 3x3 convolutions of 16 and 32 channels with average pooling,
    Dense 128, 10 classes) trained on 32x32 colour images as the Flax tutorials write it:
    ``TrainState.create(apply_fn=model.apply, params=..., tx=tx)`` with ``tx`` an optax
    chain (``clip_by_global_norm(1.0)``, ``adamw`` on a warm-up cosine schedule) wrapped
    in ``optax.MultiSteps(every_k_schedule=2)``, so every second micro-batch of 64 applies
    the accumulated update; one ``@jax.jit`` ``train_step(state, batch)`` computes the
    loss and gradients with ``jax.value_and_grad`` and calls ``state.apply_gradients``;
    the epoch's batches are taken from NumPy arrays in memory through a permutation, and
    the loss is read with ``float`` for the log: the convolutions' work is the step,
    nothing to fix."""
    images, labels = photo_set(1024, seed=51)
    model = CNN()
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 32, 32, 3)))["params"]
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 50, 2000)
    tx = optax.MultiSteps(optax.chain(optax.clip_by_global_norm(1.0),
                                      optax.adamw(schedule, weight_decay=1e-4)),
                          every_k_schedule=ACCUM)
    state = {"ts": train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx),
             "perm": np.random.default_rng(1).permutation(len(images)), "log": []}

    @jax.jit
    def train_step(state, batch):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, batch["image"])
            return optax.softmax_cross_entropy_with_integer_labels(
                logits, batch["label"]).mean()
        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss

    per_epoch = len(images) // MICRO_BATCH

    def step(i):
        idx = state["perm"][(i % per_epoch) * MICRO_BATCH:(i % per_epoch + 1) * MICRO_BATCH]
        batch = {"image": images[idx], "label": labels[idx]}
        state["ts"], loss = train_step(state["ts"], batch)
        state["log"].append(float(loss))
        del state["log"][:-100]
        return state["log"][-1]
    return step


# -- Flax NNX: nnx.jit over the model, its optimizer and its metrics ---------------------------
class ChurnMLP(nnx.Module):
    """A tabular classifier: two Linear-BatchNorm-ReLU-Dropout blocks and a head."""

    def __init__(self, features: int, hidden: int, classes: int, rngs: nnx.Rngs):
        self.fc1 = nnx.Linear(features, hidden, rngs=rngs)
        self.bn1 = nnx.BatchNorm(hidden, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.bn2 = nnx.BatchNorm(hidden, rngs=rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)
        self.head = nnx.Linear(hidden, classes, rngs=rngs)

    def __call__(self, x):
        x = self.drop(nnx.relu(self.bn1(self.fc1(x))))
        x = self.drop(nnx.relu(self.bn2(self.fc2(x))))
        return self.head(x)


def nnx_loss(model, x, y):
    logits = model(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), logits


def nnx_train_step(model, optimizer, metrics, x, y):
    """The NNX tutorial's step: gradients of the model's loss, the metrics updated, the
    optimizer applied (in place, on the NNX objects)."""
    (loss, logits), grads = nnx.value_and_grad(nnx_loss, has_aux=True)(model, x, y)
    metrics.update(loss=loss, logits=logits, labels=y)
    optimizer.update(model, grads)
    return loss


NNX_BATCH = 64


@case("jax_train_nnx_jit_optimizer", "jax", "training", 2,
      {**JX, "mode": "training", "batch": NNX_BATCH},
      split="tuned", warmup=4,
      fix="nnx.split once, a jax.jit of the pure step over the split state",
      share_from_fix="host_overhead", tags=["flax", "nnx", "optax"])
def jax_train_nnx_jit_optimizer(variant):
    """A Flax NNX classifier over 64 tabular features (64-256-256-10, BatchNorm, Dropout
    0.1) trained as the NNX MNIST tutorial writes it: ``nnx.Optimizer(model,
    optax.adamw(1e-3), wrt=nnx.Param)``, an ``nnx.MultiMetric`` of the average loss and
    the accuracy, and ``@nnx.jit def train_step(model, optimizer, metrics, x, y)`` called
    on batches of 64 rows sliced from NumPy arrays, the loss read with ``float`` for the
    log: every call of ``nnx.jit`` walks the three objects' graphs, splits their state
    to pass it into the compiled function and merges what comes back into them.  The fix
    follows the Flax guide on performance: ``nnx.split`` the three objects once, ``jax.jit``
    a pure step over the split state (``nnx.merge`` inside it, ``nnx.state`` out), and
    carry that state from step to step."""
    rng = np.random.default_rng(61)
    xs = rng.standard_normal((64 * NNX_BATCH, 64), dtype=np.float32)
    ys = (xs[:, :10].argmax(1) + (rng.random(len(xs)) < 0.2)).astype(np.int32) % 10
    model = ChurnMLP(64, 256, 10, nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    metrics = nnx.MultiMetric(loss=nnx.metrics.Average("loss"),
                              accuracy=nnx.metrics.Accuracy())
    graphdef, split_state = nnx.split((model, optimizer, metrics))
    train_step = nnx.jit(nnx_train_step)

    @jax.jit
    def pure_step(st, x, y):
        m, o, me = nnx.merge(graphdef, st)
        loss = nnx_train_step(m, o, me, x, y)
        return nnx.state((m, o, me)), loss

    state = {"st": split_state, "log": []}
    batches = len(xs) // NNX_BATCH

    def step(i):
        k = (i % batches) * NNX_BATCH
        x, y = xs[k:k + NNX_BATCH], ys[k:k + NNX_BATCH]
        if variant == "fix":
            state["st"], loss = pure_step(state["st"], x, y)
        else:
            loss = train_step(model, optimizer, metrics, x, y)
        state["log"].append(float(loss))
        del state["log"][:-100]
        return state["log"][-1]
    return step


# -- Flax linen evaluation: jitted forward, metrics op by op outside it -----------------------
EVAL_BATCH, CLASSES = 128, 10


def classification_metrics(logits, labels) -> dict:
    """Loss, accuracy and macro precision / recall / F1 over the classes, written with
    ``jax.numpy`` one class at a time."""
    preds = jnp.argmax(logits, -1)
    out = {"loss": optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(),
           "accuracy": jnp.mean(preds == labels)}
    precision, recall, f1 = [], [], []
    for c in range(CLASSES):
        tp = jnp.sum((preds == c) & (labels == c))
        fp = jnp.sum((preds == c) & (labels != c))
        fn = jnp.sum((preds != c) & (labels == c))
        p = tp / jnp.maximum(tp + fp, 1)
        r = tp / jnp.maximum(tp + fn, 1)
        precision.append(p)
        recall.append(r)
        f1.append(2 * p * r / jnp.maximum(p + r, 1e-9))
    out.update(precision=jnp.mean(jnp.stack(precision)), recall=jnp.mean(jnp.stack(recall)),
               f1=jnp.mean(jnp.stack(f1)))
    return out


class DigitMLP(nn.Module):
    """A linen MLP over flattened 28x28 digits."""

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(256)(x))
        x = nn.relu(nn.Dense(256)(x))
        return nn.Dense(CLASSES)(x)


def digit_set(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` 28x28 grey images in [0, 1] and their 10-way labels, as NumPy arrays."""
    rng = np.random.default_rng(seed)
    return (rng.random((n, 28, 28, 1), dtype=np.float32),
            rng.integers(0, CLASSES, n).astype(np.int32))


@case("jax_eval_flax_metrics_unjitted", "jax", "inference", 2,
      {**JX, "mode": "inference", "batch": EVAL_BATCH}, split="tuned", warmup=3,
      fix="the metrics computed inside the jitted eval step",
      share_from_fix="host_overhead", tags=["flax", "evaluation", "metrics", "op_by_op"])
def jax_eval_flax_metrics_unjitted(variant):
    """The validation pass of a Flax linen MLP digit classifier (784-256-256-10) over
    28x28 images in batches of 128: ``forward = jax.jit(lambda params, x:
    model.apply({"params": params}, x))`` gives the logits, then an un-jitted
    ``classification_metrics(logits, labels)`` takes the loss, the accuracy and the macro
    precision, recall and F1 with ``jax.numpy`` ops in a Python loop over the 10 classes,
    and ``jax.device_get`` brings the batch's metrics to the host, where they are summed
    for the epoch's report.  The fix computes the same metrics inside the jitted eval
    step."""
    images, labels = digit_set(8 * EVAL_BATCH, seed=71)
    model = DigitMLP()
    params = model.init(jax.random.PRNGKey(3), jnp.zeros((1, 28, 28, 1)))["params"]
    forward = jax.jit(lambda p, x: model.apply({"params": p}, x))

    @jax.jit
    def eval_step(p, x, y):
        return classification_metrics(model.apply({"params": p}, x), y)

    totals: dict[str, float] = {}

    def step(i):
        k = (i % 8) * EVAL_BATCH
        x, y = images[k:k + EVAL_BATCH], labels[k:k + EVAL_BATCH]
        if variant == "fix":
            metrics = eval_step(params, x, y)
        else:
            metrics = classification_metrics(forward(params, x), jnp.asarray(y))
        for name, v in jax.device_get(metrics).items():
            totals[name] = totals.get(name, 0.0) + float(v)
        return totals
    return step


# -- Keras 3 on the JAX backend: fit on a PyDataset building batches from Python records -------
PLANS = ("basic", "standard", "plus", "premium")
COUNTRIES = ("DE", "FR", "NL", "ES", "IT", "PL", "SE", "AT")
PAYMENTS = ("card", "sepa", "paypal", "invoice")
FIT_BATCH = 256


@functools.lru_cache(maxsize=1)
def churn_records(n: int = 32768, seed: int = 81) -> tuple[dict, ...]:
    """Customer records as a service's JSON export gives them: one dict per customer, its
    numbers as Python floats and ints, its categories as strings (some missing)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        tenure = int(rng.integers(0, 72))
        monthly = float(np.round(rng.uniform(5, 120), 2))
        out.append({"customer_id": f"C{k:06d}", "age": int(rng.integers(18, 90)),
                    "tenure_months": tenure, "monthly_charges": monthly,
                    "total_charges": round(monthly * tenure * rng.uniform(0.9, 1.1), 2),
                    "support_calls": int(rng.poisson(1.5)),
                    "plan": PLANS[int(rng.integers(0, 4))],
                    "country": COUNTRIES[int(rng.integers(0, 8))] if rng.random() > 0.05
                    else None,
                    "payment": PAYMENTS[int(rng.integers(0, 4))],
                    "paperless": bool(rng.random() < 0.6),
                    "churned": int(rng.random() < 0.25 + 0.004 * max(0, 24 - tenure))})
    return tuple(out)


NUMERIC = ("age", "tenure_months", "monthly_charges", "total_charges", "support_calls")


def record_stats(records) -> dict:
    """Mean and standard deviation of each numeric field (log1p of the charges)."""
    cols = {f: np.array([float(r[f]) for r in records]) for f in NUMERIC}
    for f in ("monthly_charges", "total_charges"):
        cols[f] = np.log1p(cols[f])
    return {f: (float(v.mean()), float(v.std()) or 1.0) for f, v in cols.items()}


def featurize(rec: dict, stats: dict) -> list[float]:
    """One customer's 25 features: standardised numbers, one-hot categories, flags."""
    row = []
    for f in NUMERIC:
        v = float(rec[f])
        if f in ("monthly_charges", "total_charges"):
            v = float(np.log1p(v))
        mean, std = stats[f]
        row.append((v - mean) / std)
    row += [1.0 if rec["plan"] == p else 0.0 for p in PLANS]
    row += [1.0 if rec["country"] == c else 0.0 for c in COUNTRIES]
    row.append(1.0 if rec["country"] is None else 0.0)
    row += [1.0 if rec["payment"] == p else 0.0 for p in PAYMENTS]
    row += [1.0 if rec["paperless"] else 0.0, min(rec["support_calls"], 5) / 5.0,
            1.0 if rec["tenure_months"] < 6 else 0.0]
    return row


class ChurnRecords(keras.utils.PyDataset):
    """Batches of customer records featurized row by row in ``__getitem__``, as the Keras
    guide's custom ``PyDataset`` builds them (default ``workers=1``)."""

    def __init__(self, records, batch_size=FIT_BATCH, **kwargs):
        super().__init__(**kwargs)
        self.records, self.batch_size = records, batch_size
        self.stats = record_stats(records)

    def __len__(self):
        return len(self.records) // self.batch_size

    def __getitem__(self, idx):
        rows = self.records[idx * self.batch_size:(idx + 1) * self.batch_size]
        x = np.array([featurize(r, self.stats) for r in rows], dtype="float32")
        y = np.array([r["churned"] for r in rows], dtype="float32")
        return x, y


def churn_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    net = keras.Sequential([keras.Input((25,)), keras.layers.Dense(128, activation="relu"),
                            keras.layers.Dropout(0.2),
                            keras.layers.Dense(64, activation="relu"),
                            keras.layers.Dense(1, activation="sigmoid")])
    net.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy",
                metrics=["accuracy"])
    return net


def churn_fit_args(variant: str) -> dict:
    """``fit``'s data: the :class:`ChurnRecords` dataset (run), or the records featurized
    once into NumPy arrays passed with ``batch_size`` (fix)."""
    records = churn_records()
    data = ChurnRecords(records)
    if variant != "fix":
        return {"x": data}
    x = np.array([featurize(r, data.stats) for r in records], dtype="float32")
    y = np.array([r["churned"] for r in records], dtype="float32")
    return {"x": x, "y": y, "batch_size": FIT_BATCH, "shuffle": False}


#: Keras ``fit`` cases: name -> (model maker, variant -> ``fit`` data arguments).
FIT: dict[str, tuple[Callable, Callable]] = {
    "jax_keras_fit_pydataset_records": (churn_model, churn_fit_args)}
#: Steps a timed ``fit`` round runs after its warm-up (its steps last about 0.5 s or more).
FIT_ROUND_STEPS = 120


@case("jax_keras_fit_pydataset_records", "jax", "training", 5,
      {**JX, "mode": "training", "keras_fit": True, "batch": FIT_BATCH},
      split="holdout", warmup=3,
      fix="the records featurized once into NumPy arrays, fit(x, y, batch_size=256)",
      share_from_fix="input", tags=["keras_fit", "keras_jax_backend", "py_dataset"])
def jax_keras_fit_pydataset_records(variant):
    """A churn classifier (25 features, Dense 128-Dropout-64-1 sigmoid, Adam, binary
    cross-entropy and accuracy) written in Keras 3 and run on the JAX backend
    (``KERAS_BACKEND=jax``): ``model.fit`` on a ``keras.utils.PyDataset`` whose
    ``__getitem__`` turns 256 customer records, dicts as a JSON export gives them, into
    features one row at a time in Python (standardised numbers, log charges, one-hot plan,
    country and payment, flags), at the default ``workers=1``, so each batch is built
    in the training loop's own thread.  The fix featurizes the records once into NumPy
    arrays and passes them to ``fit`` with ``batch_size=256``."""
    raise RuntimeError("Keras fit cases are captured by capture_fit and timed by fit_round")


class FitClock(keras.callbacks.Callback):
    """Batch begin to batch begin: one ``fit`` step as the user waits for it; with
    ``trace`` set, a ``jax.profiler`` trace of batches ``first .. last`` (as Keras'
    ``TensorBoard(profile_batch=...)`` takes it on this backend)."""

    def __init__(self, trace: str | None = None, first: int = 0, last: int = 0,
                 options=None):
        super().__init__()
        self.starts: list[float] = []
        self.trace, self.first, self.last, self.options = trace, first, last, options

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append(time.perf_counter())
        if self.trace and batch == self.first:
            jax.profiler.start_trace(self.trace, profiler_options=self.options)

    def on_train_batch_end(self, batch, logs=None):
        if self.trace and batch == self.last:
            jax.effects_barrier()
            jax.profiler.stop_trace()

    def on_train_end(self, logs=None):
        self.starts.append(time.perf_counter())


def run_fit(name: str, variant: str, skip: int, n: int, clock: FitClock) -> list:
    """``fit`` for ``skip + n + 1`` steps; per timed step (wall s, {})."""
    make, data = FIT[name]
    net = make()
    net.fit(**data(variant), epochs=1, steps_per_epoch=skip + n + 1, verbose=0,
            callbacks=[clock])
    return [(b - a, {}) for a, b in zip(clock.starts, clock.starts[1:])][skip:skip + n]


def capture_fit(c, dest) -> None:
    """One capture of a Keras ``fit`` case: steps ``warmup .. warmup + steps - 1``."""
    import shutil

    shutil.rmtree(dest, ignore_errors=True)
    run_fit(c.name, "run", c.warmup, c.steps,
            FitClock(str(dest), c.warmup, c.warmup + c.steps - 1,
                     jax.profiler.ProfileOptions()))
    for extra in dest.rglob("*.trace.json.gz"):
        extra.unlink()


def fit_round(c, variants: list[str]) -> tuple[dict, dict]:
    """One timed ``fit`` of each variant, and the cores other processes kept busy
    meanwhile."""
    got, others = {}, {}
    for v in variants:
        watch = Others()
        got[v] = run_fit(c.name, v, c.warmup, max(c.steps, FIT_ROUND_STEPS), FitClock())
        others[v] = watch.cores()
    return got, others


def measure_fit(c, rounds: int) -> dict:
    return measure(c, rounds, one_round=fit_round)
