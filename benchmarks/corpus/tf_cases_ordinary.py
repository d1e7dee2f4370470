"""Held-out TensorFlow cases of ordinary programs, written without looking at the advisor's
rules (captured and measured by ``run_tf.py``): Keras ``fit`` on a CSV file read with
``tf.data.experimental.make_csv_dataset``, Keras ``fit`` of a CNN under the
``mixed_bfloat16`` policy on a CPU, and a Keras classifier called eagerly (``model(x)``,
no ``tf.function``) on each batch of a scoring job.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from corpus.common import CASES, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
CSV: list[str] = []
FEATURES = 40


def csv_file(rows: int = 2048) -> str:
    """A sensor log written once per process as a CSV file with a header: 40 float
    columns and an integer ``label`` (256 rows a batch make 8 batches an epoch)."""
    if not CSV:
        rng = np.random.default_rng(31)
        x = rng.standard_normal((rows, FEATURES)).astype("float32")
        y = (x[:, :4].sum(1) > 0).astype("int32")
        path = Path(tempfile.mkdtemp(prefix="corpus-csv-")) / "sensors.csv"
        head = ",".join([f"f{k}" for k in range(FEATURES)] + ["label"])
        lines = [",".join(f"{v:.5f}" for v in row) + f",{c}" for row, c in zip(x, y)]
        path.write_text(head + "\n" + "\n".join(lines) + "\n")
        CSV.append(str(path))
    return CSV[0]


def pack(features, label):
    """The tutorial's ``pack_features_vector``: the dict of columns stacked into one
    float matrix."""
    return tf.stack(list(features.values()), axis=1), label


def csv_dataset(pipe: str) -> tf.data.Dataset:
    """``make_csv_dataset`` over the file in batches of 256, shuffled, repeated, then
    packed by a ``map`` (``run``); ``fix``: one pass of it cached after the packing;
    ``bare``: its first 4 packed batches made once and cached."""
    once = pipe != "run"
    ds = tf.data.experimental.make_csv_dataset(
        csv_file(), batch_size=256, label_name="label", num_epochs=1 if once else None,
        shuffle=True, shuffle_seed=0).map(pack)
    if pipe == "bare":
        return ds.take(4).cache().repeat()
    if pipe == "fix":
        return ds.cache().repeat().prefetch(tf.data.AUTOTUNE)
    return ds


def sensor_model(keras_model):
    """A 40-128-64-2 MLP over the packed columns."""
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((FEATURES,)), L.Dense(128, activation="relu"),
        L.Dense(64, activation="relu"), L.Dense(2)]))


def bf16_cnn(keras_model, policy: str):
    """A small CNN on 64x64 RGB images (3 conv layers, 32-64-128 filters) built under the
    global dtype ``policy``, its logits cast to float32 as the mixed-precision guide
    says; the policy is put back to float32 once the model is built."""
    tf.keras.mixed_precision.set_global_policy(policy)
    try:
        net = tf.keras.Sequential([
            tf.keras.Input((64, 64, 3)),
            L.Conv2D(32, 3, padding="same", activation="relu"), L.MaxPooling2D(),
            L.Conv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(),
            L.Conv2D(128, 3, padding="same", activation="relu"), L.GlobalAveragePooling2D(),
            L.Dense(10), L.Activation("linear", dtype="float32")])
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")
    return keras_model(net)


def image_batches(pipe: str) -> tf.data.Dataset:
    """Four batches of 32 images and labels made once, cached and repeated."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, (128, 64, 64, 3)).astype("float32")
    y = rng.integers(0, 10, 128).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(32).cache().repeat()


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_csv_dataset",
             fit_spec("run", data=csv_dataset, net=lambda: sensor_model(keras_model)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 8,
             split="tuned", fix="the packed CSV batches cached: cache() after one pass",
             share_from_fix="input", share_variant="bare", warmup=8,
             tags=["keras_fit", "tf_data", "csv", "make_csv_dataset"])
    CASES["tf_fit_csv_dataset"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a 40-128-64-2 MLP on a 2,048-row CSV file (40 float "
        "columns and a label) read with ``tf.data.experimental.make_csv_dataset`` "
        "(batches of 256, shuffled, repeated; every epoch parses the text again) and "
        "packed into one matrix by the tutorial's ``pack_features_vector`` ``map``: the "
        "input share is what the same ``fit`` on batches made once saves, and the fix "
        "caches the packed batches after the first pass.")
    fit_case("tf_fit_mixed_bfloat16",
             fit_spec("run", data=image_batches,
                      net=lambda: bf16_cnn(keras_model, "mixed_bfloat16"),
                      fix_net=lambda: bf16_cnn(keras_model, "float32")),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True,
              "precision": "bf16"}, 6,
             split="tuned", fix="the float32 policy instead of mixed_bfloat16", warmup=3,
             tags=["keras_fit", "mixed_precision", "bf16"])
    CASES["tf_fit_mixed_bfloat16"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a small CNN (32-64-128 filters, 64x64 images, batches "
        "of 32 made once and cached) built under "
        "``keras.mixed_precision.set_global_policy('mixed_bfloat16')`` on a CPU, as the "
        "mixed-precision guide shows for accelerators: compute-bound; the fix measured "
        "beside it is the same model under the float32 policy.")


# -- inference: a Keras classifier called eagerly batch by batch ------------------------------
def review_scorer() -> tf.keras.Model:
    """A bag-of-features sentiment scorer: 300 features through 128-64 Dense layers with
    dropout and batch normalisation to 3 class probabilities."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((300,)), L.Dense(128, activation="relu"), L.BatchNormalization(),
        L.Dropout(0.2), L.Dense(64, activation="relu"), L.Dropout(0.2),
        L.Dense(3, activation="softmax")])


@case("tf_infer_eager_model_call", "tensorflow", "inference", 6,
      {**TF, "mode": "inference"}, split="tuned", warmup=3,
      fix="the model's call wrapped in tf.function", share_from_fix="host_overhead",
      tags=["eager", "keras_call", "batch_scoring"])
def tf_infer_eager_model_call(variant):
    """A scoring job running a Keras scorer over a table of 300-feature rows batch by
    batch: each step slices 4 batches of 32 rows and calls ``model(x, training=False)``
    eagerly (no ``tf.function``, no ``predict``) on each, reading the predicted class
    with ``np.argmax`` of ``.numpy()``; the fix wraps the model's call in one
    ``tf.function``."""
    net = review_scorer()
    call = tf.function(net) if variant == "fix" else net
    rows = np.random.default_rng(3).standard_normal((1024, 300)).astype("float32")

    def step(i):
        out = []
        for k in range(4):
            j = (128 * i + 32 * k) % 1024
            probs = call(rows[j:j + 32], training=False)
            out.append(np.argmax(probs.numpy(), axis=1))
        return out
    return step
