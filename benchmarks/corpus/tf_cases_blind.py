"""Held-out TensorFlow / Keras programs of kinds the others lack, written and scored without
looking at the advisor's rules (captured and measured by ``run_tf.py``): a Keras model
that overrides ``train_step`` as the "customizing fit" guide writes it; ``fit`` under a
``tf.distribute.MirroredStrategy`` on the machine's one CPU device; an inference loop over
audio clips turned into ``tf.signal.stft`` spectrograms by a serial ``map``; and ``fit``
with a callback that scores a held-out batch with ``model.predict`` after every batch.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


def sensor_rows(n: int = 2048, features: int = 256, seed: int = 51):
    """``n`` rows of ``features`` float32 readings and 10-way labels, in memory."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, features)).astype("float32"),
            rng.integers(0, 10, n).astype("int32"))


def row_batches(pipe: str, batch: int = 128) -> tf.data.Dataset:
    """The rows shuffled, batched and prefetched (the same for every variant)."""
    return (tf.data.Dataset.from_tensor_slices(sensor_rows()).shuffle(2048, seed=0)
            .repeat().batch(batch).prefetch(AUTOTUNE))


# -- compute: a model overriding train_step (the "customizing fit" guide) ---------------------
class ClippedModel(tf.keras.Model):
    """The guide's ``CustomModel``: its own ``train_step`` (forward under a GradientTape,
    ``compute_loss``, gradients clipped by their global norm, ``optimizer.apply``, the
    compiled metrics updated by hand)."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        self.optimizer.apply(grads, self.trainable_variables)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def clipped_classifier() -> tf.keras.Model:
    inputs = tf.keras.Input((256,))
    h = L.Dense(512, activation="relu")(inputs)
    h = L.Dense(512, activation="relu")(h)
    net = ClippedModel(inputs, L.Dense(10)(h))
    net.compile(optimizer="adam", metrics=["accuracy"],
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return net


# -- fit under MirroredStrategy on one CPU device ---------------------------------------------
def wide_classifier() -> tf.keras.Model:
    net = tf.keras.Sequential([tf.keras.Input((256,)), L.Dense(512, activation="relu"),
                               L.Dense(512, activation="relu"), L.Dense(10)])
    net.compile(optimizer="adam", metrics=["accuracy"],
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return net


def mirrored_classifier() -> tf.keras.Model:
    """The model built and compiled in ``MirroredStrategy().scope()`` as the distributed
    training guide shows; on this machine the strategy finds one device, the CPU."""
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        return wide_classifier()


# -- fit with a callback predicting a held-out batch after every batch ------------------------
class ValAccuracy(tf.keras.callbacks.Callback):
    """Tracks accuracy on a held-out batch after every training batch, with
    ``model.predict`` (``fix``: ``model(x, training=False)``, as ``predict``'s docs advise
    for inputs that fit in one batch)."""

    def __init__(self, direct: bool = False):
        super().__init__()
        x, y = sensor_rows(256, 64, seed=52)
        self.x, self.y, self.direct, self.history = x, y, direct, []

    def on_train_batch_end(self, batch, logs=None):
        if self.direct:
            probs = self.model(self.x, training=False).numpy()
        else:
            probs = self.model.predict(self.x, verbose=0)
        self.history.append(float((probs.argmax(1) == self.y).mean()))


def small_classifier() -> tf.keras.Model:
    net = tf.keras.Sequential([tf.keras.Input((64,)), L.Dense(128, activation="relu"),
                               L.Dense(10)])
    net.compile(optimizer="adam",
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return net


def small_rows(pipe: str) -> tf.data.Dataset:
    x, y = sensor_rows(2048, 64, seed=53)
    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048, seed=0).repeat()
            .batch(64).prefetch(AUTOTUNE))


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_facts = {**TF, "mode": "training", "keras_fit": True, "tf_data": True}
    fit_case("tf_fit_custom_train_step", fit_spec("run", data=row_batches,
                                                  net=clipped_classifier),
             fit_facts, 8, split="holdout", warmup=3,
             tags=["keras_fit", "train_step", "custom_training"])
    CASES["tf_fit_custom_train_step"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a ``keras.Model`` subclass overriding ``train_step`` as "
        "the customizing-fit guide writes it (GradientTape, ``compute_loss``, gradients "
        "clipped by global norm, ``optimizer.apply``, metrics updated by hand) on an MLP "
        "(256-512-512-10, Adam) over rows held in memory, shuffled, batched 128 at a time "
        "and prefetched: compute-bound, nothing to fix.")
    fit_case("tf_fit_mirrored_one_cpu",
             fit_spec("run", data=lambda pipe: row_batches(pipe, 256), net=mirrored_classifier,
                      fix_net=wide_classifier),
             fit_facts, 8, split="holdout", warmup=3,
             fix="no distribution strategy (the default one)",
             tags=["keras_fit", "distribute", "mirrored_strategy"])
    CASES["tf_fit_mirrored_one_cpu"].build.__doc__ = (
        "Keras 3 ``model.fit`` of an MLP (256-512-512-10, Adam) built and compiled in "
        "``tf.distribute.MirroredStrategy().scope()`` on a machine whose one device is "
        "its CPU (one replica), over rows held in memory, batched 256 at a time and "
        "prefetched: the strategy distributes the dataset and runs each step through "
        "its replica context; the fix measured is the same ``fit`` without the strategy.")
    fit_case("tf_fit_predict_callback",
             fit_spec("run", data=small_rows, net=small_classifier,
                      callbacks=lambda pipe: [ValAccuracy(direct=pipe == "fix")]),
             fit_facts, 8, split="tuned", warmup=3,
             fix="the callback calls model(x, training=False) instead of predict",
             share_from_fix="host_overhead", tags=["keras_fit", "callback", "keras_predict"])
    CASES["tf_fit_predict_callback"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a small MLP (64-128-10, Adam) on rows held in memory, "
        "batched 64 at a time and prefetched, with a callback whose "
        "``on_train_batch_end`` scores a held-out batch of 256 rows with "
        "``model.predict`` and appends its accuracy: each ``predict`` builds its data "
        "adapter, iterator and callbacks around a forward of well under a millisecond "
        "(host overhead by what the fix saves); the fix calls ``model(x, "
        "training=False)`` as ``predict``'s docs advise for one batch.")


# -- input: spectrograms made by a serial map of tf.signal.stft -------------------------------
def clips(n: int = 128, samples: int = 80000, seed: int = 54):
    """``n`` five-second 16 kHz clips (a tone in noise) and their 8 sound labels."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples, dtype=np.float32) / 16000.0
    freqs = rng.uniform(200.0, 3000.0, n).astype("float32")
    waves = np.sin(2 * np.pi * freqs[:, None] * t) + 0.3 * rng.standard_normal((n, samples))
    return waves.astype("float32"), rng.integers(0, 8, n).astype("int32")


def get_spectrogram(waveform, label):
    """The simple-audio tutorial's ``get_spectrogram``: STFT magnitude, a channel axis."""
    spectrogram = tf.abs(tf.signal.stft(waveform, frame_length=255, frame_step=128))
    return spectrogram[..., tf.newaxis], label


def command_model() -> tf.keras.Model:
    """The tutorial's small CNN (its convs 16 and 32 wide): resized to 32x32, two convs,
    a max pool, Dense(128)."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((624, 129, 1)), L.Resizing(32, 32),
        L.Conv2D(16, 3, activation="relu"), L.Conv2D(32, 3, activation="relu"),
        L.MaxPooling2D(), L.Dropout(0.25), L.Flatten(), L.Dense(128, activation="relu"),
        L.Dropout(0.5), L.Dense(8)])


@case("tf_infer_stft_serial_map", "tensorflow", "inference", 6,
      {**TF, "mode": "inference", "tf_data": True, "tf_data_parallel": False},
      split="holdout", warmup=3,
      fix="map(num_parallel_calls=AUTOTUNE) + prefetch",
      tags=["tf_data", "audio", "stft", "batch_scoring"])
def tf_infer_stft_serial_map(variant):
    """A batch scoring job over five-second audio clips held in memory, batched 32 at a
    time and prepared as the simple-audio tutorial prepares its one-second ones, with
    ``map(get_spectrogram)`` over each batch (``tf.signal.stft``, frame 255, step 128,
    magnitude), but serially and without prefetch; the tutorial's small CNN scores each
    batch with ``predict_on_batch`` and the predicted classes are taken with ``argmax``.
    The batch fetch is the input phase; the fix maps in parallel and prefetches, as the
    tutorial does."""
    waves, labels = clips()
    ds = tf.data.Dataset.from_tensor_slices((waves, labels)).repeat().batch(32)
    if variant == "fix":
        ds = ds.map(get_spectrogram, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
    else:
        ds = ds.map(get_spectrogram)
    it, net = iter(ds), command_model()

    def run(i):
        with CLOCK("input"):
            x, _ = next(it)
        return net.predict_on_batch(x).argmax(1)
    return run
