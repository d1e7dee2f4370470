"""Held-out TensorFlow / Keras training programs of kinds the others lack, written and scored
without looking at the advisor's rules (captured and measured by ``run_tf.py``): the DCGAN
tutorial's custom loop, two ``GradientTape``s inside one ``tf.function``; a variational
autoencoder whose custom ``train_step`` adds the KL term its sampling layer gives with
``add_loss``; ``fit`` with the ``TensorBoard`` callback writing every batch
(``update_freq="batch"``, ``histogram_freq=1``); and ``fit`` on a ``tf.data`` pipeline
that maps each row with small ops before ``batch`` (fix: batch first, one vectorised map).
"""

from __future__ import annotations

import tempfile

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


# -- DCGAN: two tapes in one tf.function ------------------------------------------------------
NOISE = 64


def generator():
    """The DCGAN tutorial's generator, narrowed: Dense to 7x7x64, two transposed convs."""
    return tf.keras.Sequential([
        tf.keras.Input((NOISE,)), L.Dense(7 * 7 * 64, use_bias=False), L.BatchNormalization(),
        L.LeakyReLU(), L.Reshape((7, 7, 64)),
        L.Conv2DTranspose(32, 5, strides=2, padding="same", use_bias=False),
        L.BatchNormalization(), L.LeakyReLU(),
        L.Conv2DTranspose(1, 5, strides=2, padding="same", activation="tanh")])


def discriminator():
    return tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)), L.Conv2D(32, 5, strides=2, padding="same"), L.LeakyReLU(),
        L.Dropout(0.3), L.Conv2D(64, 5, strides=2, padding="same"), L.LeakyReLU(),
        L.Dropout(0.3), L.Flatten(), L.Dense(1)])


@case("tf_tape_dcgan_two_tapes", "tensorflow", "training", 6,
      {**TF, "mode": "training", "tf_data": True}, split="holdout", warmup=3,
      tags=["gradient_tape", "gan", "two_optimizers"])
def tf_tape_dcgan_two_tapes(variant):
    """The DCGAN tutorial's training loop on 28x28 digits (a generator of a Dense layer
    and two transposed convs, a two-conv discriminator, an Adam(1e-4) each, batches of
    64 shuffled and prefetched from memory): one ``tf.function`` draws the noise, runs
    both models under two ``GradientTape``s and applies each optimizer; nothing is read
    back in the loop (compute, nothing to fix)."""
    tf.keras.utils.set_random_seed(0)
    gen, disc = generator(), discriminator()
    g_opt, d_opt = tf.keras.optimizers.Adam(1e-4), tf.keras.optimizers.Adam(1e-4)
    bce = tf.keras.losses.BinaryCrossentropy(from_logits=True)
    x = np.random.default_rng(91).uniform(-1, 1, (64 * 8, 28, 28, 1)).astype("float32")
    it = iter(tf.data.Dataset.from_tensor_slices(x).shuffle(512).repeat().batch(64)
              .prefetch(AUTOTUNE))

    @tf.function
    def train_step(images):
        noise = tf.random.normal([64, NOISE])
        with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
            fake = gen(noise, training=True)
            real_out, fake_out = disc(images, training=True), disc(fake, training=True)
            gen_loss = bce(tf.ones_like(fake_out), fake_out)
            disc_loss = (bce(tf.ones_like(real_out), real_out)
                         + bce(tf.zeros_like(fake_out), fake_out))
        g_opt.apply_gradients(zip(gen_tape.gradient(gen_loss, gen.trainable_variables),
                                  gen.trainable_variables))
        d_opt.apply_gradients(zip(disc_tape.gradient(disc_loss, disc.trainable_variables),
                                  disc.trainable_variables))
        return gen_loss, disc_loss

    def run(i):
        with CLOCK("input"):
            images = next(it)
        return train_step(images)
    return run


# -- VAE: a custom train_step adding the KL term given with add_loss ------------------------
LATENT = 8


class Sampling(L.Layer):
    """z = mean + exp(log_var / 2) * eps; adds the KL divergence with ``add_loss``."""

    def call(self, inputs):
        mean, log_var = inputs
        kl = -0.5 * tf.reduce_mean(tf.reduce_sum(
            1 + log_var - tf.square(mean) - tf.exp(log_var), axis=1))
        self.add_loss(kl)
        eps = tf.random.normal(tf.shape(mean))
        return mean + tf.exp(0.5 * log_var) * eps


class VAE(tf.keras.Model):
    """Encoder (two convs, Dense 64, mean and log-variance), decoder (Dense, two
    transposed convs); ``train_step`` adds the reconstruction loss to ``sum(self.losses)``."""

    def __init__(self):
        super().__init__()
        self.encoder = tf.keras.Sequential([
            tf.keras.Input((28, 28, 1)), L.Conv2D(32, 3, strides=2, padding="same",
                                                  activation="relu"),
            L.Conv2D(64, 3, strides=2, padding="same", activation="relu"), L.Flatten(),
            L.Dense(64, activation="relu")])
        self.to_mean, self.to_log_var, self.sampling = L.Dense(LATENT), L.Dense(LATENT), \
            Sampling()
        self.decoder = tf.keras.Sequential([
            tf.keras.Input((LATENT,)), L.Dense(7 * 7 * 64, activation="relu"),
            L.Reshape((7, 7, 64)),
            L.Conv2DTranspose(32, 3, strides=2, padding="same", activation="relu"),
            L.Conv2DTranspose(1, 3, strides=2, padding="same", activation="sigmoid")])
        self.loss_tracker = tf.keras.metrics.Mean(name="loss")

    def call(self, x, training=False):
        h = self.encoder(x, training=training)
        return self.decoder(self.sampling((self.to_mean(h), self.to_log_var(h))))

    @property
    def metrics(self):
        return [self.loss_tracker]

    def train_step(self, data):
        with tf.GradientTape() as tape:
            recon = self(data, training=True)
            rec = tf.reduce_mean(tf.reduce_sum(
                tf.keras.losses.binary_crossentropy(data, recon), axis=(1, 2)))
            loss = rec + tf.add_n(self.losses)
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}


def digit_images(pipe: str) -> tf.data.Dataset:
    """28x28 images in [0, 1] held in memory, shuffled, batched 128, prefetched."""
    x = np.random.default_rng(92).random((128 * 4, 28, 28, 1)).astype("float32")
    return tf.data.Dataset.from_tensor_slices(x).shuffle(512).repeat().batch(128) \
        .prefetch(AUTOTUNE)


def vae():
    tf.keras.utils.set_random_seed(0)
    net = VAE()
    net.compile(optimizer=tf.keras.optimizers.Adam())
    return net


# -- TensorBoard writing every batch -----------------------------------------------------------
def fashion_batches(pipe: str) -> tf.data.Dataset:
    """28x28 images and 10-way labels held in memory, shuffled, batched 128, prefetched."""
    rng = np.random.default_rng(93)
    x = rng.random((128 * 8, 28, 28)).astype("float32")
    y = rng.integers(0, 10, 128 * 8).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).repeat().batch(128) \
        .prefetch(AUTOTUNE)


def fashion_mlp():
    """The Keras basic-classification model, wider: Flatten, Dense 512 and 256, Dense 10,
    Adam, accuracy."""
    net = tf.keras.Sequential([tf.keras.Input((28, 28)), L.Flatten(),
                               L.Dense(512, activation="relu"),
                               L.Dense(256, activation="relu"), L.Dense(10)])
    net.compile(optimizer="adam", metrics=["accuracy"],
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return net


def board(pipe: str) -> list:
    """The program's own ``TensorBoard`` callback: every batch (``fix``: every epoch)."""
    freq = "epoch" if pipe == "fix" else "batch"
    return [tf.keras.callbacks.TensorBoard(tempfile.mkdtemp(prefix="tb_logs_"),
                                           update_freq=freq, histogram_freq=1)]


# -- per-row map of small ops before batch -----------------------------------------------------
N_ROWS, N_NUM = 4096, 12
ROW_BATCH = 128


def transactions():
    """12 numeric columns (amounts, counts), a merchant category (of 20), a label."""
    rng = np.random.default_rng(94)
    num = rng.lognormal(1.0, 1.0, (N_ROWS, N_NUM)).astype("float32")
    return num, rng.integers(0, 20, N_ROWS).astype("int32"), \
        rng.integers(0, 2, N_ROWS).astype("int32")


def featurize(mean, std):
    """log1p, standardise, clip and one-hot the category: the same ops on one row or on
    a batch of rows."""
    def fn(num, cat, label):
        x = (tf.math.log1p(num) - mean) / std
        x = tf.clip_by_value(x, -4.0, 4.0)
        return tf.concat([x, tf.one_hot(cat, 20)], axis=-1), label
    return fn


def transaction_batches(pipe: str) -> tf.data.Dataset:
    """``run``: ``map(featurize)`` on each row, then ``batch(128)`` and ``prefetch``;
    ``fix``: ``batch(128)`` first, then the same map on each batch; ``bare``: the first
    batches made once and cached."""
    num, cat, label = transactions()
    logs = np.log1p(num)
    fn = featurize(logs.mean(0), logs.std(0))
    ds = tf.data.Dataset.from_tensor_slices((num, cat, label)).shuffle(N_ROWS).repeat()
    if pipe == "fix":
        return ds.batch(ROW_BATCH).map(fn).prefetch(AUTOTUNE)
    ds = ds.map(fn).batch(ROW_BATCH)
    if pipe == "bare":
        return ds.take(4).cache().repeat()
    return ds.prefetch(AUTOTUNE)


def fraud_mlp():
    net = tf.keras.Sequential([tf.keras.Input((N_NUM + 20,)), L.Dense(64, activation="relu"),
                               L.Dense(64, activation="relu"), L.Dense(1)])
    net.compile(optimizer="adam", metrics=["accuracy"],
                loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
    return net


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_facts = {**TF, "mode": "training", "keras_fit": True, "tf_data": True}
    fit_case("tf_fit_vae_add_loss", fit_spec("bare", data=digit_images, net=vae), fit_facts,
             6, split="holdout", warmup=3,
             tags=["keras_fit", "custom_train_step", "add_loss", "vae"])
    CASES["tf_fit_vae_add_loss"].build.__doc__ = (
        "Keras 3 ``model.fit`` of the Keras VAE example's kind on 28x28 images (encoder "
        "of two strided convs and Dense 64 to an 8-d mean and log-variance, a ``Sampling`` "
        "layer that adds the KL divergence with ``self.add_loss``, decoder of a Dense "
        "layer and two transposed convs), a custom ``train_step`` adding the summed "
        "binary cross-entropy to ``sum(self.losses)`` under a ``GradientTape``, Adam, "
        "batches of 128 held in memory: compute, nothing to fix.")
    fit_case("tf_fit_tensorboard_every_batch",
             fit_spec("run", data=fashion_batches, net=fashion_mlp, callbacks=board),
             fit_facts, 8, split="holdout", warmup=3,
             fix='TensorBoard(update_freq="epoch")', share_from_fix="host_overhead",
             tags=["keras_fit", "tensorboard", "summaries", "callbacks"])
    CASES["tf_fit_tensorboard_every_batch"].build.__doc__ = (
        "Keras 3 ``model.fit`` of the basic-classification MLP, wider (Flatten, Dense 512 "
        "and 256, 10 classes, Adam, accuracy) on 28x28 images held in memory, batches of "
        "128, with the "
        "``TensorBoard`` callback set to ``update_freq=\"batch\"`` and "
        "``histogram_freq=1``: after every batch the callback writes the loss and the "
        "accuracy as summaries; the fix is the default ``update_freq=\"epoch\"``.")
    fit_case("tf_fit_map_rows_before_batch",
             fit_spec("run", data=transaction_batches, net=fraud_mlp),
             {**fit_facts, "tf_data_parallel": False}, 6, split="tuned", warmup=3,
             fix="batch(128) first, then one vectorised map per batch",
             share_from_fix="input", share_variant="bare",
             tags=["keras_fit", "tf_data", "per_element_map", "tabular"])
    CASES["tf_fit_map_rows_before_batch"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a fraud classifier MLP (32-64-64-1, Adam) on 4,096 "
        "transactions held in memory: ``from_tensor_slices``, shuffle, then ``map`` of a "
        "featurize function (``log1p``, standardise, clip, one-hot the merchant category, "
        "concat) on each row, then ``batch(128)`` and ``prefetch``: 128 calls of a few "
        "tiny ops a batch; the fix batches first and maps the same function once per "
        "batch.")
