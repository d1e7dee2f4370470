"""A real ``tf.profiler`` capture of Keras 3 ``fit`` training with ``SGD(momentum=0.9)``
and no gradient-named op, for the run facts' training / inference reading.

Run with TensorFlow in its own venv (never a runtime dependency of sofa_gui)::

    $TF_VENV/bin/python benchmarks/gen_keras_momentum_capture.py -o tests/data/keras-sgd-momentum

The model is the text-classification tutorial's (a 16-wide ``Embedding`` averaged over the
tokens, one logit): an embedding's gradient is an ``UnsortedSegmentSum`` and an addition's
broadcast is static, so no op is named for the gradient, and SGD with momentum writes its
slots with ``assign`` and the weights with ``assign_add`` (no ``assign_sub``).  ``fit``
runs two warm-up epochs unprofiled, then one of ``STEPS`` batches of 64 under
``tf.profiler.experimental.start/stop``; the logdir is ``OUT/plugins/profile/<run>/``.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

STEPS = 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    out = ap.parse_args().out
    tf.keras.utils.set_random_seed(0)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    x = rng.integers(1, 1000, (64 * STEPS, 100)).astype("int32")
    y = rng.integers(0, 2, 64 * STEPS).astype("float32")
    net = tf.keras.Sequential([tf.keras.Input((100,), dtype="int32"),
                               tf.keras.layers.Embedding(1000, 16),
                               tf.keras.layers.GlobalAveragePooling1D(),
                               tf.keras.layers.Dense(1)])
    net.compile(optimizer=tf.keras.optimizers.SGD(0.01, momentum=0.9),
                loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).prefetch(2)
    net.fit(data, epochs=2, verbose=0)
    shutil.rmtree(out, ignore_errors=True)
    tf.profiler.experimental.start(str(out))
    net.fit(data, epochs=1, verbose=0)
    tf.profiler.experimental.stop()


if __name__ == "__main__":
    main()
