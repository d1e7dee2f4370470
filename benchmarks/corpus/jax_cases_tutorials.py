"""A held-out JAX case of a program as JAX's own documentation writes it, written without
looking at the advisor's rules (captured and measured by ``run_jax.py``): the MNIST
classifier from scratch, a ``jit(update)`` over a list of ``(w, b)`` tuples fed NumPy
batches by a ``data_stream()`` generator, each epoch ending with un-jitted accuracies
printed.
"""

from __future__ import annotations

import numpy as np
import numpy.random as npr
from jax import grad, jit
from jax import numpy as jnp
from jax.scipy.special import logsumexp

from corpus.common import CLOCK, case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}
LAYER_SIZES, PARAM_SCALE, STEP_SIZE, BATCH_SIZE = [784, 1024, 1024, 10], 0.1, 0.001, 128


def init_random_params(scale, layer_sizes, rng=None):
    """The example's parameters: a list of ``(w, b)`` NumPy tuples."""
    rng = rng or npr.RandomState(0)
    return [(scale * rng.randn(m, n), scale * rng.randn(n))
            for m, n in zip(layer_sizes[:-1], layer_sizes[1:])]


def predict(params, inputs):
    activations = inputs
    for w, b in params[:-1]:
        activations = jnp.tanh(jnp.dot(activations, w) + b)
    final_w, final_b = params[-1]
    logits = jnp.dot(activations, final_w) + final_b
    return logits - logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    inputs, targets = batch
    return -jnp.mean(jnp.sum(predict(params, inputs) * targets, axis=1))


def accuracy(params, batch):
    """Un-jitted, as in the example: each ``jax.numpy`` call dispatched on its own."""
    inputs, targets = batch
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted_class == target_class)


@jit
def update(params, batch):
    grads = grad(loss)(params, batch)
    return [(w - STEP_SIZE * dw, b - STEP_SIZE * db)
            for (w, b), (dw, db) in zip(params, grads)]


def mnist_like(n: int, seed: int):
    """Flattened 28x28 images scaled to [0, 1] (float32) and one-hot labels, as the
    example's ``datasets.mnist()`` returns them."""
    rng = npr.RandomState(seed)
    images = (rng.randint(0, 256, (n, 784)) / np.float32(255.0)).astype(np.float32)
    return images, np.eye(10, dtype=np.float32)[rng.randint(0, 10, n)]


@case("jax_train_mnist_fromscratch", "jax", "training", 2, {**JX, "mode": "training"},
      warmup=2, fix="the accuracy under jax.jit",
      share_from_fix="host_overhead", tags=["tutorial", "async_dispatch", "unjitted_eval"])
def jax_train_mnist_fromscratch(variant):
    """JAX's ``mnist_classifier_fromscratch`` example on 1,024 training and 512 test
    images: a 784-1024-1024-10 tanh MLP whose parameters are a list of ``(w, b)`` tuples,
    ``params = update(params, next(batches))`` with ``update`` a ``jit`` of the gradient
    and the SGD step, fed batches of 128 that a ``data_stream()`` generator indexes out
    of the NumPy arrays by a fresh permutation each epoch; nothing waits for a step, and
    each epoch (8 batches, one step here) ends with the training and test accuracies
    computed un-jitted and printed.  The fix jits ``accuracy``; what it saves is the
    per-op overhead of the un-jitted evaluation."""
    train_images, train_labels = mnist_like(1024, 0)
    test_images, test_labels = mnist_like(512, 1)
    num_batches = len(train_images) // BATCH_SIZE

    def data_stream():
        rng = npr.RandomState(0)
        while True:
            perm = rng.permutation(len(train_images))
            for i in range(num_batches):
                batch_idx = perm[i * BATCH_SIZE:(i + 1) * BATCH_SIZE]
                yield train_images[batch_idx], train_labels[batch_idx]

    batches = data_stream()
    acc = jit(accuracy) if variant == "fix" else accuracy
    state = {"params": init_random_params(PARAM_SCALE, LAYER_SIZES), "log": []}

    def step(epoch):
        params = state["params"]
        for _ in range(num_batches):
            with CLOCK("input"):
                batch = next(batches)
            params = update(params, batch)
        state["params"] = params
        train_acc = acc(params, (train_images, train_labels))
        test_acc = acc(params, (test_images, test_labels))
        state["log"].append(f"Epoch {epoch}: training set accuracy {train_acc}, "
                            f"test set accuracy {test_acc}")
        return state["log"][-1]
    return step
