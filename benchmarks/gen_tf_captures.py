"""Real ``tf.profiler`` captures of a small AlexNet-style Keras CNN, one per input pipeline.

Run with TensorFlow in its own venv (never a runtime dependency of sofa_gui)::

    $TF_VENV/bin/python benchmarks/gen_tf_captures.py -o tests/data/tf
    $TF_VENV/bin/python benchmarks/gen_tf_captures.py --measure   # before/after gain

Each case writes a TensorBoard logdir ``OUT/<case>/plugins/profile/<run>/<host>.xplane.pb``
holding ``STEPS`` profiled training steps (after warm-up, so tracing/compilation is outside
the window) and appends its ground truth to ``OUT/ground_truth.json``: step count, wall
time per step and input wait per step (measured in Python around ``next(iterator)``),
whether the run is input-bound, and which pipeline stage does the slow work.

Cases (the four pipeline shapes of the tf.data study, plus XLA and step markers):

* ``generator``: ``tf.data.Dataset.from_generator`` over Python/numpy preprocessing;
* ``serial_map``: ``from_tensor_slices(...).map(preprocess)`` with no parallelism/prefetch;
* ``parallel_prefetch``: ``map(num_parallel_calls=AUTOTUNE)`` + ``prefetch(AUTOTUNE)``;
* ``cached``: map, then ``cache()`` + ``prefetch`` (every profiled step reads the cache);
* ``cached_xla``: ``cached`` with ``tf.function(jit_compile=True)``;
* ``step_markers``: ``serial_map`` with ``tf.profiler.experimental.Trace("train", step_num=i)``.

``--measure`` runs the ``generator`` and ``parallel_prefetch`` pipelines unprofiled and prints
the median step time of each: the measured gain of fixing the input-bound run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

STEPS = 12
WARMUP = 10
BATCH = 16
SAMPLES = 128  # 8 batches: the cache is filled during warm-up
SIZE = 48
CROP = 40
CASES = ("generator", "serial_map", "parallel_prefetch", "cached", "cached_xla",
         "step_markers")


def raw_images(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (SAMPLES, SIZE, SIZE, 3), dtype=np.uint8)
    y = rng.integers(0, 10, SAMPLES).astype(np.int32)
    return x, y


def _blur(x):
    k = tf.ones((3, 3, 3, 1)) / 9.0
    return tf.nn.depthwise_conv2d(x[None], k, (1, 1, 1, 1), "SAME")[0]


def preprocess(img, label):
    """Per-sample work of a typical image pipeline: resample, blur, crop, flip, normalise
    (about 10 ms a sample on one core: a serial pipeline starves the step)."""
    x = tf.image.convert_image_dtype(img, tf.float32)
    for _ in range(2):
        x = tf.image.resize(x, (SIZE * 4, SIZE * 4), method="bicubic")
        x = tf.image.resize(_blur(x), (SIZE, SIZE), method="bicubic")
    x = tf.image.random_brightness(x, 0.1)
    x = tf.image.random_crop(x, (CROP, CROP, 3))
    x = tf.image.random_flip_left_right(x)
    x = tf.image.per_image_standardization(x)
    return x, label


def py_preprocess(img: np.ndarray) -> np.ndarray:
    """The same idea in Python/numpy, as a hand-written generator pipeline does it."""
    x = np.repeat(np.repeat(img.astype(np.float32) / 255.0, 4, 0), 4, 1)
    n = x.shape[0]
    pad = np.pad(x, ((1, 1), (1, 1), (0, 0)), mode="edge")
    x = sum(pad[i:i + n, j:j + n] for i in range(3) for j in range(3)) / 9.0
    for _ in range(2):
        for row in range(n):  # per-row Python work, as hand-written loaders do
            x[row] = np.clip(x[row] + np.random.uniform(-0.1, 0.1), 0.0, 1.0)
    x = x.reshape(SIZE, 4, SIZE, 4, 3).mean(axis=(1, 3))
    o = np.random.randint(0, SIZE - CROP + 1, 2)
    x = x[o[0]:o[0] + CROP, o[1]:o[1] + CROP]
    if np.random.rand() < 0.5:
        x = x[:, ::-1]
    return ((x - x.mean()) / max(x.std(), 1e-3)).astype(np.float32)


def dataset(case: str) -> tf.data.Dataset:
    x, y = raw_images()
    if case == "generator":
        def gen():
            while True:
                for i in range(SAMPLES):
                    yield py_preprocess(x[i]), y[i]
        sig = (tf.TensorSpec((CROP, CROP, 3), tf.float32), tf.TensorSpec((), tf.int32))
        return tf.data.Dataset.from_generator(gen, output_signature=sig).batch(BATCH)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if case in ("serial_map", "step_markers"):
        return ds.repeat().map(preprocess).batch(BATCH)
    if case == "parallel_prefetch":
        return (ds.repeat().map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
                .batch(BATCH).prefetch(tf.data.AUTOTUNE))
    # cached: the expensive map runs once; later epochs read the cache
    return (ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).cache().repeat()
            .batch(BATCH).prefetch(tf.data.AUTOTUNE))


def model() -> tf.keras.Model:
    """AlexNet in miniature: strided conv, pools, three convs, two dense layers."""
    L = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((CROP, CROP, 3)),
        L.Conv2D(32, 5, strides=2, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, padding="same", activation="relu"),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(2),
        L.Flatten(), L.Dense(128, activation="relu"), L.Dense(10),
    ])


def make_step(jit: bool):
    net = model()
    opt = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=jit)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables))
        return loss
    return train_step


def run_steps(step, it, n: int, markers: bool = False) -> tuple[list[float], list[float]]:
    """Run ``n`` steps; per step (wall s, input wait s). The loss is read every step so
    the step's work is done when the next one starts."""
    walls, waits = [], []
    for i in range(n):
        t0 = time.perf_counter()
        with (tf.profiler.experimental.Trace("train", step_num=i, _r=1) if markers
              else contextlib.nullcontext()):
            x, y = next(it)
            t1 = time.perf_counter()
            float(step(x, y))
        waits.append(t1 - t0)
        walls.append(time.perf_counter() - t0)
    return walls, waits


def capture(case: str, out: Path) -> dict:
    tf.keras.utils.set_random_seed(0)
    step = make_step(jit=case == "cached_xla")
    it = iter(dataset(case))
    run_steps(step, it, WARMUP)
    logdir = out / case
    shutil.rmtree(logdir, ignore_errors=True)
    tf.profiler.experimental.start(str(logdir))
    walls, waits = run_steps(step, it, STEPS, markers=case == "step_markers")
    tf.profiler.experimental.stop()
    wall, wait = statistics.median(walls), statistics.median(waits)
    return {
        "case": case, "steps": STEPS, "batch": BATCH, "jit_compile": case == "cached_xla",
        "step_markers": case == "step_markers",
        "median_step_ms": round(wall * 1e3, 2), "median_input_wait_ms": round(wait * 1e3, 2),
        "input_share": round(wait / wall, 3), "input_bound": wait / wall >= 0.2,
        "slow_stage": _slow_stage(case), "files": [str(p.relative_to(out)) for p in
                                                   sorted(logdir.rglob("*.xplane.pb"))],
    }


def _slow_stage(case: str) -> str:
    return {"generator": "Generator (from_generator, Python)",
            "serial_map": "Map (serial)", "step_markers": "Map (serial)",
            "parallel_prefetch": "ParallelMapV2"}.get(case, "none (reads the cache)")


def measure(n: int = 30) -> None:
    """Median step time of the input-bound generator run and of its fix, unprofiled."""
    rows = {}
    for case in ("generator", "serial_map", "parallel_prefetch", "cached"):
        tf.keras.utils.set_random_seed(0)
        step = make_step(jit=False)
        it = iter(dataset(case))
        run_steps(step, it, WARMUP)
        walls, _ = run_steps(step, it, n)
        rows[case] = statistics.median(walls)
        print(f"{case:18s} median step {rows[case] * 1e3:8.1f} ms  ({n} steps)")
    for case in ("parallel_prefetch", "cached"):
        print(f"generator -> {case}: {rows['generator'] / rows[case]:.2f}x faster")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default="tests/data/tf")
    ap.add_argument("--only", nargs="*", choices=CASES)
    ap.add_argument("--measure", action="store_true")
    args = ap.parse_args()
    tf.config.threading.set_inter_op_parallelism_threads(2)
    if args.measure:
        measure()
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    truth_path = out / "ground_truth.json"
    truth = json.loads(truth_path.read_text()) if truth_path.exists() else {}
    truth["_about"] = (f"written by benchmarks/gen_tf_captures.py on {socket.gethostname()}, "
                       f"TensorFlow {tf.__version__}, {os.cpu_count()} CPUs")
    for case in args.only or CASES:
        truth[case] = capture(case, out)
        print(json.dumps(truth[case]))
        truth_path.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
