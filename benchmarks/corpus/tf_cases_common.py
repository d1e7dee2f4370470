"""TensorFlow cases of common programs, first written without looking at the advisor's
rules (captured and measured by ``run_tf.py``): Keras ``fit`` of a CNN whose image
augmentation (``RandomFlip``, ``RandomRotation``, ``RandomZoom``) is layers at the front of
the model, as the Keras image-classification tutorial builds it, and a hand-written loop
of ``model.train_on_batch`` profiled from its first batch, with
``tf.profiler.experimental.start`` before the loop as the profiler guide shows.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


def photos(n: int = 256, size: int = 64, seed: int = 31):
    """``n`` uint8 photos (``size`` x ``size`` RGB) and their 5-way labels, in memory."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8),
            rng.integers(0, 5, n).astype("int32"))


def augmentation() -> tf.keras.Sequential:
    """The tutorial's ``data_augmentation`` block."""
    return tf.keras.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1),
                                L.RandomZoom(0.1)])


def flower_cnn(keras_model, augment: bool):
    """Rescaling, three conv-pool blocks (16-32-64), Dense(128), 5 classes; with the
    augmentation block in front when ``augment``."""
    front = [augmentation()] if augment else []
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((64, 64, 3)), *front, L.Rescaling(1.0 / 255),
        L.Conv2D(16, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(32, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Flatten(), L.Dense(128, activation="relu"), L.Dense(5)]))


def photo_batches(pipe: str) -> tf.data.Dataset:
    """The photos batched 32 at a time and prefetched (``run``); ``fix``: the augmentation
    block mapped over each batch in parallel before the prefetch, as the tutorial's
    second option does."""
    ds = tf.data.Dataset.from_tensor_slices(photos()).repeat().batch(32)
    if pipe == "fix":
        aug = augmentation()
        ds = ds.map(lambda x, y: (aug(x, training=True), y), num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` case with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_augment_layers",
             fit_spec("run", data=photo_batches,
                      net=lambda: flower_cnn(keras_model, augment=True),
                      fix_net=lambda: flower_cnn(keras_model, augment=False)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 16,
             split="tuned", warmup=3,
             fix="the augmentation mapped over the dataset in parallel (not in the model)",
             tags=["keras_fit", "augmentation", "preprocessing_layers"])
    CASES["tf_fit_augment_layers"].build.__doc__ = (
        "Keras 3 ``model.fit`` of the image-classification tutorial's small CNN (64x64 "
        "photos, three conv-pool blocks, 5 classes) with its augmentation block "
        "(``RandomFlip``, ``RandomRotation(0.1)``, ``RandomZoom(0.1)``) as the model's "
        "first layer, on uint8 photos held in memory, batched 32 at a time and "
        "prefetched: the augmentation runs inside each train step on the CPU "
        "(compute); the fix is the tutorial's other option, the block mapped over the "
        "dataset with ``num_parallel_calls=AUTOTUNE`` so it runs ahead of the step.")


# -- train_on_batch profiled from the loop's first batch ---------------------------------------
def sales_rows(n: int = 2048, seed: int = 32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 48)).astype("float32"),
            rng.standard_normal((n, 1)).astype("float32"))


@case("tf_train_on_batch_cold", "tensorflow", "training", 8,
      {**TF, "mode": "training", "tf_data": True}, split="tuned",
      warmup=2, startup_in_window=True, tags=["train_on_batch", "warmup", "tracing"])
def tf_train_on_batch_cold(variant):
    """A Keras regression MLP (48-512-512-256-1, Adam, MSE with an MAE metric) trained
    with ``model.train_on_batch(x, y)`` in a hand-written loop over a shuffled, batched
    (256), prefetched ``tf.data`` dataset, profiled from the loop's first batch
    (``tf.profiler.experimental.start`` before the loop, as the profiler guide shows):
    the first call traces the train function and builds its graph, Adam's slots with
    it (start-up); the steps after it are compute."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([tf.keras.Input((48,)), L.Dense(512, activation="relu"),
                               L.Dense(512, activation="relu"),
                               L.Dense(256, activation="relu"), L.Dense(1)])
    net.compile(optimizer="adam", loss="mse", metrics=["mae"])
    it = iter(tf.data.Dataset.from_tensor_slices(sales_rows()).shuffle(2048, seed=0)
              .repeat().batch(256).prefetch(AUTOTUNE))

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        return net.train_on_batch(x, y, return_dict=True)
    return run
