"""Held-out TensorFlow / Keras programs around datasets, metrics and serving, written and
first scored without looking at the advisor's rules (captured and measured by
``run_tf.py``): Keras ``fit`` of an image classifier whose ``tf.data`` pipeline caches the
PNG bytes and decodes and resizes every image again each epoch (``.cache()`` placed
before the deterministic decode), Keras ``fit`` of an activity-recognition conv net whose
custom macro-F1 ``Metric`` counts its confusion matrix in NumPy (so the model is compiled
with ``run_eagerly=True``), a Gaussian-process regression whose kernel hyperparameters
are fitted with a ``tf.function`` GradientTape step around ``tf.linalg`` Cholesky solves,
and a request handler that wraps the model's call in a new ``tf.function`` on every
request.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from corpus.common import CASES, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
AUTOTUNE = tf.data.AUTOTUNE


# -- Keras fit on PNG bytes cached before their decode ----------------------------------------
PHOTOS, PHOTO_SIZE, SIDE = 128, 448, 64
ENCODED: list = []


def png_photos():
    """``PHOTOS`` product photos (448 x 448 RGB, smooth shapes and sensor noise) encoded
    as PNG bytes, as read from disk, and their 8-way labels; encoded once per process."""
    if not ENCODED:
        rng = np.random.default_rng(81)
        yy, xx = np.mgrid[0:PHOTO_SIZE, 0:PHOTO_SIZE] / PHOTO_SIZE
        blobs = []
        for k in range(PHOTOS):
            cx, cy, r = rng.uniform(0.2, 0.8, 3)
            base = np.stack([np.sin(6.0 * xx * cx + k), np.cos(5.0 * yy * cy),
                             ((xx - cx) ** 2 + (yy - cy) ** 2 < r * r / 4)], -1)
            img = 127.5 * (base + 1.0) + rng.normal(0.0, 12.0, base.shape)
            blobs.append(tf.io.encode_png(np.clip(img, 0, 255).astype(np.uint8)).numpy())
        ENCODED.append((np.array(blobs, dtype=object),
                        rng.integers(0, 8, PHOTOS).astype("int32")))
    return ENCODED[0]


def decode_photo(png, label):
    """The deterministic part of loading a photo: PNG decode, resize to 64 x 64, scale."""
    img = tf.io.decode_png(png, channels=3)
    img = tf.image.resize(img, (SIDE, SIDE), antialias=True) / 255.0
    return img, label


def photo_pipeline(pipe: str) -> tf.data.Dataset:
    """``run``: the bytes cached, shuffled, decoded by a parallel ``map`` every epoch,
    batched 32 and prefetched; ``fix``: decoded first and the decoded images cached
    (the tf.data performance guide's order); ``bare``: 4 decoded batches made once."""
    pngs, labels = png_photos()
    ds = tf.data.Dataset.from_tensor_slices((pngs.astype(bytes), labels))
    if pipe == "bare":
        return ds.map(decode_photo).batch(32).take(4).cache().repeat()
    if pipe == "fix":
        ds = ds.map(decode_photo, num_parallel_calls=AUTOTUNE).cache().shuffle(PHOTOS, seed=0)
    else:
        ds = ds.cache().shuffle(PHOTOS, seed=0).map(decode_photo, num_parallel_calls=AUTOTUNE)
    return ds.repeat().batch(32).prefetch(AUTOTUNE)


def product_cnn(keras_model):
    """A small product classifier: three conv-pool blocks (16-32-64) on 64 x 64 photos,
    global average pooling, 8 classes, SGD."""
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((SIDE, SIDE, 3)),
        L.Conv2D(16, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(32, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.GlobalAveragePooling2D(), L.Dense(8)]))


# -- Keras fit with a NumPy macro-F1 metric, hence run_eagerly=True -----------------------------
ACTIVITIES, WINDOW, CHANNELS = 6, 128, 9


class MacroF1(tf.keras.metrics.Metric):
    """Macro-averaged F1 over the activities, its confusion matrix counted in NumPy (as
    written after a scikit-learn ``f1_score``; it needs eager tensors)."""

    def __init__(self, classes: int = ACTIVITIES, name: str = "macro_f1", **kw):
        super().__init__(name=name, **kw)
        self.classes = classes
        self.counts = np.zeros((classes, classes), dtype=np.int64)

    def update_state(self, y_true, y_pred, sample_weight=None):
        t = np.asarray(y_true).astype(np.int64).ravel()
        p = np.asarray(y_pred).argmax(-1).ravel()
        np.add.at(self.counts, (t, p), 1)

    def result(self):
        tp = np.diag(self.counts).astype(np.float64)
        prec = tp / np.maximum(self.counts.sum(0), 1)
        rec = tp / np.maximum(self.counts.sum(1), 1)
        return float(np.mean(2 * prec * rec / np.maximum(prec + rec, 1e-12)))

    def reset_state(self):
        self.counts[:] = 0


class GraphMacroF1(tf.keras.metrics.Metric):
    """The same macro-F1 with its confusion matrix in a variable, counted with
    ``tf.math.confusion_matrix`` (it runs inside the compiled train function)."""

    def __init__(self, classes: int = ACTIVITIES, name: str = "macro_f1", **kw):
        super().__init__(name=name, **kw)
        self.classes = classes
        self.counts = self.add_weight(shape=(classes, classes), initializer="zeros",
                                      name="counts")

    def update_state(self, y_true, y_pred, sample_weight=None):
        t = tf.reshape(tf.cast(y_true, tf.int32), [-1])
        p = tf.reshape(tf.argmax(y_pred, -1, output_type=tf.int32), [-1])
        self.counts.assign_add(tf.math.confusion_matrix(t, p, self.classes,
                                                        dtype=tf.float32))

    def result(self):
        tp = tf.linalg.diag_part(self.counts)
        prec = tp / tf.maximum(tf.reduce_sum(self.counts, 0), 1.0)
        rec = tp / tf.maximum(tf.reduce_sum(self.counts, 1), 1.0)
        return tf.reduce_mean(2 * prec * rec / tf.maximum(prec + rec, 1e-12))

    def reset_state(self):
        self.counts.assign(tf.zeros_like(self.counts))


def sensor_windows(pipe: str) -> tf.data.Dataset:
    """Accelerometer and gyroscope windows (128 readings of 9 channels, 6 activities)
    held in memory, shuffled, batched 64 and prefetched (the same for every variant)."""
    rng = np.random.default_rng(82)
    y = rng.integers(0, ACTIVITIES, 2048).astype("int32")
    t = np.arange(WINDOW, dtype="float32") / 50.0
    x = (np.sin(2 * np.pi * (1.0 + y[:, None, None]) * t[None, :, None]
                + rng.uniform(0, 6.28, (2048, 1, CHANNELS)))
         + 0.3 * rng.standard_normal((2048, WINDOW, CHANNELS))).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048, seed=0).repeat() \
        .batch(64).prefetch(AUTOTUNE)


def activity_net(eager: bool = True):
    """Three Conv1D layers (64 filters) with max pooling, global average pooling, a Dense
    64 and 6 activities; Adam, accuracy and macro F1; ``run_eagerly=True`` because the
    NumPy metric needs it (``eager=False``: the graph metric, compiled)."""
    tf.keras.utils.set_random_seed(0)
    net = tf.keras.Sequential([
        tf.keras.Input((WINDOW, CHANNELS)),
        L.Conv1D(64, 5, padding="same", activation="relu"), L.MaxPooling1D(2),
        L.Conv1D(64, 5, padding="same", activation="relu"), L.MaxPooling1D(2),
        L.Conv1D(64, 3, padding="same", activation="relu"),
        L.GlobalAveragePooling1D(), L.Dense(64, activation="relu"), L.Dense(ACTIVITIES)])
    net.compile(optimizer="adam",
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy", MacroF1() if eager else GraphMacroF1()],
                run_eagerly=eager)
    return net


# -- Gaussian-process hyperparameters fitted around tf.linalg ----------------------------------
@case("tf_tape_gp_cholesky_hyperparams", "tensorflow", "training", 6,
      {**TF, "mode": "training", "tf_function": True, "precision": "fp64"},
      split="holdout", warmup=3, tags=["gradient_tape", "linalg", "cholesky", "float64"])
def tf_tape_gp_cholesky_hyperparams(variant):
    """Gaussian-process regression of a sensor calibration curve: 768 observations of 6
    inputs held in memory as float64 tensors, an ARD squared-exponential kernel whose
    log length-scales, log signal variance and log noise are fitted by Adam on the
    negative log marginal likelihood, in a ``tf.function`` GradientTape step (the kernel
    matrix, ``tf.linalg.cholesky``, ``tf.linalg.cholesky_solve`` and the log-determinant
    from the factor's diagonal); the loss is read once per step for the log. The
    768 x 768 factorisation and its gradient are the work (compute); the program is
    written as the GP tutorials write it."""
    rng = np.random.default_rng(83)
    n, d = 768, 6
    x = rng.uniform(-2.0, 2.0, (n, d))
    f = np.sin(x[:, 0] * 1.5) + 0.5 * np.cos(x[:, 1] * x[:, 2]) + 0.2 * x[:, 3]
    xs = tf.constant(x)
    ys = tf.constant((f + 0.1 * rng.standard_normal(n))[:, None])
    log_ls = tf.Variable(np.zeros(d), name="log_lengthscales")
    log_var = tf.Variable(0.0, dtype=tf.float64, name="log_variance")
    log_noise = tf.Variable(-2.0, dtype=tf.float64, name="log_noise")
    params = [log_ls, log_var, log_noise]
    opt = tf.keras.optimizers.Adam(0.05)

    def neg_log_marginal():
        z = xs / tf.exp(log_ls)
        sq = tf.reduce_sum(z * z, 1)
        d2 = tf.maximum(sq[:, None] + sq[None, :] - 2.0 * tf.matmul(z, z, transpose_b=True),
                        0.0)
        k = tf.exp(log_var) * tf.exp(-0.5 * d2)
        k += (tf.exp(log_noise) + 1e-6) * tf.eye(n, dtype=tf.float64)
        chol = tf.linalg.cholesky(k)
        alpha = tf.linalg.cholesky_solve(chol, ys)
        fit = 0.5 * tf.reduce_sum(ys * alpha)
        logdet = tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)))
        return fit + logdet + 0.5 * n * math.log(2.0 * math.pi)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = neg_log_marginal()
        opt.apply_gradients(zip(tape.gradient(loss, params), params))
        return loss
    history = []

    def run(i):
        history.append(float(train_step()))
    return run


# -- a request handler that makes a new tf.function per request --------------------------------
def defect_cnn():
    """A surface-defect classifier: two conv-pool blocks (32-64) on 64 x 64 grey
    patches, Dense 128, 4 defect classes."""
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([
        tf.keras.Input((64, 64, 1)),
        L.Conv2D(32, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(),
        L.Flatten(), L.Dense(128, activation="relu"), L.Dense(4)])


@case("tf_infer_function_per_request", "tensorflow", "inference", 5,
      {**TF, "mode": "inference", "tf_function": True, "batch": 16}, split="tuned",
      warmup=2, fix="the tf.function made once when the model is loaded",
      share_from_fix="startup", tags=["serving", "tf_function", "retrace"])
def tf_infer_function_per_request(variant):
    """An inspection service's handler: each request brings 16 camera patches (64 x 64
    grey) as a NumPy array, and the handler defines ``@tf.function def serve(x)``
    (softmax of the model's logits, ``training=False``) inside itself before calling it,
    so every request traces the model and builds a new graph before a forward pass of
    about 10 ms; the answer is read back with ``.numpy()``. The fix makes the
    ``tf.function`` once, when the model is loaded (one trace)."""
    net = defect_cnn()
    patches = np.random.default_rng(84).random((256, 64, 64, 1)).astype("float32")

    @tf.function
    def serve_once(x):
        return tf.nn.softmax(net(x, training=False))

    def handle(batch):
        @tf.function
        def serve(x):
            return tf.nn.softmax(net(x, training=False))
        return serve(batch).numpy()

    def run(i):
        batch = patches[(16 * i) % 256:(16 * i) % 256 + 16]
        if variant == "fix":
            return serve_once(batch).numpy().argmax(1)
        return handle(batch).argmax(1)
    return run


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_cache_before_decode",
             fit_spec("run", data=photo_pipeline, net=lambda: product_cnn(keras_model)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True,
              "tf_data_parallel": True}, 8, split="holdout", warmup=3,
             fix="the decoded, resized images cached (cache after the map, not before)",
             share_from_fix="input", share_variant="bare",
             tags=["keras_fit", "tf_data", "cache", "decode", "images"])
    CASES["tf_fit_cache_before_decode"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a small product-photo classifier (three conv-pool "
        "blocks 16-32-64 on 64 x 64 images, 8 classes, SGD) on 128 PNG-encoded 448 x 448 "
        "photos held as bytes: the pipeline calls ``.cache()`` on the raw bytes, then "
        "shuffles, decodes and resizes each photo in a parallel ``map`` "
        "(``num_parallel_calls=AUTOTUNE``), batches 32 and prefetches, so every epoch "
        "decodes and resizes every photo again and the step waits for it (input); the "
        "decode is deterministic, and the fix caches after the ``map`` (the decoded "
        "64 x 64 images), as the tf.data performance guide orders it.")
    fit_case("tf_fit_numpy_metric_eager",
             fit_spec("run", data=sensor_windows, net=activity_net,
                      fix_net=lambda: activity_net(eager=False)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 3,
             split="tuned", warmup=3,
             fix="the macro-F1 metric in TensorFlow ops, run_eagerly=False",
             share_from_fix="host_overhead",
             tags=["keras_fit", "run_eagerly", "eager", "custom_metric", "numpy"])
    CASES["tf_fit_numpy_metric_eager"].build.__doc__ = (
        "Keras 3 ``model.fit`` of a human-activity classifier (three Conv1D(64) layers "
        "with max pooling, global average pooling, Dense 64, 6 activities, Adam) on "
        "windows of 128 readings of 9 inertial channels held in memory, batched 64; a "
        "custom macro-F1 ``Metric`` counts its confusion matrix in NumPy "
        "(``np.asarray(y_pred).argmax(-1)``, ``np.add.at``), which fails in a graph, so "
        "the model is compiled with ``run_eagerly=True``: every layer's forward and "
        "backward op and each of Adam's updates is dispatched eagerly from Python "
        "(host overhead). The fix writes the metric with a confusion-matrix variable and "
        "``tf.math.confusion_matrix`` and compiles with ``run_eagerly=False``.")
