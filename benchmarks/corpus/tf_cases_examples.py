"""Held-out TensorFlow case shaped like a Keras code example, written without looking at
the advisor's rules (captured and measured by ``run_tf.py``): "Structured data
classification with FeatureSpace", the example's small classifier trained with ``fit``
on a larger patient table in batches of 1,024, every batch encoded by
``keras.utils.FeatureSpace`` in a parallel ``tf.data`` ``map`` (normalised, discretised,
looked-up and crossed columns).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES
from corpus.tf_cases_field import TF

L = tf.keras.layers
FS = tf.keras.utils.FeatureSpace
INTEGER = ("sex", "cp", "fbs", "restecg", "exang", "ca")
FLOATS = ("trestbps", "chol", "thalach", "oldpeak", "slope")
BUILT: dict = {}
BATCH = 1024


def patient_table(rows: int = 16_000, seed: int = 13) -> dict[str, np.ndarray]:
    """A heart-disease table with the example's columns, as read from CSV, column by
    column: integer-coded categories, a string ``thal``, numeric readings and the
    ``target`` label (16,000 patients where the example has 303)."""
    rng = np.random.default_rng(seed)
    return {
        "age": rng.integers(29, 78, rows), "sex": rng.integers(0, 2, rows),
        "cp": rng.integers(0, 5, rows), "trestbps": rng.integers(94, 200, rows),
        "chol": rng.integers(126, 564, rows), "fbs": rng.integers(0, 2, rows),
        "restecg": rng.integers(0, 3, rows), "thalach": rng.integers(71, 202, rows),
        "exang": rng.integers(0, 2, rows), "oldpeak": rng.uniform(0, 6.2, rows).round(1),
        "slope": rng.integers(1, 4, rows), "ca": rng.integers(0, 4, rows),
        "thal": rng.choice(["fixed", "normal", "reversible"], rows),
        "target": rng.integers(0, 2, rows)}


def dataframe_to_dataset(table: dict[str, np.ndarray]) -> tf.data.Dataset:
    """The example's ``dataframe_to_dataset``: a dict of columns and the labels, shuffled."""
    columns = dict(table)
    labels = columns.pop("target")
    ds = tf.data.Dataset.from_tensor_slices((columns, labels))
    return ds.shuffle(buffer_size=len(labels), seed=0)


def feature_space(train_ds: tf.data.Dataset):
    """The example's ``FeatureSpace`` (integer and string categoricals, a discretised age,
    normalised readings, two crosses, concatenated), adapted once on the training
    features; built once per process."""
    if "fs" not in BUILT:
        space = FS(
            features={**{k: FS.integer_categorical(num_oov_indices=0) for k in INTEGER},
                      "thal": FS.string_categorical(num_oov_indices=0),
                      "age": FS.float_discretized(num_bins=30),
                      **{k: FS.float_normalized() for k in FLOATS}},
            crosses=[FS.cross(feature_names=("sex", "age"), crossing_dim=64),
                     FS.cross(feature_names=("thal", "ca"), crossing_dim=16)],
            output_mode="concat")
        space.adapt(train_ds.map(lambda x, _: x))
        BUILT["fs"] = space
    return BUILT["fs"]


def split_tables():
    """The example's split: a random fifth of the rows for validation, the rest to train."""
    table = patient_table()
    val = np.random.default_rng(1337).random(len(table["target"])) < 0.2
    return ({k: v[~val] for k, v in table.items()}, {k: v[val] for k, v in table.items()})


def encoded_batches(pipe: str) -> tf.data.Dataset:
    """The training rows batched by 1,024 and encoded by the feature space in a parallel
    ``map``, prefetched, epoch after epoch (``run``); ``fix``: the encoded batches cached
    after the map; ``bare``: the first 4 encoded batches made once and cached."""
    train, _ = split_tables()
    train_ds = dataframe_to_dataset(train).batch(BATCH)
    space = feature_space(train_ds)
    ds = train_ds.map(lambda x, y: (space(x), y), num_parallel_calls=tf.data.AUTOTUNE)
    if pipe == "bare":
        return ds.take(4).cache().repeat()
    if pipe == "fix":
        return ds.cache().repeat().prefetch(tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE).repeat()


def training_model() -> tf.keras.Model:
    """The example's model on the encoded features: ``Dense(32, relu)``, dropout 0.5,
    ``Dense(1, sigmoid)``; Adam, binary cross-entropy, accuracy."""
    train, _ = split_tables()
    space = feature_space(dataframe_to_dataset(train).batch(BATCH))
    inputs = space.get_encoded_features()
    x = L.Dropout(0.5)(L.Dense(32, activation="relu")(inputs))
    model = tf.keras.Model(inputs=inputs, outputs=L.Dense(1, activation="sigmoid")(x))
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return model


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` case with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_featurespace_map",
             fit_spec("run", data=encoded_batches, net=training_model),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True,
              "tf_data_parallel": True}, 8,
             split="tuned", fix="cache() after the FeatureSpace map",
             share_from_fix="input", share_variant="bare", warmup=14,
             tags=["keras_fit", "tf_data", "feature_space", "structured", "example"])
    CASES["tf_fit_featurespace_map"].build.__doc__ = (
        "The Keras example \"Structured data classification with FeatureSpace\": "
        "``model.fit`` of a Dense(32)-dropout-Dense(1) classifier on a 16,000-row patient "
        "table with the example's columns (12,800 training rows shuffled by "
        "``shuffle(len)``, batches of 1,024, epoch after epoch; the capture's and the "
        "truth's steps lie inside one epoch) whose every "
        "batch a ``keras.utils.FeatureSpace`` encodes in "
        "``map(lambda x, y: (feature_space(x), y), num_parallel_calls=AUTOTUNE)`` + "
        "``prefetch`` (6 integer and 1 string categorical, a discretised age, 5 normalised "
        "readings, two hashed crosses, concatenated): the input share is what the same "
        "``fit`` on batches made once saves, and the fix caches the encoded batches after "
        "the map.")
