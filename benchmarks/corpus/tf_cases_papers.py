"""A held-out TensorFlow case of a training technique as papers' reference code writes it,
written without looking at the advisor's rules (captured and measured by ``run_tf.py``):
fine-tuning with layer-wise learning-rate decay, the gradient taken in a ``tf.function``
and each variable's rate (its layer's decay times a warm-up and cosine schedule) computed
in Python every step for a momentum update applied variable by variable, eagerly.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from corpus.common import CLOCK, case
from corpus.tf_cases_field import TF

L = tf.keras.layers
BLOCKS, WIDTH, BATCH = 8, 128, 64
BASE_LR, LAYER_DECAY, WARMUP, TOTAL = 1e-3, 0.75, 50, 2000


def residual_encoder() -> tuple[tf.keras.Model, list[int]]:
    """An embedding projection, ``BLOCKS`` pre-norm residual MLP blocks (LayerNorm,
    Dense 128-256-128 with GELU) and a classifier head; and each trainable variable's
    layer id (0 the projection, 1..BLOCKS the blocks, BLOCKS+1 the head)."""
    tf.keras.utils.set_random_seed(0)
    inp = tf.keras.Input((64,))
    h = L.Dense(WIDTH, name="embed")(inp)
    for b in range(BLOCKS):
        y = L.LayerNormalization(name=f"block{b}_norm")(h)
        y = L.Dense(2 * WIDTH, activation="gelu", name=f"block{b}_fc1")(y)
        h = h + L.Dense(WIDTH, name=f"block{b}_fc2")(y)
    out = L.Dense(10, name="head")(L.LayerNormalization(name="final_norm")(h))
    model = tf.keras.Model(inp, out)
    ids = []
    for v in model.trainable_variables:
        name = v.path
        if name.startswith("embed"):
            ids.append(0)
        elif name.startswith("block"):
            ids.append(int(name[5:name.index("_")]) + 1)
        else:
            ids.append(BLOCKS + 1)
    return model, ids


def schedule(step: int) -> float:
    """Linear warm-up, then cosine decay to zero (the rate multiplier of a step)."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / (TOTAL - WARMUP)))


@case("tf_tape_layerwise_lr_eager", "tensorflow", "training", 6,
      {**TF, "mode": "training", "tf_function": True}, split="holdout", warmup=3,
      fix="the update inside the tf.function, rates passed as one tensor",
      share_from_fix="host_overhead", tags=["gradient_tape", "layer_decay", "paper_code"])
def tf_tape_layerwise_lr_eager(variant):
    """Fine-tuning with layer-wise learning-rate decay as reference code writes it: a
    ``tf.function`` computes the loss and gradients of a residual MLP encoder (8 pre-norm
    blocks, 54 variables) on batches of 64 held in memory; then, in Python, each
    variable's rate is its layer's decay (0.75 per layer below the head) times a warm-up
    and cosine schedule of the step, and a momentum update (``m.assign(0.9 * m + g)``,
    ``v.assign_sub(lr * m)``) runs variable by variable, eagerly; the loss is read with
    ``float()``. The fix moves the update into the ``tf.function``, the step's rates
    computed in Python as before and passed as one tensor."""
    net, ids = residual_encoder()
    variables = net.trainable_variables
    moms = [tf.Variable(tf.zeros_like(v)) for v in variables]
    decay = [LAYER_DECAY ** (BLOCKS + 1 - k) for k in ids]
    rng = np.random.default_rng(3)
    xs = tf.constant(rng.standard_normal((8, BATCH, 64)).astype("float32"))
    ys = tf.constant(rng.integers(0, 10, (8, BATCH)).astype("int32"))
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def grads_of(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        return loss, tape.gradient(loss, variables)

    @tf.function
    def fused_step(x, y, rates):
        loss, grads = grads_of(x, y)
        for k, (g, v, m) in enumerate(zip(grads, variables, moms)):
            m.assign(0.9 * m + g)
            v.assign_sub(rates[k] * m)
        return loss

    def step(i):
        with CLOCK("input"):
            x, y = xs[i % 8], ys[i % 8]
        lr_step = BASE_LR * schedule(i)
        if variant == "fix":
            rates = tf.constant([lr_step * d for d in decay], tf.float32)
            return float(fused_step(x, y, rates))
        loss, grads = grads_of(x, y)
        for g, v, m, d in zip(grads, variables, moms, decay):
            lr = lr_step * d
            m.assign(0.9 * m + g)
            v.assign_sub(lr * m)
        return float(loss)
    return step
