"""Held-out TensorFlow / Keras programs of kinds the others lack, written and scored without
looking at the advisor's rules (captured and measured by ``run_tf.py``): ``fit`` with a
``ModelCheckpoint`` saving the whole model every few batches (``save_freq``); a forecasting
LSTM fed by ``keras.utils.timeseries_dataset_from_array``; a multi-output functional model
compiled with ``loss_weights``; and ``fit`` on NumPy arrays with ``shuffle=True`` and a
small ``batch_size``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from corpus.common import CASES
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE
FIT_FACTS = {**TF, "mode": "training", "keras_fit": True}


# -- periodic: ModelCheckpoint(save_freq=N) inside fit -----------------------------------------
def image_rows(n: int = 1024, seed: int = 91):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 32, 32, 3)).astype("float32"),
            rng.integers(0, 10, n).astype("int32"))


def image_batches(pipe: str) -> tf.data.Dataset:
    return (tf.data.Dataset.from_tensor_slices(image_rows()).shuffle(1024, seed=0).repeat()
            .batch(64).prefetch(AUTOTUNE))


def checkpoint_cnn(keras_model):
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)), L.Conv2D(32, 3, padding="same", activation="relu"),
        L.MaxPooling2D(), L.Conv2D(64, 3, padding="same", activation="relu"),
        L.MaxPooling2D(), L.Flatten(), L.Dense(256, activation="relu"), L.Dense(10)]),
        metrics=["accuracy"])


class TimedCheckpoint(tf.keras.callbacks.ModelCheckpoint):
    """``ModelCheckpoint`` as the program uses it, its batch-end work (the saves) timed for
    the truth: ``periods`` are the (start, end) of each, the ``periodic`` phase of the step
    it ends."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.periods = []

    def on_train_batch_end(self, batch, logs=None):
        t0 = time.perf_counter()
        super().on_train_batch_end(batch, logs)
        self.periods.append([t0, time.perf_counter()])


def checkpoints(pipe: str) -> list:
    """The program's ``ModelCheckpoint`` every 5 batches: the whole model as ``.keras``
    (``run``), its weights only (``fix``)."""
    folder = Path(tempfile.mkdtemp(prefix="ckpt"))
    if pipe == "fix":
        return [TimedCheckpoint(str(folder / "ckpt.weights.h5"), save_weights_only=True,
                                save_freq=5)]
    return [TimedCheckpoint(str(folder / "model.keras"), save_freq=5)]


# -- a forecasting LSTM on windows of a multivariate series ------------------------------------
PAST, FEATURES = 12, 7


def weather(n: int = 12000, seed: int = 92) -> np.ndarray:
    """An hourly multivariate series (daily and yearly cycles in noise), standardised as
    the weather-forecasting example does with the training split's mean and std."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float32)[:, None]
    phase = rng.uniform(0, 2 * np.pi, FEATURES)
    x = np.sin(2 * np.pi * t / 24 + phase) + 0.5 * np.sin(2 * np.pi * t / 8760 + phase)
    x = x + 0.3 * rng.standard_normal((n, FEATURES))
    return ((x - x.mean(0)) / x.std(0)).astype("float32")


def windows(pipe: str) -> tf.data.Dataset:
    """``timeseries_dataset_from_array`` over the series, 12 hours in, the temperature
    (column 1) 12 hours ahead out, shuffled, batched 64 (``run``); ``fix``: with a
    ``prefetch(AUTOTUNE)`` after it; ``bare``: its first batches made once and cached."""
    series = weather()
    ds = tf.keras.utils.timeseries_dataset_from_array(
        series[:-(PAST + 12)], series[PAST + 12:, 1], sequence_length=PAST,
        batch_size=64, shuffle=True, seed=0)
    if pipe == "bare":
        return ds.take(2).cache().repeat()
    return ds.prefetch(AUTOTUNE) if pipe == "fix" else ds


def forecaster():
    net = tf.keras.Sequential([tf.keras.Input((PAST, FEATURES)), L.LSTM(32), L.Dense(1)])
    net.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="mse")
    return net


# -- a multi-output functional model with loss_weights -----------------------------------------
WORDS, TAGS, DEPARTMENTS = 10000, 12, 4


def tickets(n: int = 1280, seed: int = 93):
    """The functional-API guide's support tickets: title (10 words), body (40 words),
    12 binary tags; targets a priority in [0, 1] and one of 4 departments."""
    rng = np.random.default_rng(seed)
    inputs = {"title": rng.integers(0, WORDS, (n, 10)).astype("int32"),
              "body": rng.integers(0, WORDS, (n, 40)).astype("int32"),
              "tags": rng.integers(0, 2, (n, TAGS)).astype("float32")}
    targets = {"priority": rng.random((n, 1)).astype("float32"),
               "department": np.eye(DEPARTMENTS, dtype="float32")[
                   rng.integers(0, DEPARTMENTS, n)]}
    return inputs, targets


def ticket_batches(pipe: str) -> tf.data.Dataset:
    return (tf.data.Dataset.from_tensor_slices(tickets()).shuffle(1280, seed=0).repeat()
            .batch(32).prefetch(AUTOTUNE))


def ticket_model():
    """Title and body embedded and read by LSTMs, concatenated with the tags; a priority
    head and a department head, the department loss weighted 0.2."""
    title = tf.keras.Input((None,), name="title", dtype="int32")
    body = tf.keras.Input((None,), name="body", dtype="int32")
    tags = tf.keras.Input((TAGS,), name="tags")
    title_features = L.LSTM(128)(L.Embedding(WORDS, 64)(title))
    body_features = L.LSTM(32)(L.Embedding(WORDS, 64)(body))
    x = L.concatenate([title_features, body_features, tags])
    priority = L.Dense(1, name="priority")(x)
    department = L.Dense(DEPARTMENTS, name="department")(x)
    net = tf.keras.Model(inputs=[title, body, tags], outputs={
        "priority": priority, "department": department})
    net.compile(optimizer=tf.keras.optimizers.RMSprop(1e-3),
                loss={"priority": tf.keras.losses.BinaryCrossentropy(from_logits=True),
                      "department": tf.keras.losses.CategoricalCrossentropy(from_logits=True)},
                loss_weights={"priority": 1.0, "department": 0.2})
    return net


# -- fit on NumPy arrays, shuffle=True, batch_size=16 ------------------------------------------
def churn_arrays(n: int = 8704, seed: int = 94):
    """Customer rows (200 features: a few numeric, the rest one-hot encoded categories)
    and whether each churned."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 200)).astype("float32")
    y = (x[:, :5].sum(1) + 0.5 * rng.standard_normal(n) > 0).astype("float32")
    return x, y


def churn_fit_args(pipe: str) -> dict:
    """``fit``'s own arguments: the arrays, ``shuffle=True`` and ``batch_size=16``
    (``batch_size=256`` for the variant of that name)."""
    x, y = churn_arrays()
    batch = 256 if pipe == "batch_size=256" else 16
    return {"x": x, "y": y, "batch_size": batch, "shuffle": True}


def churn_mlp(steps_per_execution: int = 1):
    net = tf.keras.Sequential([tf.keras.Input((200,)), L.Dense(512, activation="relu"),
                               L.Dropout(0.2), L.Dense(256, activation="relu"),
                               L.Dense(1, activation="sigmoid")])
    net.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"],
                steps_per_execution=steps_per_execution)
    return net


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_checkpoint_save_freq",
             fit_spec("run", data=image_batches, net=lambda: checkpoint_cnn(keras_model),
                      callbacks=checkpoints),
             {**FIT_FACTS, "tf_data": True}, 10, split="holdout", warmup=3,
             fix="ModelCheckpoint(save_weights_only=True), the same save_freq",
             tags=["keras_fit", "checkpoint", "periodic", "callback"])
    CASES["tf_fit_checkpoint_save_freq"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a small CNN (32x32 images, two conv-pool blocks, "
        "Dense(256), 10 classes, accuracy metric) on images held in memory, shuffled, "
        "batched 64 and prefetched, with ``keras.callbacks.ModelCheckpoint('model.keras', "
        "save_freq=5)``: every 5th batch the whole model and its optimizer state are "
        "written (periodic, the saves timed in the callback); the fix measured saves "
        "the weights only (``save_weights_only=True``) as often.")
    fit_case("tf_fit_timeseries_lstm", fit_spec("run", data=windows, net=forecaster),
             {**FIT_FACTS, "tf_data": True}, 5, split="holdout", warmup=3,
             fix="prefetch(AUTOTUNE) after the windows' dataset", share_from_fix="input",
             share_variant="bare", tags=["keras_fit", "tf_data", "lstm", "timeseries"])
    CASES["tf_fit_timeseries_lstm"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a forecasting LSTM (LSTM(32), Dense(1), Adam, MSE) as "
        "the weather-forecasting example builds it, fed by "
        "``keras.utils.timeseries_dataset_from_array`` (12 hourly rows of 7 features in, "
        "a value 12 hours ahead out, ``shuffle=True``, batches of 64): the input share "
        "is what the same fit on batches made once saves; the fix measured adds a "
        "``prefetch(AUTOTUNE)`` after the dataset.")
    fit_case("tf_fit_multi_output_loss_weights",
             fit_spec("run", data=ticket_batches, net=ticket_model),
             {**FIT_FACTS, "tf_data": True}, 5, split="holdout", warmup=3,
             tags=["keras_fit", "functional", "multi_output", "loss_weights", "lstm"])
    CASES["tf_fit_multi_output_loss_weights"].build.__doc__ = (
        "Keras 3 ``model.fit`` of the functional-API guide's ticket model: title and body "
        "token ids (10 and 40 words) embedded and read by LSTM(128) and LSTM(32), "
        "concatenated with 12 tags, a priority head and a department head, compiled "
        "with RMSprop, a loss per output and ``loss_weights`` (1.0, 0.2), on tickets "
        "held in memory, shuffled, batched 32 and prefetched: compute-bound, nothing to "
        "fix.")
    fit_case("tf_fit_numpy_small_batch",
             fit_spec("run", data=churn_fit_args, net=churn_mlp,
                      fix_net=lambda: churn_mlp(steps_per_execution=16)),
             FIT_FACTS, 30, split="tuned", warmup=3,
             fix="compile(steps_per_execution=16), the same batches", per_item=1,
             fix_per_item=16, variants=("batch_size=256",),
             share_from_fix="host_overhead", tags=["keras_fit", "numpy", "small_batch"])
    CASES["tf_fit_numpy_small_batch"].build.__doc__ = (
        "Keras 3 ``model.fit(x, y, batch_size=16, shuffle=True)`` of a churn classifier "
        "(200-512-256-1 MLP with dropout, Adam, binary cross-entropy, accuracy) on NumPy "
        "arrays of 8704 rows: each batch of 16 is one call of the train function around "
        "well under a millisecond of math (host overhead by what the fix saves, per "
        "batch); the fix measured runs 16 batches a call (``steps_per_execution=16``), "
        "the ``batch_size=256`` a user also tries measured beside it (per 16 rows).")
