"""TensorFlow / Keras cases of the diagnosis corpus: capture and measure.

Run with TensorFlow in its own venv (tensorflow-cpu, and tensorboard for Keras'
TensorBoard callback; never a runtime dependency of sofa_gui)::

    nice $TF_VENV/bin/python benchmarks/corpus/run_tf.py [--only CASE ...]

Each capture is a TensorBoard logdir ``tests/data/corpus/<case>/capture-K/plugins/
profile/<run>/<host>.xplane.pb``: ``tf.profiler.experimental.start/stop`` around the
steps of a hand-written loop, or Keras' own ``TensorBoard(profile_batch=...)`` callback
around ``model.fit`` (Keras 3).  Truth is measured without the profiler
(``benchmarks/corpus/common.py``); for ``fit`` the step times come from a callback
(batch begin to batch begin) and the input share from the same ``fit`` on batches that
cost nothing to make (``bare``).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tensorflow as tf  # noqa: E402
from gen_tf_captures import dataset, make_step, model, preprocess, raw_images  # noqa: E402

from corpus.common import CASES, CLOCK, Driver, case, cli, measure, summarize, warmed  # noqa: E402

TF = {"framework": "tensorflow", "device": "cpu"}
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
      facts("training", tf_data=True, tf_data_parallel=False), split="holdout", warmup=4,
      fix="map(num_parallel_calls=AUTOTUNE) + prefetch", tags=["gradient_tape", "tf_data"])
def tf_tape_serial_map(variant):
    """A GradientTape step fed by a serial ``map`` of image preprocessing (no parallel
    calls, no prefetch): input-bound."""
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


def keras_model():
    net = model()
    net.compile(optimizer="sgd",
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return net


class StepClock(tf.keras.callbacks.Callback):
    """Batch begin to batch begin: one ``fit`` step as the user waits for it."""

    def __init__(self):
        super().__init__()
        self.starts = []

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append(time.perf_counter())

    def on_train_end(self, logs=None):
        self.starts.append(time.perf_counter())


FIT = {}


def fit_case(name, pipe_run, facts_, steps, **kw):
    """Register a Keras ``fit`` case (measured by :func:`measure_fit`)."""
    def build(variant):
        raise RuntimeError("fit cases are run by measure_fit")
    c = case(name, "tensorflow", "training", steps, facts_, **kw)(build)
    FIT[name] = pipe_run
    return c


fit_case("tf_keras_fit_slow_map", "run",
         facts("training", keras_fit=True, tf_data=True, tf_data_parallel=False), 10,
         fix="map(num_parallel_calls=AUTOTUNE) + prefetch", share_from_fix="input",
         share_variant="bare", warmup=3, tags=["keras_fit", "tf_data"])
CASES["tf_keras_fit_slow_map"].build.__doc__ = (
    "Keras 3 ``model.fit`` on a tf.data pipeline whose serial ``map`` runs numpy "
    "augmentation in ``tf.py_function``: the step waits for its batch (input-bound).")
fit_case("tf_keras_fit_cached", "bare", facts("training", keras_fit=True, tf_data=True), 10,
         split="holdout", warmup=3, tags=["keras_fit"])
CASES["tf_keras_fit_cached"].build.__doc__ = (
    "Keras 3 ``model.fit`` on batches made once and cached: compute-bound.")


def run_fit(pipe: str, n: int, logdir: Path | None = None, skip: int = 3) -> list:
    """``fit`` for ``skip + n`` steps; per timed step (wall s, {}); profiles steps
    ``skip+1 .. skip+n`` into ``logdir`` when given."""
    tf.keras.utils.set_random_seed(0)
    net, clock = keras_model(), StepClock()
    cbs = [clock]
    if logdir is not None:
        cbs.append(tf.keras.callbacks.TensorBoard(str(logdir), profile_batch=(skip + 1,
                                                                              skip + n)))
    net.fit(fit_dataset(pipe), epochs=1, steps_per_epoch=skip + n + 1, verbose=0,
            callbacks=cbs)
    walls = [b - a for a, b in zip(clock.starts, clock.starts[1:])]
    return [(w, {}) for w in walls[skip:skip + n]]


def measure_fit(c, rounds: int) -> dict:
    variants = [FIT[c.name]] + (["fix"] if c.fix else [])
    if c.share_from_fix and c.share_variant not in variants:
        variants.append(c.share_variant)
    got = {v: [] for v in variants}
    for _ in range(rounds):
        for v in variants:
            got[v].append(run_fit(v, c.steps, skip=c.warmup))
    got["run"] = got.pop(FIT[c.name])
    return summarize(c, got)


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
        run_fit(FIT[c.name], c.steps, logdir=dest / "tb", skip=c.warmup)
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
