"""TensorFlow / Keras cases of the diagnosis corpus: capture and measure.

Run with TensorFlow in its own venv (tensorflow-cpu, and tensorboard for Keras'
TensorBoard callback; never a runtime dependency of sofa_gui)::

    nice $TF_VENV/bin/python benchmarks/corpus/run_tf.py [--only CASE ...]

Each capture is a TensorBoard logdir ``tests/data/corpus/<case>/capture-K/plugins/
profile/<run>/<host>.xplane.pb.gz``: ``tf.profiler.experimental.start/stop`` around the
steps of a hand-written loop, or Keras' own ``TensorBoard(profile_batch=...)`` callback
around ``model.fit`` (Keras 3).  Truth is measured without the profiler
(``benchmarks/corpus/common.py``); for ``fit`` the step times come from a callback
(batch begin to batch begin) and the input share from the same ``fit`` on batches that
cost nothing to make (``bare``).
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from gen_tf_captures import dataset, make_step, model, preprocess, raw_images  # noqa: E402

from corpus.common import CASES, CLOCK, Driver, Others, case, cli, measure, warmed  # noqa: E402
from corpus.tf_cases_field import TF  # noqa: E402  (and register its cases)

#: Case modules (every ``tf_cases_*.py`` beside this file but the shared facts):
#: ``register_fit_cases(fit_case, FitSpec, keras_model)`` where they have it.
FIT_MODULES = tuple(sorted(p.stem for p in Path(__file__).parent.glob("tf_cases_*.py")
                           if p.stem != "tf_cases_field"))

BATCH = 16


def facts(mode: str, **kw) -> dict:
    return {**TF, "mode": mode, **kw}


def loop_step(step, it):
    """One hand-written step: fetch (phase ``input``), run, read the loss."""
    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        float(step(x, y))
    return run


def memory_batches(n_batches: int = 8, seed: int = 0) -> tf.data.Dataset:
    """Preprocessed batches held in memory: fetching one costs next to nothing."""
    x, y = raw_images(seed)
    xs = tf.stack([preprocess(tf.constant(x[k]), 0)[0] for k in range(n_batches * BATCH)])
    return tf.data.Dataset.from_tensor_slices((xs, y[:n_batches * BATCH])).repeat() \
        .batch(BATCH).prefetch(2)


@case("tf_jit_step_noise", "tensorflow", "training", 14,
      facts("training", compiled="xla", tf_data=True), warmup=4, tags=["xla"])
def tf_jit_step_noise(variant):
    """A jitted (``tf.function(jit_compile=True)``) GradientTape step on batches held in
    memory: compute-bound, no checkpoint, evaluation or logging; only the machine's
    noise varies the steps."""
    tf.keras.utils.set_random_seed(0)
    return loop_step(make_step(jit=True), iter(memory_batches()))


@case("tf_gradient_tape", "tensorflow", "training", 12,
      facts("training", tf_data=True), warmup=10, tags=["gradient_tape"])
def tf_gradient_tape(variant):
    """A ``tf.function`` GradientTape training step over a cached, prefetched tf.data
    pipeline: compute-bound."""
    tf.keras.utils.set_random_seed(0)
    return loop_step(make_step(jit=False), iter(dataset("cached")))


@case("tf_tape_serial_map", "tensorflow", "training", 12,
      facts("training", tf_data=True, tf_data_parallel=False), split="tuned", warmup=4,
      fix="map(num_parallel_calls=AUTOTUNE) + prefetch", tags=["gradient_tape", "tf_data"])
def tf_tape_serial_map(variant):
    """A GradientTape step fed by a serial ``map`` of image preprocessing (no parallel
    calls, no prefetch): input and compute in a near tie."""
    tf.keras.utils.set_random_seed(0)
    pipe = "parallel_prefetch" if variant == "fix" else "serial_map"
    return loop_step(make_step(jit=False), iter(dataset(pipe)))


@case("tf_infer", "tensorflow", "inference", 12, facts("inference"),
      warmup=3)
def tf_infer(variant):
    """Keras CNN inference in a ``tf.function`` (``training=False``) on batches of 64
    made in memory: compute-bound."""
    tf.keras.utils.set_random_seed(0)
    net = model()
    fwd = tf.function(lambda x: tf.argmax(net(x, training=False), 1))
    x = tf.random.normal((64, 40, 40, 3))

    def run(i):
        fwd(x).numpy()
    return run


# -- Keras fit ---------------------------------------------------------------------------------
def py_augment(img):
    """Per-sample numpy work behind ``tf.py_function`` (as a hand-written decoder is)."""
    a = img.numpy().astype("float32") / 255.0
    a = a.repeat(2, 0).repeat(2, 1)  # work at 2x resolution, as a resampling decoder does
    for _ in range(6):
        a = (a + a[::-1] + a[:, ::-1]) / 3.0
        a = a - a.mean()
    return a.reshape(48, 2, 48, 2, 3).mean(axis=(1, 3))[:40, :40]


def fit_dataset(pipe: str) -> tf.data.Dataset:
    x, y = raw_images()

    def aug(img, label):
        out = tf.py_function(py_augment, [img], tf.float32)
        out.set_shape((40, 40, 3))
        return out, label
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    if pipe == "bare":  # the same batches made once: input costs nothing
        return ds.take(BATCH * 4).map(aug).batch(BATCH).cache().repeat()
    if pipe == "fix":
        return ds.map(aug, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH) \
            .prefetch(tf.data.AUTOTUNE)
    return ds.map(aug).batch(BATCH)


def keras_model(net=None, **compile_kw):
    net = net or model()
    net.compile(optimizer="sgd",
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                **compile_kw)
    return net


class StepClock(tf.keras.callbacks.Callback):
    """Batch begin to batch begin: one ``fit`` step as the user waits for it."""

    def __init__(self):
        super().__init__()
        self.starts, self.tests = [], []

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append(time.perf_counter())

    def on_train_end(self, logs=None):
        self.starts.append(time.perf_counter())

    def on_test_begin(self, logs=None):
        self.tests.append([time.perf_counter(), None])

    def on_test_end(self, logs=None):
        self.tests[-1][1] = time.perf_counter()

    def steps(self) -> list[tuple[float, dict]]:
        """(wall s, phases) per step: an epoch's validation is its last step's periodic."""
        out = [(b - a, {}) for a, b in zip(self.starts, self.starts[1:])]
        for t0, t1 in self.tests:
            k = sum(1 for s in self.starts if s <= t0) - 1
            if 0 <= k < len(out):
                out[k][1]["periodic"] = out[k][1].get("periodic", 0.0) + t1 - t0
        return out


@dataclass
class FitSpec:
    """How a Keras ``fit`` case runs: the pipeline it is captured on (``pipe``; the fix
    and the share's reference are the pipelines ``"fix"`` and ``"bare"``), the dataset a
    pipeline name makes (or ``fit``'s own arguments for NumPy arrays) and the compiled model."""

    pipe: str
    data: Callable = fit_dataset
    net: Callable = keras_model
    fix_net: Callable | None = None  # the fix's model, where the fix is in the model
    epoch_steps: int = 0  # short epochs of this many steps, validated on ``val()`` each
    val: Callable | None = None
    callbacks: Callable | None = None  # (pipe) -> the program's own callbacks for ``fit``


FIT: dict[str, FitSpec] = {}


def fit_case(name, spec: FitSpec, facts_, steps, **kw):
    """Register a Keras ``fit`` case (measured by :func:`measure_fit`)."""
    def build(variant):
        raise RuntimeError("fit cases are run by measure_fit")
    c = case(name, "tensorflow", "training", steps, facts_, **kw)(build)
    FIT[name] = spec
    return c


fit_case("tf_keras_fit_slow_map", FitSpec("run"),
         facts("training", keras_fit=True, tf_data=True, tf_data_parallel=False), 10,
         fix="map(num_parallel_calls=AUTOTUNE) + prefetch", share_from_fix="input",
         share_variant="bare", warmup=3, tags=["keras_fit", "tf_data"])
CASES["tf_keras_fit_slow_map"].build.__doc__ = (
    "Keras 3 ``model.fit`` on a tf.data pipeline whose serial ``map`` runs numpy "
    "augmentation in ``tf.py_function``: the step waits for its batch (input-bound).")
fit_case("tf_keras_fit_cached", FitSpec("bare"),
         facts("training", keras_fit=True, tf_data=True), 10,
         split="holdout", warmup=3, tags=["keras_fit"])
CASES["tf_keras_fit_cached"].build.__doc__ = (
    "Keras 3 ``model.fit`` on batches made once and cached: compute-bound.")


def run_fit(spec: FitSpec, pipe: str, n: int, logdir: Path | None = None,
            skip: int = 3) -> list:
    """``fit`` for ``skip + n`` steps (a step: one call of the train function, which runs
    the model's ``steps_per_execution`` batches); per timed step (wall s, {}); profiles
    steps ``skip+1 .. skip+n`` into ``logdir`` when given."""
    tf.keras.utils.set_random_seed(0)
    net, clock = (spec.fix_net if pipe == "fix" and spec.fix_net else spec.net)(), StepClock()
    cbs = [clock, *(spec.callbacks(pipe) if spec.callbacks else [])]
    if logdir is not None:
        cbs.append(tf.keras.callbacks.TensorBoard(str(logdir), profile_batch=(skip + 1,
                                                                              skip + n)))
    per_call = int(getattr(net, "steps_per_execution", 1) or 1)
    steps, kw = (skip + n + 1) * per_call, {}
    if spec.epoch_steps:
        kw = {"validation_data": spec.val(), "epochs": -(-steps // spec.epoch_steps)}
        steps = spec.epoch_steps
    kw.update(d if isinstance(d := spec.data(pipe), dict) else {"x": d})  # arrays: fit's own
    net.fit(epochs=kw.pop("epochs", 1), steps_per_epoch=steps, verbose=0, callbacks=cbs, **kw)
    clock.tests += [p for cb in cbs for p in getattr(cb, "periods", [])]  # a save's: periodic
    return clock.steps()[skip:skip + n]


def fit_round(c, variants: list[str]) -> tuple[dict, dict]:
    """One timed ``fit`` of each variant (the run on the case's own pipeline), and the
    cores other processes kept busy meanwhile."""
    spec, got, others = FIT[c.name], {}, {}
    for v in variants:
        watch = Others()
        got[v] = run_fit(spec, spec.pipe if v == "run" else v, c.steps, skip=c.warmup)
        others[v] = watch.cores()
    return got, others


def measure_fit(c, rounds: int) -> dict:
    return measure(c, rounds, one_round=fit_round)


# -- held-out cases: Keras predict per sample, read-back per sample, a slow generator,
# steps_per_execution --------------------------------------------------------------------------
@case("tf_predict_per_sample", "tensorflow", "inference", 4,
      facts("inference", batch=1, keras_predict=True), split="holdout", warmup=3,
      fix="one model.predict on the step's 4 samples", share_from_fix="host_overhead",
      per_item=4, fix_per_item=4, tags=["keras_predict", "batch1"])
def tf_predict_per_sample(variant):
    """A Keras CNN scoring 4 incoming images per step with ``model.predict`` called once
    per image (batch 1) in a Python loop: every ``predict`` sets up its data adapter,
    iterator and callbacks around a tiny model call, so per-call overhead is most of the
    step; one ``predict`` on the 4 images is the fix."""
    tf.keras.utils.set_random_seed(0)
    net = model()
    images = np.random.default_rng(0).standard_normal((64, 40, 40, 3)).astype("float32")

    def run(i):
        batch = images[(4 * i) % 64:(4 * i) % 64 + 4]
        if variant == "fix":
            return net.predict(batch, verbose=0).argmax(1)
        return [net.predict(batch[k:k + 1], verbose=0).argmax(1) for k in range(4)]
    return run


def tabular_batches(batch: int = 64) -> tf.data.Dataset:
    """Feature rows held in memory, batched and prefetched (fetching costs next to
    nothing)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch * 8, 32)).astype("float32")
    y = rng.integers(0, 10, batch * 8).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch).prefetch(2)


@case("tf_tape_per_sample_readback", "tensorflow", "training", 3,
      facts("training", tf_data=True), split="tuned", warmup=4,
      fix="one .numpy() of the batch's predicted classes and labels",
      tags=["gradient_tape", "readback"])
def tf_tape_per_sample_readback(variant):
    """A ``tf.function`` GradientTape step on an MLP classifier, followed by a running
    accuracy counted per sample in Python: ``tf.argmax(logits[k]).numpy()`` against
    ``y[k].numpy()`` for each of the 48 samples, every one an eager op and a read-back."""
    tf.keras.utils.set_random_seed(0)
    L = tf.keras.layers
    net = tf.keras.Sequential([tf.keras.Input((32,)), L.Dense(128, activation="relu"),
                               L.Dense(128, activation="relu"), L.Dense(10)])
    opt = tf.keras.optimizers.Adam(1e-3)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = net(x, training=True)
            loss = loss_fn(y, logits)
        opt.apply_gradients(zip(tape.gradient(loss, net.trainable_variables),
                                net.trainable_variables))
        return loss, logits
    it = iter(tabular_batches(48))

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        loss, logits = train_step(x, y)
        with CLOCK("sync"):
            if variant == "fix":
                hits = int((tf.argmax(logits, 1).numpy() == y.numpy()).sum())
            else:
                hits = sum(int(tf.argmax(logits[k]).numpy()) == int(y[k].numpy())
                           for k in range(int(logits.shape[0])))
        return float(loss), hits
    return run


# -- tuned cases: per-row reads of an inference result, fit called once per batch -----------
def small_mlp(outputs: int = 10):
    L = tf.keras.layers
    return tf.keras.Sequential([tf.keras.Input((32,)), L.Dense(64, activation="relu"),
                                L.Dense(outputs)])


@case("tf_infer_labels_readback", "tensorflow", "inference", 3, facts("inference"),
      warmup=3, fix="one .numpy() of the predicted classes and of the scores",
      tags=["readback"])
def tf_infer_labels_readback(variant):
    """A Keras MLP scoring batches of 16 rows in a ``tf.function``, then labelling each
    row in Python by iterating the predicted classes and scores (``int(c)``,
    ``float(p)``: every row picked from the tensor and read on its own)."""
    tf.keras.utils.set_random_seed(0)
    net = small_mlp()
    fwd = tf.function(lambda x: tf.nn.softmax(net(x, training=False)))
    x = tf.random.normal((16, 32))

    def run(i):
        probs = fwd(x)
        with CLOCK("sync"):
            cls, conf = tf.argmax(probs, 1), tf.reduce_max(probs, 1)
            if variant == "fix":
                return list(zip(cls.numpy().tolist(), conf.numpy().tolist()))
            return [(int(c), float(p)) for c, p in zip(cls, conf)]
    return run


@case("tf_fit_per_batch", "tensorflow", "training", 2, facts("training", keras_fit=True),
      warmup=3, fix="one fit call on the step's 3 batches (batch_size=8)",
      share_from_fix="host_overhead", tags=["keras_fit", "online"])
def tf_fit_per_batch(variant):
    """Online training of a small Keras MLP: each step receives 3 batches of 8 rows and
    calls ``model.fit`` once per batch (one epoch, one gradient step each): every call
    builds its data adapter, a tf.data pipeline, an iterator and its callbacks around a
    step of a few hundred microseconds; one ``fit`` on the 3 batches is the fix."""
    tf.keras.utils.set_random_seed(0)
    net = keras_model(small_mlp())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 32)).astype("float32")
    y = rng.integers(0, 10, 96).astype("int32")

    def run(i):
        lo = (24 * i) % 96
        if variant == "fix":
            net.fit(x[lo:lo + 24], y[lo:lo + 24], batch_size=8, epochs=1, verbose=0,
                    shuffle=False)
            return
        for k in range(3):
            a = lo + 8 * k
            net.fit(x[a:a + 8], y[a:a + 8], batch_size=8, epochs=1, verbose=0)
    return run


HANN = np.hanning(128).astype("float32")


def clip_features(k: int) -> np.ndarray:
    """Log-magnitude spectrogram of a synthetic 5120-sample clip, frame by frame in
    Python (40 frames of 128 samples, 64 bins), normalised."""
    rng = np.random.default_rng(k)
    wave = rng.standard_normal(40 * 128).astype("float32")
    frames = []
    for f in range(40):
        seg = wave[f * 128:(f + 1) * 128] * HANN
        frames.append(np.log1p(np.abs(np.fft.rfft(seg))[:64]))
    feats = np.stack(frames).astype("float32")
    return (feats - feats.mean()) / (feats.std() + 1e-6)


def clip_dataset(pipe: str) -> tf.data.Dataset:
    """``Dataset.from_generator`` over clips made in Python (``pipe``: ``run`` as is,
    ``fix`` with a prefetch, ``bare`` the first batches made once and cached)."""
    def gen():
        k = 0
        while True:
            yield clip_features(k), k % 10
            k += 1
    sig = (tf.TensorSpec((40, 64), tf.float32), tf.TensorSpec((), tf.int32))
    ds = tf.data.Dataset.from_generator(gen, output_signature=sig)
    if pipe == "bare":
        return ds.take(32 * 4).batch(32).cache().repeat()
    ds = ds.batch(32)
    return ds.prefetch(tf.data.AUTOTUNE) if pipe == "fix" else ds


def clip_model():
    L = tf.keras.layers
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((40, 64)), L.Conv1D(128, 5, padding="same", activation="relu"),
        L.Conv1D(128, 3, padding="same", activation="relu"), L.GlobalAveragePooling1D(),
        L.Dense(64, activation="relu"), L.Dense(10)]))


fit_case("tf_fit_generator_audio", FitSpec("run", data=clip_dataset, net=clip_model),
         facts("training", keras_fit=True, tf_data=True), 8, split="holdout",
         fix="prefetch(AUTOTUNE) after the batch", share_from_fix="input",
         share_variant="bare", warmup=3, tags=["keras_fit", "tf_data", "generator"])
CASES["tf_fit_generator_audio"].build.__doc__ = (
    "Keras 3 ``model.fit`` of a 1-d conv net on spectrograms made by a Python generator "
    "(``tf.data.Dataset.from_generator``, 40 FFT frames per clip in a Python loop, no "
    "prefetch): the step waits for the generator (input-bound).")
fit_case("tf_fit_steps_per_execution",
         FitSpec("bare", net=lambda: keras_model(steps_per_execution=4)),
         facts("training", keras_fit=True, tf_data=True, steps_per_execution=4), 4,
         split="holdout", warmup=2, tags=["keras_fit", "steps_per_execution"])
CASES["tf_fit_steps_per_execution"].build.__doc__ = (
    "Keras 3 ``model.fit`` compiled with ``steps_per_execution=4`` (one train-function "
    "call runs 4 batches) on batches made once and cached: compute-bound; a step here is "
    "one call, 4 batches.")


# -- held-out cases written as users write them: a GIL-bound py_function under a parallel
# map, a model left with run_eagerly=True, validation after every short epoch --------------
def py_jitter(img):
    """Colour jitter row by row and a random erased patch, in numpy behind
    ``tf.py_function`` (Python holds the GIL for most of it)."""
    a = img.numpy().astype("float32") / 255.0
    rng = np.random.default_rng(int(a[0, 0, 0] * 1e6))
    for r in range(a.shape[0]):
        a[r] = a[r] * (0.9 + 0.2 * rng.random()) + 0.05 * rng.standard_normal(3)
        a[r] = np.clip(a[r], 0.0, 1.0)
    y0, x0 = rng.integers(0, 24, 2)
    a[y0:y0 + 8, x0:x0 + 8] = rng.random(3)
    return (a - a.mean()) / (a.std() + 1e-6)


def tf_jitter(img, label):
    """The same kind of augmentation in TensorFlow ops (the fix)."""
    a = tf.image.random_brightness(tf.cast(img, tf.float32) / 255.0, 0.1)
    a = tf.image.random_contrast(a, 0.9, 1.1)
    return tf.image.per_image_standardization(a), label


def jitter_dataset(pipe: str) -> tf.data.Dataset:
    """32x32 images through a parallel, prefetched map of :func:`py_jitter` (``run``),
    of :func:`tf_jitter` (``fix``), or made once and cached (``bare``)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (256, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, 256).astype("int32")

    def aug(img, label):
        out = tf.py_function(py_jitter, [img], tf.float32)
        out.set_shape((32, 32, 3))
        return out, label
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    if pipe == "bare":
        return ds.take(32 * 4).map(aug).batch(32).cache().repeat()
    fn = tf_jitter if pipe == "fix" else aug
    return ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE).batch(32).prefetch(tf.data.AUTOTUNE)


def sepconv_model():
    L = tf.keras.layers
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)), L.Conv2D(32, 3, padding="same", activation="relu"),
        L.SeparableConv2D(64, 3, strides=2, padding="same", activation="relu"),
        L.SeparableConv2D(64, 3, padding="same", activation="relu"),
        L.GlobalAveragePooling2D(), L.Dense(10)]))


fit_case("tf_fit_pyfunc_parallel_map", FitSpec("run", data=jitter_dataset, net=sepconv_model),
         facts("training", keras_fit=True, tf_data=True, tf_data_parallel=True), 8,
         split="tuned", fix="the augmentation rewritten in tf.image ops",
         share_from_fix="input", share_variant="bare", warmup=3,
         tags=["keras_fit", "tf_data", "py_function", "gil"])
CASES["tf_fit_pyfunc_parallel_map"].build.__doc__ = (
    "Keras 3 ``model.fit`` of a small separable-conv net on a tf.data pipeline whose "
    "``map(num_parallel_calls=AUTOTUNE)`` + ``prefetch`` runs a numpy colour jitter in "
    "``tf.py_function``: the parallel calls share Python's GIL, so the map stays about "
    "as slow as a serial one and the step waits for it (input-bound); the fix writes the "
    "augmentation in tf.image ops.")


def rows_dataset(pipe: str) -> tf.data.Dataset:
    """Feature rows held in memory, batched (the same for every variant)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32 * 8, 64)).astype("float32")
    y = rng.integers(0, 10, 32 * 8).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)


def deep_mlp(eager: bool = True):
    L = tf.keras.layers
    net = tf.keras.Sequential([tf.keras.Input((64,)),
                               *(L.Dense(32, activation="relu") for _ in range(6)),
                               L.Dense(10)])
    net.compile(optimizer="adam", run_eagerly=eager,
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return net


fit_case("tf_fit_run_eagerly", FitSpec("bare", data=rows_dataset, net=deep_mlp,
                                       fix_net=lambda: deep_mlp(eager=False)),
         facts("training", keras_fit=True, tf_data=True), 4, split="holdout", warmup=3,
         fix="run_eagerly=False (fit runs a compiled tf.function)",
         share_from_fix="host_overhead", tags=["keras_fit", "run_eagerly", "eager"])
CASES["tf_fit_run_eagerly"].build.__doc__ = (
    "Keras 3 ``model.fit`` of a 7-layer MLP (Dense 32) compiled with Adam and "
    "``run_eagerly=True`` (left on after debugging) on batches of 32 held in memory: "
    "every layer's forward and backward op and each of Adam's per-variable updates is "
    "dispatched eagerly from Python, so per-op overhead is most of the step; "
    "``run_eagerly=False`` is the fix.")


def review_tokens(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return (rng.integers(1, 2000, (n, 200)).astype("int32"),
            rng.integers(0, 2, n).astype("int32"))


def reviews(pipe: str) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(review_tokens(64 * 4, 0)).repeat().batch(64)


def review_model():
    L = tf.keras.layers
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((200,), dtype="int32"), L.Embedding(2000, 32),
        L.Conv1D(128, 5, activation="relu"), L.GlobalMaxPooling1D(),
        L.Dense(32, activation="relu"), L.Dense(2)]))


fit_case("tf_fit_validation_epochs",
         FitSpec("bare", data=reviews, net=review_model, epoch_steps=5,
                 val=lambda: tf.data.Dataset.from_tensor_slices(review_tokens(256, 1))
                 .batch(128)),
         facts("training", keras_fit=True, tf_data=True), 10, split="tuned", warmup=6,
         tags=["keras_fit", "validation", "periodic_eval", "epochs"])
CASES["tf_fit_validation_epochs"].build.__doc__ = (
    "Keras 3 ``model.fit`` of a 1-d conv text classifier on token batches held in memory "
    "(64 reviews of 200 tokens each), in short epochs of 5 steps with ``validation_data`` "
    "(2 batches of 128) evaluated after each: compute-bound, the validation periodic.")


for _name in FIT_MODULES:
    _mod = importlib.import_module(f"corpus.{_name}")
    if hasattr(_mod, "register_fit_cases"):
        _mod.register_fit_cases(fit_case, FitSpec, keras_model)


def keep_profiles(logdir: Path, dest: Path) -> None:
    """Move the callback's ``<logdir>/train/plugins/profile/<run>/`` to
    ``dest/plugins/profile/<run>/`` and drop its event files."""
    for pb in logdir.rglob("*.xplane.pb"):
        target = dest / "plugins" / "profile" / pb.parent.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.move(str(pb), target / pb.name)
    shutil.rmtree(logdir, ignore_errors=True)


def capture(c, dest: Path) -> None:
    """One profiled run of case ``c`` into the logdir ``dest``."""
    shutil.rmtree(dest, ignore_errors=True)
    if c.name in FIT:
        run_fit(FIT[c.name], FIT[c.name].pipe, c.steps, logdir=dest / "tb", skip=c.warmup)
        keep_profiles(dest / "tb", dest)
        return
    step, first = warmed(c)
    tf.profiler.experimental.start(str(dest))
    for i in range(first, first + c.steps):
        step(i)
    tf.profiler.experimental.stop()


def measure_tf(c, rounds: int) -> dict:
    return measure_fit(c, rounds) if c.name in FIT else measure(c, rounds)


DRIVER = Driver("run_tf.py", capture, {"tensorflow": tf.__version__,
                                       "keras": tf.keras.__version__}, measure=measure_tf)

if __name__ == "__main__":
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    sys.exit(cli(DRIVER, __doc__))
