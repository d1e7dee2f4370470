"""Held-out TensorFlow cases of everyday programs, written without looking at the advisor's
rules (captured and measured by ``run_tf.py``): a ``tf.function`` training step handed the
decayed learning rate as a Python float, so it traces again every step, and a Keras
``fit`` on a plain Python generator that builds each batch row by row.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES, case
from corpus.tf_cases_field import TF, mlp

CLASSES = 10


# -- start-up: a tf.function retraced every step by a Python float argument --------------------
def sgd_step(net):
    """A ``tf.function`` GradientTape step with a hand-written SGD update at rate ``lr``."""
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y, lr):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        for v, g in zip(net.trainable_variables, tape.gradient(loss, net.trainable_variables)):
            v.assign_sub(lr * g)
        return loss
    return train_step


@case("tf_tape_retrace_python_lr", "tensorflow", "training", 4,
      {**TF, "mode": "training"}, split="tuned", warmup=3,
      fix="the learning rate passed as a tf.constant (one trace)",
      share_from_fix="startup", tags=["gradient_tape", "retrace"])
def tf_tape_retrace_python_lr(variant):
    """An MLP (64-256-256-10) trained with a ``tf.function`` GradientTape step on batches
    of 64 held in memory, the learning rate decayed each step in Python
    (``0.05 * 0.999 ** i``) and passed to the step as a Python float: a new float is a new
    signature, so ``tf.function`` traces and builds the graph again every step; passing
    ``tf.constant(lr)`` traces once."""
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(4)
    xs = tf.constant(rng.standard_normal((1024, 64)).astype(np.float32))
    ys = tf.constant(rng.integers(0, CLASSES, 1024).astype(np.int32))
    step = sgd_step(mlp(64, 256, CLASSES))

    def run(i):
        k = (64 * i) % 1024
        lr = 0.05 * 0.999 ** i
        if variant == "fix":
            lr = tf.constant(lr, tf.float32)
        return float(step(xs[k:k + 64], ys[k:k + 64], lr))
    return run


# -- input: Keras fit on a plain Python generator building each batch row by row ---------------
WORDS = ["disk", "cpu", "timeout", "retry", "user", "login", "failed", "ok", "cache", "miss",
         "write", "read", "socket", "closed", "queue", "full", "gc", "pause", "slow", "query"]
BUCKETS = 256


def log_lines(n: int = 4096, seed: int = 21) -> list[tuple[str, int]]:
    """Raw log messages of 20-60 words and their severity class."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = rng.integers(0, len(WORDS), int(rng.integers(20, 61)))
        out.append((" ".join(WORDS[int(w)] for w in words), int(rng.integers(CLASSES))))
    return out


def hashed_trigrams(text: str) -> np.ndarray:
    """Character trigrams of a message hashed into ``BUCKETS`` counts, in Python."""
    row = np.zeros(BUCKETS, np.float32)
    for k in range(len(text) - 2):
        row[hash(text[k:k + 3]) % BUCKETS] += 1.0
    return row / max(len(text) - 2, 1)


def log_batches(pipe: str, batch: int = 64):
    """A Python generator of (features, labels) numpy batches: each row hashed from its
    message as the batch is asked for (``pipe`` ``bare``: the first 4 batches made once,
    yielded again and again)."""
    lines = log_lines()

    def build(k):
        rows = [lines[(batch * k + r) % len(lines)] for r in range(batch)]
        return (np.stack([hashed_trigrams(t) for t, _ in rows]),
                np.array([c for _, c in rows], np.int32))
    if pipe == "bare":
        made = [build(k) for k in range(4)]
        k = 0
        while True:
            yield made[k % 4]
            k += 1
    k = 0
    while True:
        yield build(k)
        k += 1


def log_model(keras_model):
    """The compiled classifier of the hashed trigrams (``keras_model`` compiles it)."""
    L = tf.keras.layers
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((BUCKETS,)), L.Dense(256, activation="relu"),
        L.Dense(128, activation="relu"), L.Dense(CLASSES)]))


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_python_generator",
             fit_spec("run", data=log_batches, net=lambda: log_model(keras_model)),
             {**TF, "mode": "training", "keras_fit": True}, 8, split="tuned",
             share_from_fix="input", share_variant="bare", warmup=3,
             tags=["keras_fit", "generator", "python_features"])
    CASES["tf_fit_python_generator"].build.__doc__ = (
        "Keras 3 ``model.fit`` of an MLP log-severity classifier on a plain Python "
        "generator (no tf.data in the program) that hashes the character trigrams of each "
        "message of a batch of 64 in a Python loop as the batch is asked for: the step "
        "waits for the generator (input-bound).")
