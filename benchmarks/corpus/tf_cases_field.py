"""Held-out TensorFlow cases written as users write ordinary loops, without looking at the
advisor's rules (captured and measured by ``run_tf.py``): a GradientTape loop reading
``tf.train.Example`` records from a TFRecord file, parsed by a ``map`` and cached after
it, and a GradientTape loop fed numpy batches whose features are engineered in Python and
converted with ``tf.convert_to_tensor`` every step.
"""

from __future__ import annotations

import tempfile
import zlib
from pathlib import Path

import numpy as np
import tensorflow as tf

from corpus.common import CLOCK, case

TF = {"framework": "tensorflow", "device": "cpu"}


def tape_step(net, opt, **function_kw):
    """A ``tf.function`` GradientTape step of a classifier (``function_kw``: the
    ``tf.function`` options, ``reduce_retracing=True``): returns the loss."""
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, net.trainable_variables),
                                net.trainable_variables))
        return loss
    return tf.function(train_step, **function_kw)


def mlp(inputs: int, width: int, classes: int):
    L = tf.keras.layers
    return tf.keras.Sequential([tf.keras.Input((inputs,)), L.Dense(width, activation="relu"),
                                L.Dense(width, activation="relu"), L.Dense(classes)])


# -- compute: TFRecord examples parsed by a map, cached after it -------------------------------
RECORDS = 512
FEATURES = 96


def write_records(path: Path, seed: int = 11) -> None:
    """``RECORDS`` ``tf.train.Example`` protos (96 float features, an int64 label)."""
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as w:
        for k in range(RECORDS):
            ex = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(
                    value=rng.standard_normal(FEATURES).astype(np.float32))),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 10]))}))
            w.write(ex.SerializeToString())


SPEC = {"x": tf.io.FixedLenFeature([FEATURES], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.int64)}
RECORD_FILES: list[Path] = []


def parse(serialized):
    ex = tf.io.parse_single_example(serialized, SPEC)
    x = (ex["x"] - tf.reduce_mean(ex["x"])) / (tf.math.reduce_std(ex["x"]) + 1e-6)
    return x, tf.cast(ex["label"], tf.int32)


@case("tf_tape_tfrecord_cache", "tensorflow", "training", 8,
      {**TF, "mode": "training", "tf_data": True}, split="holdout", warmup=10,
      tags=["gradient_tape", "tf_data", "tfrecord", "cache"])
def tf_tape_tfrecord_cache(variant):
    """A ``tf.function`` GradientTape step of an MLP (96-768-768-10, Adam) reading a
    TFRecord file of 512 ``tf.train.Example`` records through ``TFRecordDataset ->
    map(parse_single_example + standardise) -> cache() -> shuffle -> repeat -> batch(64)
    -> prefetch``: after the first epoch the batches come from the cache, so the loop is
    compute-bound."""
    tf.keras.utils.set_random_seed(0)
    if not RECORD_FILES:
        RECORD_FILES.append(Path(tempfile.mkdtemp(prefix="corpus-tfrecord-")) / "train.tfrec")
        write_records(RECORD_FILES[0])
    ds = (tf.data.TFRecordDataset(str(RECORD_FILES[0])).map(parse).cache().shuffle(RECORDS)
          .repeat().batch(64).prefetch(tf.data.AUTOTUNE))
    it = iter(ds)
    step = tape_step(mlp(FEATURES, 768, 10), tf.keras.optimizers.Adam(1e-3))

    def run(i):
        with CLOCK("input"):
            x, y = next(it)
        return float(step(x, y))
    return run


# -- input: numpy batches engineered in Python, converted every step ----------------------------
CITIES = [f"city{k}" for k in range(40)]
TAGS = [f"tag{k}" for k in range(300)]
BUCKETS = 64


def customers(n: int, seed: int = 12) -> list[dict]:
    """Raw customer records as a service returns them: numbers, a city, a list of tags."""
    rng = np.random.default_rng(seed)
    return [{"age": int(rng.integers(18, 90)), "income": float(rng.lognormal(10, 1)),
             "visits": int(rng.poisson(4)), "city": CITIES[int(rng.integers(40))],
             "tags": [TAGS[int(t)] for t in rng.integers(0, 300, int(rng.integers(3, 25)))],
             "churned": int(rng.integers(2))} for _ in range(n)]


def featurize(rec: dict) -> list[float]:
    """One record's features, in Python: scaled numbers, a one-hot city, and the tags and
    every pair of them (feature crosses) hashed into 64 buckets."""
    row = [rec["age"] / 90.0, np.log1p(rec["income"]) / 15.0, min(rec["visits"], 20) / 20.0]
    city = [0.0] * len(CITIES)
    city[CITIES.index(rec["city"])] = 1.0
    tags = [0.0] * BUCKETS
    names = rec["tags"]
    keys = names + [f"{a}&{b}" for k, a in enumerate(names) for b in names[k + 1:]]
    for key in keys:
        tags[zlib.crc32(key.encode()) % BUCKETS] += 1.0
    return row + city + tags


@case("tf_tape_numpy_convert", "tensorflow", "training", 8,
      {**TF, "mode": "training"}, split="tuned", warmup=4,
      tags=["gradient_tape", "numpy", "python_features"])
def tf_tape_numpy_convert(variant):
    """A churn classifier (an MLP, Adam) trained with a ``tf.function`` GradientTape step on
    batches of 128 customer records whose features (scaled numbers, a one-hot city, the
    tags and their pairwise crosses hashed into 64 buckets) are engineered in Python each
    step, stacked into numpy and
    converted with ``tf.convert_to_tensor``: the loop waits for its batch
    (input-bound)."""
    tf.keras.utils.set_random_seed(0)
    records = customers(2048)
    width = 3 + len(CITIES) + BUCKETS
    step = tape_step(mlp(width, 256, 2), tf.keras.optimizers.Adam(1e-3))

    def run(i):
        with CLOCK("input"):
            rows = records[(128 * i) % 2048:(128 * i) % 2048 + 128]
            x = np.array([featurize(r) for r in rows], dtype=np.float32)
            y = np.array([r["churned"] for r in rows], dtype=np.int32)
            x, y = tf.convert_to_tensor(x), tf.convert_to_tensor(y)
        return float(step(x, y))
    return run
