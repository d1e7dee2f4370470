"""Held-out TensorFlow / Keras programs of kinds the others lack, written and scored without
looking at the advisor's rules (captured and measured by ``run_tf.py``): ``fit`` of a
functional model with two inputs (photos and table rows) fed by a ``tf.data`` zip of two
pipelines, the photos decoded from JPEG in a map without ``num_parallel_calls``;
character-level text generation calling a GRU model eagerly once per character; ``fit``
of a small CNN compiled with ``jit_compile=True``; and ``fit`` of a custom Keras layer
whose ``call`` loops over the time steps in Python (unrolled in the traced graph).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


# -- input: a zip of a JPEG image pipeline and a table-row pipeline -------------------------
N_LISTINGS = 128


def listings(seed: int = 81):
    """Listing photos as JPEG bytes (512x512, smooth enough to compress as photos do),
    12 numeric features per listing and a price class (one of 5)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (N_LISTINGS, 20, 20, 3)).astype("float32")
    photos = tf.cast(tf.image.resize(base, (512, 512)), tf.uint8)
    jpegs = [tf.io.encode_jpeg(p, quality=90).numpy() for p in photos]
    rows = rng.standard_normal((N_LISTINGS, 12)).astype("float32") * 5.0 + 3.0
    return jpegs, rows, rng.integers(0, 5, N_LISTINGS).astype("int32")


def load_photo(jpeg):
    img = tf.image.decode_jpeg(jpeg, channels=3)
    img = tf.image.resize(tf.image.convert_image_dtype(img, tf.float32), (64, 64))
    return tf.image.random_flip_left_right(img)


def listing_batches(pipe: str) -> tf.data.Dataset:
    """``run``: the photo pipeline (``map(load_photo)``, no ``num_parallel_calls``) zipped
    with the standardised rows and the labels, batched 32 and prefetched; ``fix``: both
    maps with ``num_parallel_calls=AUTOTUNE``; ``bare``: the first batches made once."""
    jpegs, rows, labels = listings()
    mean, std = rows.mean(0), rows.std(0)
    par = AUTOTUNE if pipe == "fix" else None
    images = tf.data.Dataset.from_tensor_slices(jpegs).map(load_photo, num_parallel_calls=par)
    table = tf.data.Dataset.from_tensor_slices(rows).map(lambda r: (r - mean) / std,
                                                         num_parallel_calls=par)
    ds = tf.data.Dataset.zip((images, table, tf.data.Dataset.from_tensor_slices(labels)))
    ds = ds.map(lambda i, t, y: ({"photo": i, "features": t}, y)).repeat()
    if pipe == "bare":
        return ds.take(32 * 4).batch(32).cache().repeat()
    return ds.batch(32).prefetch(AUTOTUNE)


def listing_model(keras_model):
    """A conv branch for the photo, a dense branch for the row, concatenated."""
    photo = tf.keras.Input((64, 64, 3), name="photo")
    features = tf.keras.Input((12,), name="features")
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(photo)
    x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = L.GlobalAveragePooling2D()(x)
    t = L.Dense(32, activation="relu")(features)
    h = L.Dense(64, activation="relu")(L.Concatenate()([x, t]))
    return keras_model(tf.keras.Model({"photo": photo, "features": features}, L.Dense(5)(h)))


# -- host overhead: text generation calling the model eagerly per character ------------------
VOCAB = 65
CHARS_PER_STEP = 5


class CharModel(tf.keras.Model):
    """The text-generation tutorial's model: Embedding, GRU returning its state, Dense."""

    def __init__(self):
        super().__init__()
        self.embedding = L.Embedding(VOCAB, 64)
        self.gru = L.GRU(256, return_sequences=True, return_state=True)
        self.dense = L.Dense(VOCAB)

    def call(self, inputs, states=None, training=False):
        x = self.embedding(inputs, training=training)
        if states is None:
            x, states = self.gru(x, training=training)
        else:
            x, states = self.gru(x, initial_state=states, training=training)
        return self.dense(x, training=training), states


@case("tf_infer_char_generation_eager", "tensorflow", "inference", 3,
      {**TF, "mode": "inference", "batch": 1}, split="tuned", warmup=3,
      fix="the one-character step in a tf.function (the tutorial's OneStep)",
      share_from_fix="host_overhead", tags=["generation", "eager", "rnn", "text"])
def tf_infer_char_generation_eager(variant):
    """Character-level text generation with the tutorial's GRU model (Embedding 64,
    GRU 256, Dense over 65 characters): each step generates 5 characters, calling the
    model eagerly on the last character with the GRU state carried over, dividing the
    logits by a temperature and sampling with ``tf.random.categorical``; the fix runs
    the same one-character step as a ``tf.function``."""
    tf.keras.utils.set_random_seed(0)
    net = CharModel()
    net(tf.constant([[1]]))

    def one_step(ids, states):
        logits, states = net(ids, states=states)
        logits = logits[:, -1, :] / 0.8
        return tf.random.categorical(logits, num_samples=1), states
    if variant == "fix":
        one_step = tf.function(one_step)

    def run(i):
        ids, states, out = tf.constant([[i % VOCAB]], dtype=tf.int64), None, []
        for _ in range(CHARS_PER_STEP):
            ids, states = one_step(ids, states)
            out.append(int(ids[0, 0]))
        return out
    return run


# -- compute: a small CNN compiled with jit_compile=True --------------------------------------
def digit_batches(pipe: str) -> tf.data.Dataset:
    """28x28 grey images held in memory, shuffled, batched 32 and prefetched (the same for
    every variant)."""
    rng = np.random.default_rng(82)
    x = rng.random((32 * 8, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, 32 * 8).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).repeat().batch(32) \
        .prefetch(AUTOTUNE)


def digit_cnn():
    """The Keras MNIST convnet example, compiled with Adam and ``jit_compile=True``."""
    net = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)), L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(), L.Flatten(), L.Dropout(0.5),
        L.Dense(10, activation="softmax")])
    net.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                metrics=["accuracy"], jit_compile=True)
    return net


# -- a custom layer looping over the time steps in Python -------------------------------------
SEQ = 60


class LoopRNN(L.Layer):
    """A simple RNN cell written as a custom layer: ``call`` loops over the sequence's
    time steps in Python and stacks the states (traced once, unrolled in the graph)."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform")
        self.u = self.add_weight(shape=(self.units, self.units), initializer="orthogonal")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros")

    def call(self, x):
        h = tf.zeros((tf.shape(x)[0], self.units))
        for t in range(x.shape[1]):
            h = tf.tanh(tf.matmul(x[:, t], self.w) + tf.matmul(h, self.u) + self.b)
        return h


def sensor_windows(pipe: str) -> tf.data.Dataset:
    """Windows of 60 readings of 8 sensors held in memory, batched 128 (the same for every
    variant)."""
    rng = np.random.default_rng(83)
    x = rng.standard_normal((128 * 4, SEQ, 8)).astype("float32")
    y = rng.integers(0, 4, 128 * 4).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(128).prefetch(AUTOTUNE)


def sensor_model(keras_model, builtin: bool = False):
    rnn = L.SimpleRNN(128) if builtin else LoopRNN(128)
    return keras_model(tf.keras.Sequential([tf.keras.Input((SEQ, 8)), rnn,
                                            L.Dense(32, activation="relu"), L.Dense(4)]))


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_facts = {**TF, "mode": "training", "keras_fit": True, "tf_data": True}
    fit_case("tf_fit_two_input_zip",
             fit_spec("run", data=listing_batches, net=lambda: listing_model(keras_model)),
             {**fit_facts, "tf_data_parallel": False}, 8, split="tuned", warmup=3,
             fix="map(num_parallel_calls=AUTOTUNE) on both pipelines",
             share_from_fix="input", share_variant="bare",
             tags=["keras_fit", "tf_data", "functional", "multi_input", "jpeg"])
    CASES["tf_fit_two_input_zip"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a functional model with two inputs (a 64x64 listing "
        "photo through two conv layers, 12 table features through a Dense layer, "
        "concatenated, 5 price classes) on ``tf.data.Dataset.zip`` of a photo pipeline "
        "(512x512 JPEGs decoded, resized and flipped in a ``map`` without "
        "``num_parallel_calls``), a standardised-row pipeline and the labels, batched 32 "
        "and prefetched; the fix maps both with ``num_parallel_calls=AUTOTUNE``.")
    fit_case("tf_fit_jit_compile_cnn", fit_spec("bare", data=digit_batches, net=digit_cnn),
             {**fit_facts, "compiled": "xla"}, 10, split="holdout", warmup=3,
             tags=["keras_fit", "xla", "jit_compile"])
    CASES["tf_fit_jit_compile_cnn"].build.__doc__ = (
        "Keras 3 ``model.fit`` of the Keras MNIST convnet example (two conv-pool blocks, "
        "dropout, softmax, Adam, accuracy metric) compiled with ``jit_compile=True`` on "
        "28x28 images held in memory, shuffled, batched 32 and prefetched: the convolutions "
        "are the work, nothing to fix.")
    fit_case("tf_fit_custom_rnn_python_loop",
             fit_spec("bare", data=sensor_windows, net=lambda: sensor_model(keras_model),
                      fix_net=lambda: sensor_model(keras_model, builtin=True)),
             fit_facts, 8, split="holdout", warmup=3,
             fix="the built-in keras.layers.SimpleRNN(128)",
             tags=["keras_fit", "custom_layer", "rnn", "unrolled"])
    CASES["tf_fit_custom_rnn_python_loop"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a sensor-window classifier whose recurrent layer is a "
        "custom ``Layer`` (128 units) with a ``call`` that loops over the 60 time steps in "
        "Python (two matmuls and a tanh each, unrolled in the traced graph), then Dense "
        "32 and 4 classes, on windows of 8 sensors held in memory, batched 128; the fix a "
        "user tries is the built-in ``SimpleRNN(128)``.")
