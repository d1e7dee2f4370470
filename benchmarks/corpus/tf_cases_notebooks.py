"""Held-out TensorFlow cases as notebooks (Kaggle, Colab) write them, written without
looking at the advisor's rules (captured and measured by ``run_tf.py``): Keras ``fit`` of
a tabular classifier fed ``tf.data.Dataset.from_tensor_slices((dict(df), labels))`` whose
preprocessing layers (``Normalization``, ``StringLookup``, ``IntegerLookup``) are adapted
on the data and applied inside the model, as the structured-data tutorial builds it; and
the transfer-learning tutorial's frozen ``MobileNetV2`` base under a new classification
head, trained end to end through the frozen base every step.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE
NUMERIC = ("age", "trestbps", "chol", "thalach", "oldpeak", "slope")
INTEGER = {"sex": 2, "cp": 5, "fbs": 2, "restecg": 3, "exang": 2, "ca": 4}
THAL = np.array(["fixed", "normal", "reversible"])


def patients(n: int = 16384, seed: int = 41) -> tuple[dict, np.ndarray]:
    """The heart-disease table as ``dict(df)`` gives it (one array per column) and its
    ``target`` column."""
    rng = np.random.default_rng(seed)
    cols = {c: (rng.standard_normal(n) * (10 + k) + 50 * (k + 1)).astype("float32")
            for k, c in enumerate(NUMERIC)}
    cols.update({c: rng.integers(0, m, n).astype("int64") for c, m in INTEGER.items()})
    cols["thal"] = THAL[rng.integers(0, 3, n)]
    return cols, rng.integers(0, 2, n).astype("int32")


PREPROCESSING: list[dict] = []


def encoders() -> dict:
    """Per column a preprocessing layer adapted on the training frame (once per
    process): ``Normalization`` for the numeric ones, ``IntegerLookup`` and
    ``StringLookup`` one-hot for the categorical ones."""
    if not PREPROCESSING:
        cols, _ = patients()
        out = {}
        for c in NUMERIC:
            out[c] = L.Normalization(axis=None)
            out[c].adapt(cols[c])
        for c in INTEGER:
            out[c] = L.IntegerLookup(output_mode="one_hot")
            out[c].adapt(cols[c])
        out["thal"] = L.StringLookup(output_mode="one_hot")
        out["thal"].adapt(cols["thal"])
        PREPROCESSING.append(out)
    return PREPROCESSING[0]


def encode(features: dict, enc: dict):
    """The columns encoded and concatenated into one feature vector per row."""
    ops = tf.keras.ops
    parts = [enc[c](ops.expand_dims(features[c], -1)) for c in NUMERIC]
    parts += [enc[c](features[c]) for c in (*INTEGER, "thal")]
    return L.Concatenate()([ops.cast(p, "float32") for p in parts])


def head(x):
    """Dense(32) -> Dropout(0.5) -> 2 logits, the tutorial's classifier."""
    x = L.Dense(32, activation="relu")(x)
    return L.Dense(2)(L.Dropout(0.5)(x))


def tabular_model(keras_model):
    """A functional model with one input per column, the preprocessing inside it."""
    enc = encoders()
    inputs = {c: tf.keras.Input((), name=c, dtype="float32") for c in NUMERIC}
    inputs.update({c: tf.keras.Input((), name=c, dtype="int64") for c in INTEGER})
    inputs["thal"] = tf.keras.Input((), name="thal", dtype="string")
    return keras_model(tf.keras.Model(inputs, head(encode(inputs, enc))))


def patient_batches(pipe: str) -> tf.data.Dataset:
    """``from_tensor_slices((dict(df), labels))``, shuffled row by row over the whole
    table, batched 1,024 at a time and prefetched; ``bare``: its first 4 batches made
    once and held as tensors; ``fix``: the row indices shuffled and batched, each batch's rows
    gathered from the columns in one parallel ``map``."""
    cols, target = patients()
    if pipe == "fix":
        def rows(idx):
            return {c: tf.gather(v, idx) for c, v in cols.items()}, tf.gather(target, idx)
        n = len(target)
        return (tf.data.Dataset.range(n).shuffle(n, seed=0).repeat().batch(1024)
                .map(rows, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE))
    ds = tf.data.Dataset.from_tensor_slices((cols, target)).shuffle(len(target), seed=0)
    ds = ds.repeat().batch(1024)
    return made_once(ds) if pipe == "bare" else ds.prefetch(AUTOTUNE)


def made_once(ds: tf.data.Dataset) -> tf.data.Dataset:
    """The dataset's first 4 batches made once and held as tensors, repeated: the same
    ``fit`` on batches whose input costs nothing."""
    made = list(ds.take(4))
    return tf.data.Dataset.from_tensor_slices(
        tf.nest.map_structure(lambda *b: tf.stack(b), *made)).repeat()


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_dataframe_preprocessing_layers",
             fit_spec("run", data=patient_batches,
                      net=lambda: tabular_model(keras_model)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 6,
             split="tuned", warmup=4, share_from_fix="input", share_variant="bare",
             fix="row indices shuffled and batched, each batch gathered in one parallel "
             "map",
             tags=["keras_fit", "tabular", "preprocessing_layers", "dataframe",
                   "notebook"])
    register_transfer_case(fit_case, fit_spec, keras_model)
    CASES["tf_fit_dataframe_preprocessing_layers"].build.__doc__ = (
        "A notebook's Keras 3 ``model.fit`` of the structured-data tutorial's classifier "
        "on a 16,384-row heart-disease table: ``from_tensor_slices((dict(df), labels))`` "
        "shuffled row by row over the whole table, batched 1,024 at a time and "
        "prefetched, into a functional model with one input per column whose "
        "preprocessing layers, adapted on the table, run inside the model "
        "(``Normalization`` for 6 numeric columns, ``IntegerLookup`` one-hot for 6 "
        "integer codes, ``StringLookup`` one-hot for ``thal``) before "
        "Dense(32)-Dropout-Dense(2): shuffling and batching the 13 columns element by "
        "element takes longer than the step (input); the fix shuffles the row indices, "
        "batches them and gathers each batch's rows in one parallel ``map``; the input "
        "share is what the same ``fit`` on batches made once saves.")


# -- compute: transfer learning through a frozen base ----------------------------------------
def pets(n: int = 512, seed: int = 42):
    """``n`` 96x96 RGB photos scaled to [-1, 1] as MobileNetV2 expects, 2 classes."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (n, 96, 96, 3)).astype("float32"),
            rng.integers(0, 2, n).astype("int32"))


def frozen_base():
    """MobileNetV2 (width 0.35, 96x96, no top), frozen; the same weights in every
    variant."""
    tf.keras.utils.set_random_seed(7)
    base = tf.keras.applications.MobileNetV2((96, 96, 3), alpha=0.35, include_top=False,
                                             weights=None)
    base.trainable = False
    return base


def pooled_head(x):
    """GlobalAveragePooling2D -> Dropout(0.2) -> 2 logits, the tutorial's head."""
    return L.Dense(2)(L.Dropout(0.2)(L.GlobalAveragePooling2D()(x)))


def transfer_model(keras_model, on_features: bool):
    """The frozen base run in inference mode under the head, or the head alone on the
    base's features."""
    if on_features:
        x = tf.keras.Input((3, 3, 1280))
        return keras_model(tf.keras.Model(x, pooled_head(x)))
    x = tf.keras.Input((96, 96, 3))
    return keras_model(tf.keras.Model(x, pooled_head(frozen_base()(x, training=False))))


def pet_batches(pipe: str) -> tf.data.Dataset:
    """The photos shuffled, batched 32 at a time and prefetched; ``fix``: the frozen
    base's features of every photo, computed once with ``predict``, in their place;
    ``bare``: the run's first 4 batches made once."""
    x, y = pets()
    if pipe == "fix":
        x = frozen_base().predict(x, batch_size=64, verbose=0)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=0).repeat()
    ds = ds.batch(32)
    return made_once(ds) if pipe == "bare" else ds.prefetch(AUTOTUNE)


def register_transfer_case(fit_case, fit_spec, keras_model) -> None:
    fit_case("tf_fit_frozen_base_transfer",
             fit_spec("run", data=pet_batches,
                      net=lambda: transfer_model(keras_model, on_features=False),
                      fix_net=lambda: transfer_model(keras_model, on_features=True)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 8,
             split="tuned", warmup=3, also=("bare",),
             fix="the frozen base's features computed once, the head fit on them",
             tags=["keras_fit", "transfer_learning", "frozen_base", "notebook"])
    CASES["tf_fit_frozen_base_transfer"].build.__doc__ = (
        "The transfer-learning tutorial as a notebook runs it: Keras 3 ``model.fit`` of "
        "a new head (global average pooling, dropout, 2 logits) on a frozen MobileNetV2 "
        "base (width 0.35, 96x96 inputs, ``base.trainable = False``, called with "
        "``training=False``), on 512 photos in memory shuffled, batched 32 at a time and "
        "prefetched: every step runs the frozen base's forward pass for the head's "
        "gradients (compute); the fix is the tutorial's feature-extraction route, the "
        "base's features of every photo computed once with ``predict`` and the head "
        "fit on them.")
