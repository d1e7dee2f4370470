"""Held-out TensorFlow cases of plain programs, written without looking at the advisor's
rules (captured and measured by ``run_tf.py``): a GradientTape step whose per-sample loss
weights come from NumPy through ``tf.py_function``, and a GradientTape loop over epochs of
a ``tf.data`` pipeline that parses CSV lines and refills a large ``shuffle`` buffer at
the start of every epoch.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CLOCK, case
from corpus.tf_cases_field import TF, mlp, tape_step

CLASSES = 5


# -- per-sample weights from NumPy inside the compiled step ---------------------------------
def numpy_weights(y: tf.Tensor) -> np.ndarray:
    """Inverse class frequencies of the batch, per sample (``np.bincount``)."""
    y = y.numpy()
    counts = np.bincount(y, minlength=CLASSES).astype(np.float32)
    w = len(y) / (CLASSES * np.maximum(counts, 1.0))
    return w[y]


def tf_weights(y: tf.Tensor) -> tf.Tensor:
    counts = tf.cast(tf.math.bincount(y, minlength=CLASSES), tf.float32)
    w = tf.cast(tf.size(y), tf.float32) / (CLASSES * tf.maximum(counts, 1.0))
    return tf.gather(w, y)


def weighted_step(net, opt, weights):
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True), sample_weight=weights(y))
        opt.apply_gradients(zip(tape.gradient(loss, net.trainable_variables),
                                net.trainable_variables))
        return loss
    return train_step


def skewed_rows(n: int = 1024, features: int = 32, seed: int = 5):
    """Feature rows whose 5 classes are imbalanced (60/20/10/6/4 %)."""
    rng = np.random.default_rng(seed)
    y = rng.choice(CLASSES, n, p=[0.6, 0.2, 0.1, 0.06, 0.04]).astype(np.int32)
    return rng.standard_normal((n, features)).astype(np.float32), y


@case("tf_tape_pyfunc_weights", "tensorflow", "training", 12,
      {**TF, "mode": "training", "tf_data": True},
      split="holdout", warmup=4, fix="the weights in TensorFlow ops (tf.math.bincount, "
      "tf.gather) inside the tf.function", share_from_fix="host_overhead",
      tags=["gradient_tape", "py_function", "sample_weight", "imbalanced"])
def tf_tape_pyfunc_weights(variant):
    """A ``tf.function`` GradientTape step of a 32-256-256-5 MLP on batches of 512 rows of an
    imbalanced table (held in memory, shuffled, prefetched), its loss weighted per sample
    by the batch's inverse class frequencies computed in NumPy (``np.bincount``) through
    ``tf.py_function``: the graph stops at the call, hands the labels to Python and
    waits for it; the loss is read every step.  The fix computes the same weights with
    ``tf.math.bincount`` and ``tf.gather`` inside the graph."""
    tf.keras.utils.set_random_seed(0)
    net, opt = mlp(32, 256, CLASSES), tf.keras.optimizers.SGD(0.05)
    if variant == "fix":
        weights = tf_weights
    else:
        def weights(y):
            w = tf.py_function(numpy_weights, [y], tf.float32)
            w.set_shape(y.shape)
            return w
    step = weighted_step(net, opt, weights)
    it = iter(tf.data.Dataset.from_tensor_slices(skewed_rows()).shuffle(1024, seed=0)
              .repeat().batch(512).prefetch(2))

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        return float(step(x, y))
    return run


# -- input: a shuffle buffer refilled by parsing every epoch ------------------------------------
COLUMNS = 24


def csv_lines(n: int = 512, seed: int = 6) -> list[str]:
    """A CSV table's lines: 24 numeric columns and a 0/1 label."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, COLUMNS)).round(4)
    return [",".join(map(str, row)) + f",{int(row[0] > 0)}" for row in x]


def parse(line):
    cols = tf.io.decode_csv(line, [[0.0]] * COLUMNS + [[0]])
    x = tf.stack(cols[:-1])
    return (x - tf.reduce_mean(x)) / (tf.math.reduce_std(x) + 1e-6), cols[-1]


def csv_epochs(variant: str) -> tf.data.Dataset:
    """The lines parsed by a ``map``, shuffled with a buffer as large as the table and
    batched 128; the fix caches the parsed rows before the shuffle."""
    ds = tf.data.Dataset.from_tensor_slices(csv_lines()).map(parse)
    if variant == "fix":
        ds = ds.cache()
    return ds.shuffle(buffer_size=512, seed=0).batch(128).prefetch(2)


@case("tf_tape_shuffle_refill", "tensorflow", "training", 6,
      {**TF, "mode": "training", "tf_data": True, "tf_data_parallel": False},
      split="tuned", warmup=2, fix="cache() the parsed rows before shuffle",
      tags=["gradient_tape", "tf_data", "shuffle_buffer", "epochs", "csv"])
def tf_tape_shuffle_refill(variant):
    """A ``tf.function`` GradientTape step of a 24-256-256-2 MLP trained epoch after epoch
    (``for x, y in ds``, 4 batches of 128 an epoch) on a table of 512 CSV lines that a
    ``tf.data`` pipeline parses with ``decode_csv`` in a serial ``map``, shuffles with
    ``shuffle(buffer_size=512)`` and batches: the first batch of every epoch waits for
    the buffer to fill, i.e. for every line to be parsed again (input, at each epoch's
    start); ``cache()`` after the ``map`` parses once and refills from memory."""
    tf.keras.utils.set_random_seed(0)
    step = tape_step(mlp(COLUMNS, 256, 2), tf.keras.optimizers.Adam(1e-3))
    ds, state = csv_epochs(variant), {}

    def run(i):
        with CLOCK("input"):
            try:
                x, y = next(state["it"])
            except (KeyError, StopIteration):
                state["it"] = iter(ds)
                x, y = next(state["it"])
        return float(step(x, y))
    return run
