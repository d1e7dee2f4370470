"""Held-out TensorFlow cases of more everyday programs, written without looking at the
advisor's rules (captured and measured by ``run_tf.py``): a Keras model served through a
``tf.function(jit_compile=True)`` (XLA) prediction function, and a Keras ``fit`` on
``tf.train.Example`` records interleaved from several TFRecord shards.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from corpus.common import CASES, CLOCK, case
from corpus.tf_cases_field import FEATURES, RECORDS, SPEC, TF, parse, write_records

L = tf.keras.layers


# -- compute: a Keras ranker served through an XLA-compiled tf.function -----------------------
def ranker():
    """A tabular scorer: 128 features through 1024-1024-256 Dense layers to one score."""
    return tf.keras.Sequential([tf.keras.Input((128,)), L.Dense(1024, activation="relu"),
                                L.Dense(1024, activation="relu"),
                                L.Dense(256, activation="relu"), L.Dense(1)])


@case("tf_infer_xla_jit", "tensorflow", "inference", 8,
      {**TF, "mode": "inference", "compiled": "xla"}, split="holdout", warmup=3,
      tags=["xla", "jit_compile"])
def tf_infer_xla_jit(variant):
    """A Keras MLP ranker scoring batches of 512 candidate rows held in memory through a
    ``tf.function(jit_compile=True)`` that returns each batch's top 10 scores and their
    rows (read with one ``.numpy()`` each): XLA compiles the function once (in the
    warm-up), and the loop is compute-bound."""
    tf.keras.utils.set_random_seed(0)
    net = ranker()

    @tf.function(jit_compile=True)
    def top10(x):
        return tf.math.top_k(net(x, training=False)[:, 0], k=10)

    rows = tf.constant(np.random.default_rng(8).standard_normal((4096, 128)).astype("float32"))

    def run(i):
        with CLOCK("input"):
            x = rows[(512 * i) % 4096:(512 * i) % 4096 + 512]
        best = top10(x)
        return best.values.numpy(), best.indices.numpy()
    return run


# -- Keras fit on TFRecord shards, interleaved ------------------------------------------------
SHARDS: list[Path] = []


def shards(n: int = 4) -> list[str]:
    """``n`` TFRecord shards of ``RECORDS`` examples each, written once per process."""
    if not SHARDS:
        folder = Path(tempfile.mkdtemp(prefix="corpus-shards-"))
        for k in range(n):
            SHARDS.append(folder / f"train-{k:05d}-of-{n:05d}.tfrec")
            write_records(SHARDS[-1], seed=30 + k)
    return [str(p) for p in SHARDS]


def parse_batch(serialized):
    """A batch of records parsed with one ``parse_example`` and standardised per row."""
    ex = tf.io.parse_example(serialized, SPEC)
    mean, var = tf.nn.moments(ex["x"], axes=[1], keepdims=True)
    return (ex["x"] - mean) / (tf.sqrt(var) + 1e-6), tf.cast(ex["label"], tf.int32)


def shard_batches(pipe: str, batch: int = 32) -> tf.data.Dataset:
    """The shards' file names shuffled, ``interleave``-d (4 open at once, parallel
    reads), each record parsed and standardised by a parallel ``map``, shuffled, batched
    and prefetched (``pipe`` ``bare``: the first 4 batches made once and cached;
    ``fix``: the records shuffled and batched first, each batch parsed at once)."""
    files = tf.data.Dataset.from_tensor_slices(shards()).shuffle(4, seed=0).repeat()
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=4, block_length=16,
                          num_parallel_calls=tf.data.AUTOTUNE)
    if pipe == "fix":
        return (ds.shuffle(4 * RECORDS // 2, seed=0).batch(batch)
                .map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
                .prefetch(tf.data.AUTOTUNE))
    ds = (ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
          .shuffle(4 * RECORDS // 2, seed=0).batch(batch))
    if pipe == "bare":
        return ds.take(4).cache().repeat()
    return ds.prefetch(tf.data.AUTOTUNE)


def shard_model(keras_model):
    """The compiled classifier of the records' features (``keras_model`` compiles it)."""
    return keras_model(tf.keras.Sequential([
        tf.keras.Input((FEATURES,)), L.Dense(512, activation="relu"),
        L.Dense(512, activation="relu"), L.Dense(10)]))


def register_fit_cases(fit_case, fit_spec, keras_model) -> None:
    """Register this module's Keras ``fit`` cases with ``run_tf.py``'s helpers."""
    fit_case("tf_fit_tfrecord_interleave",
             fit_spec("run", data=shard_batches, net=lambda: shard_model(keras_model)),
             {**TF, "mode": "training", "keras_fit": True, "tf_data": True}, 6,
             split="tuned", fix="records batched first, each batch parsed with one "
             "tf.io.parse_example", share_from_fix="input", share_variant="bare", warmup=5,
             tags=["keras_fit", "tf_data", "tfrecord", "interleave"])
    CASES["tf_fit_tfrecord_interleave"].build.__doc__ = (
        "Keras 3 ``model.fit`` of an MLP (96-512-512-10, SGD) on ``tf.train.Example`` "
        "records read from 4 TFRecord shards: the file names shuffled and ``interleave``-d "
        "(4 open at once, parallel reads), each record parsed with "
        "``parse_single_example`` and standardised by a parallel ``map``, shuffled, "
        "batched by 32 and prefetched; the input share is what the same ``fit`` on "
        "batches made once saves, and the fix batches the raw records first and parses "
        "each batch with one ``tf.io.parse_example``.")
