"""Held-out TensorFlow / Keras programs of kinds the others lack, written and scored without
looking at the advisor's rules (captured and measured by ``run_tf.py``): ``fit`` on a
dataset that carries per-sample weights for an imbalanced label; ``fit`` of a text
classifier on ``Dataset.from_generator`` over reviews tokenised in Python; a GradientTape
loop that keeps an exponential moving average of the weights by hand, one eager
``assign`` per variable; and a GradientTape loop that writes ``tf.summary`` scalars
every step.
"""

from __future__ import annotations

import re
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import TF, tape_step

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


def cross_entropy():
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


# -- compute: fit on (x, y, sample_weight) for an imbalanced label ----------------------------
def claims(n: int = 4096, features: int = 96, seed: int = 61):
    """Insurance-claim-like rows: ``features`` readings and a rare positive label (about
    one row in ten), with per-row weights that balance the two classes as the
    imbalanced-data tutorial computes them (``total / (2 * count)``)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features)).astype("float32")
    y = (x[:, :4].sum(1) + rng.standard_normal(n) > 3.0).astype("int32")
    counts = np.bincount(y, minlength=2)
    weight_of = n / (2.0 * np.maximum(counts, 1))
    return x, y, weight_of[y].astype("float32")


def weighted_claims(pipe: str) -> tf.data.Dataset:
    """``(x, y, sample_weight)`` shuffled, batched 256 at a time and prefetched (the
    same for every variant)."""
    return (tf.data.Dataset.from_tensor_slices(claims()).shuffle(4096, seed=0).repeat()
            .batch(256).prefetch(AUTOTUNE))


def claim_model() -> tf.keras.Model:
    net = tf.keras.Sequential([tf.keras.Input((96,)), L.Dense(512, activation="relu"),
                               L.Dropout(0.3), L.Dense(512, activation="relu"),
                               L.Dropout(0.3), L.Dense(2)])
    net.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss=cross_entropy(),
                weighted_metrics=["accuracy"])
    return net


# -- input: Dataset.from_generator over reviews tokenised in Python ---------------------------
WORDS = [f"w{k}" for k in range(3000)]
MAX_LEN = 250  # the text-classification tutorial's sequence_length


def review_texts(n: int = 512, seed: int = 62) -> tuple[list[str], np.ndarray]:
    """``n`` synthetic reviews of 150-450 words with punctuation, capitals and the
    ``<br />`` line breaks of scraped reviews, and their sentiment labels."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        words = rng.choice(WORDS, rng.integers(150, 450))
        texts.append(" ".join(w.capitalize() + "." if rng.random() < 0.08 else
                              w + "<br /><br />" if rng.random() < 0.01 else w
                              for w in words))
    return texts, rng.integers(0, 2, n).astype("float32")


VOCAB = {w: k + 2 for k, w in enumerate(WORDS)}  # 0 pads, 1 is out of vocabulary


def tokenize(text: str) -> np.ndarray:
    """Lower-case, drop the line breaks, split on non-letters, look up, cut and pad to
    :data:`MAX_LEN`."""
    words = re.findall(r"[a-z0-9']+", text.lower().replace("<br />", " "))
    ids = [VOCAB.get(t, 1) for t in words][:MAX_LEN]
    out = np.zeros(MAX_LEN, dtype="int32")
    out[:len(ids)] = ids
    return out


def custom_standardization(text):
    """The text-classification tutorial's standardization: lower-case, line breaks and
    punctuation dropped."""
    text = tf.strings.regex_replace(tf.strings.lower(text), "<br />", " ")
    return tf.strings.regex_replace(text, "[^a-z0-9' ]", "")


def review_dataset(pipe: str) -> tf.data.Dataset:
    """``run``: ``from_generator`` over the reviews, tokenised in Python one by one, batched
    64 at a time; ``prefetch``: the same with a prefetch; ``fix``: a ``TextVectorization``
    layer with the same vocabulary mapped over batches of raw text in parallel, prefetched;
    ``bare``: the first batches made once and cached."""
    texts, labels = review_texts()
    if pipe == "fix":
        vectorize = L.TextVectorization(vocabulary=WORDS, output_sequence_length=MAX_LEN,
                                        standardize=custom_standardization)
        return (tf.data.Dataset.from_tensor_slices((texts, labels)).repeat().batch(64)
                .map(lambda t, y: (vectorize(t), y), num_parallel_calls=AUTOTUNE)
                .prefetch(AUTOTUNE))

    def gen():
        while True:
            for text, label in zip(texts, labels):
                yield tokenize(text), label
    sig = (tf.TensorSpec((MAX_LEN,), tf.int32), tf.TensorSpec((), tf.float32))
    ds = tf.data.Dataset.from_generator(gen, output_signature=sig)
    if pipe == "bare":
        return ds.take(64 * 4).batch(64).cache().repeat()
    ds = ds.batch(64)
    return ds.prefetch(AUTOTUNE) if pipe == "prefetch" else ds


def review_model() -> tf.keras.Model:
    """The text-classification tutorial's model: a 16-wide embedding averaged over the
    review, dropout, one logit."""
    net = tf.keras.Sequential([tf.keras.Input((MAX_LEN,), dtype="int32"),
                               L.Embedding(len(WORDS) + 2, 16), L.Dropout(0.2),
                               L.GlobalAveragePooling1D(), L.Dropout(0.2), L.Dense(1)])
    net.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                metrics=[tf.keras.metrics.BinaryAccuracy(threshold=0.0)])
    return net


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_facts = {**TF, "mode": "training", "keras_fit": True, "tf_data": True}
    fit_case("tf_fit_sample_weight_imbalanced",
             fit_spec("run", data=weighted_claims, net=claim_model), fit_facts, 8,
             split="holdout", warmup=3, tags=["keras_fit", "sample_weight", "imbalanced"])
    CASES["tf_fit_sample_weight_imbalanced"].build.__doc__ = (
        "Keras 3 ``model.fit`` of an MLP (96-512-512-2 with dropout, Adam, "
        "``weighted_metrics``) on an imbalanced label (about one positive in ten), the "
        "dataset yielding ``(x, y, sample_weight)`` with class-balancing weights as the "
        "imbalanced-data tutorial computes them, shuffled, batched 256 at a time and "
        "prefetched from memory: compute-bound, nothing to fix.")
    fit_case("tf_fit_generator_tokenized_text",
             fit_spec("run", data=review_dataset, net=review_model), fit_facts, 16,
             split="tuned", warmup=3,
             fix="TextVectorization in a parallel map over raw-text batches + prefetch",
             share_from_fix="input", share_variant="bare", also=("prefetch",),
             tags=["keras_fit", "tf_data", "generator", "text"])
    CASES["tf_fit_generator_tokenized_text"].build.__doc__ = (
        "Keras 3 ``model.fit`` of the text-classification tutorial's model (a 16-wide "
        "Embedding averaged over the review, one logit) on "
        "``tf.data.Dataset.from_generator`` over 512 reviews tokenised in Python (lower-"
        "cased, split with a regex, looked up in a vocabulary dict, padded to 250 ids), "
        "batched 64 at a time without prefetch: the step waits for the generator "
        "(input-bound); the fix maps a ``TextVectorization`` layer with the same "
        "vocabulary over batches of raw text in parallel and prefetches (a prefetch "
        "alone is measured beside it).")


# -- host overhead: an EMA of the weights kept by hand in Python -------------------------------
def tabular_batches(features: int = 64, batch: int = 256) -> tf.data.Dataset:
    rng = np.random.default_rng(63)
    x = rng.standard_normal((batch * 16, features)).astype("float32")
    y = rng.integers(0, 10, batch * 16).astype("int32")
    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(batch * 16, seed=0).repeat()
            .batch(batch).prefetch(AUTOTUNE))


@case("tf_tape_ema_weights_by_hand", "tensorflow", "training", 8,
      {**TF, "mode": "training", "tf_data": True}, split="tuned", warmup=4,
      fix="the EMA update in one tf.function", share_from_fix="host_overhead",
      tags=["gradient_tape", "ema", "eager"])
def tf_tape_ema_weights_by_hand(variant):
    """A ``tf.function`` GradientTape step of a 6-hidden-layer MLP (64-128x6-10, Adam)
    on prefetched batches of 256 rows, then an exponential moving average of the weights
    kept by hand for evaluation: a Python loop over the 14 trainable variables doing
    ``ema.assign(decay * ema + (1 - decay) * w)`` eagerly, three ops a variable; the fix
    runs the same loop inside one ``tf.function``."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([tf.keras.Input((64,)),
                               *(L.Dense(128, activation="relu") for _ in range(6)),
                               L.Dense(10)])
    train_step = tape_step(net, tf.keras.optimizers.Adam(1e-3))
    ema = [tf.Variable(v, trainable=False) for v in net.trainable_variables]
    decay = 0.999

    def update_ema():
        for e, w in zip(ema, net.trainable_variables):
            e.assign(decay * e + (1.0 - decay) * w)
    fused_ema = tf.function(update_ema)
    it = iter(tabular_batches())

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        loss = train_step(x, y)
        (fused_ema if variant == "fix" else update_ema)()
        return float(loss)
    return run


# -- a GradientTape loop writing tf.summary scalars every step --------------------------------
def image_batches(batch: int = 32) -> tf.data.Dataset:
    rng = np.random.default_rng(64)
    x = rng.random((batch * 8, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, batch * 8).astype("int32")
    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(batch * 8, seed=0).repeat()
            .batch(batch).prefetch(AUTOTUNE))


@case("tf_tape_summary_every_step", "tensorflow", "training", 8,
      {**TF, "mode": "training", "tf_data": True}, split="holdout", warmup=4,
      fix="the summaries written every 100th step", share_from_fix="host_overhead",
      tags=["gradient_tape", "tf_summary", "tensorboard"])
def tf_tape_summary_every_step(variant):
    """The TensorBoard guide's GradientTape loop on a small CNN (two conv blocks, Adam,
    batches of 32 prefetched from memory): ``train_loss`` and ``train_accuracy`` Keras
    metrics updated in the step, and after every step ``tf.summary.scalar`` of the loss,
    the accuracy, the learning rate and the global gradient norm into a file writer
    (``with writer.as_default()``); the fix writes them every 100th step."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)), L.Conv2D(32, 3, padding="same", activation="relu"),
        L.MaxPooling2D(), L.Conv2D(64, 3, padding="same", activation="relu"),
        L.MaxPooling2D(), L.Flatten(), L.Dense(128, activation="relu"), L.Dense(10)])
    opt, loss_fn = tf.keras.optimizers.Adam(1e-3), cross_entropy()
    train_loss = tf.keras.metrics.Mean("train_loss")
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy("train_accuracy")
    logdir = tempfile.mkdtemp(prefix="tb_summary_")
    writer = tf.summary.create_file_writer(logdir)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = net(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables))
        train_loss(loss)
        train_accuracy(y, logits)
        return tf.linalg.global_norm(grads)
    it = iter(image_batches())
    every = 100 if variant == "fix" else 1

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        grad_norm = train_step(x, y)
        if i % every == 0:
            with writer.as_default():
                tf.summary.scalar("loss", train_loss.result(), step=i)
                tf.summary.scalar("accuracy", train_accuracy.result(), step=i)
                tf.summary.scalar("learning_rate", opt.learning_rate, step=i)
                tf.summary.scalar("grad_norm", grad_norm, step=i)
    def close():
        writer.close()
        shutil.rmtree(logdir, ignore_errors=True)
    run.close = close
    return run
