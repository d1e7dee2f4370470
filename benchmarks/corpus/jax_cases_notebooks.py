"""Held-out JAX cases as notebooks (Kaggle, Colab) write them, written without looking at
the advisor's rules (captured and measured by ``run_jax.py``): a deep residual MLP whose
blocks are wrapped in ``jax.checkpoint`` (rematerialised in the backward pass), and
differentially private SGD with per-example gradients from ``jax.vmap(jax.grad(...))``,
clipped and noised in the jitted step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from corpus.common import CLOCK, case
from corpus.jax_cases_plain import JX, dense, digits


def mlp_params(sizes, depth: int = 0, width: int = 0, seed: int = 5) -> dict:
    """``(w, b)`` pairs: an input layer, ``depth`` square blocks of ``width``, a head
    (``sizes`` = (inputs, classes))."""
    rng = np.random.default_rng(seed)
    inp, classes = sizes
    return {"inp": dense(rng, inp, width), "head": dense(rng, width, classes),
            "blocks": [dense(rng, width, width) for _ in range(depth)]}


def ce(logits, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()


def loop_on(x_all, y_all, batch: int, update, params):
    """The notebook's loop: a batch sliced from the NumPy arrays (``input``), the jitted
    update, the loss appended to a Python list for the loss curve (``float``)."""
    state = {"p": params, "curve": []}

    def step(i):
        k = (batch * i) % (len(x_all) - batch + 1)
        with CLOCK("input"):
            x, y = x_all[k:k + batch], y_all[k:k + batch]
        state["p"], loss = update(state["p"], x, y, i)
        state["curve"].append(float(loss))
        return state["curve"][-1]
    return step


# -- compute: a deep MLP rematerialised block by block ----------------------------------------
def residual_mlp_update(remat: bool):
    """A jitted SGD step of a 784 -> 256 -> 16 residual GELU blocks -> 10 classifier,
    each block ``jax.checkpoint``-ed when ``remat``."""
    def block(p, h):
        w, b = p
        return h + jax.nn.gelu(h @ w + b)
    blk = jax.checkpoint(block) if remat else block

    def loss_fn(params, x, y):
        w, b = params["inp"]
        h = jax.nn.gelu(x @ w + b)
        for p in params["blocks"]:
            h = blk(p, h)
        w, b = params["head"]
        return ce(h @ w + b, y)

    @jax.jit
    def update(params, x, y, i):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g), loss
    return update


@case("jax_train_remat_deep_mlp", "jax", "training", 8, {**JX, "mode": "training"},
      split="holdout", warmup=3, fix="no jax.checkpoint (the activations kept)",
      tags=["remat", "jax_checkpoint", "gradient_checkpointing", "notebook"])
def jax_train_remat_deep_mlp(variant):
    """A notebook's deep residual MLP (784 -> 256, 16 residual GELU blocks of 256x256,
    10 classes) whose blocks are wrapped in ``jax.checkpoint`` as the gradient
    checkpointing guide shows, trained with a jitted ``value_and_grad`` SGD step on
    batches of 256 sliced from NumPy arrays in memory, each loss appended to a Python
    list with ``float`` for the loss curve: the backward pass runs every block's forward
    again (compute); the fix keeps the activations instead (no ``jax.checkpoint``)."""
    x_all, y_all = digits(4096, 6)
    update = residual_mlp_update(remat=variant != "fix")
    return loop_on(x_all, y_all, 256, update, mlp_params((784, 10), 16, 256))


# -- compute: DP-SGD with per-example gradients -----------------------------------------------
def dp_sgd_update(clip: float = 1.0, noise: float = 1.1, lr: float = 0.05):
    """A jitted DP-SGD step: per-example gradients (``vmap`` of ``grad`` over the
    batch), each clipped to L2 norm ``clip``, summed, Gaussian noise of
    ``noise * clip`` added from a key folded with the step number, averaged."""
    def loss_one(params, x, y):
        w, b = params["inp"]
        h = jnp.tanh(x @ w + b)
        for w, b in params["blocks"]:
            h = jnp.tanh(h @ w + b)
        w, b = params["head"]
        return ce((h @ w + b)[None], y[None])

    def clipped(g):
        norm = jnp.sqrt(sum(jnp.sum(t * t) for t in jax.tree_util.tree_leaves(g)))
        return jax.tree_util.tree_map(lambda t: t / jnp.maximum(1.0, norm / clip), g)

    @jax.jit
    def update(params, x, y, i):
        loss = jax.vmap(loss_one, (None, 0, 0))(params, x, y).mean()
        grads = jax.vmap(jax.grad(loss_one), (None, 0, 0))(params, x, y)
        summed = jax.tree_util.tree_map(lambda t: t.sum(0), jax.vmap(clipped)(grads))
        leaves, tree = jax.tree_util.tree_flatten(summed)
        keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(0), i), len(leaves))
        noisy = [(t + noise * clip * jax.random.normal(k, t.shape)) / x.shape[0]
                 for t, k in zip(leaves, keys)]
        new = jax.tree_util.tree_map(lambda p, d: p - lr * d, params,
                                     jax.tree_util.tree_unflatten(tree, noisy))
        return new, loss
    return update


@case("jax_train_dpsgd_per_example", "jax", "training", 8, {**JX, "mode": "training"},
      split="holdout", warmup=3, tags=["dp_sgd", "per_example_gradients", "vmap",
                                       "notebook"])
def jax_train_dpsgd_per_example(variant):
    """A notebook's differentially private SGD on an MNIST-sized table (784 -> 128 ->
    128 -> 10, tanh): per-example gradients from ``jax.vmap(jax.grad(loss))`` over a
    batch of 64, each clipped to norm 1, summed, Gaussian noise added (a key folded
    with the step number) and averaged, all in one jitted step fed batches sliced from
    NumPy arrays, each loss appended to a Python list with ``float``: the per-example
    gradients are the step's work (compute); nothing to fix."""
    x_all, y_all = digits(4096, 7)
    params = mlp_params((784, 10), 1, 128)
    return loop_on(x_all, y_all, 64, dp_sgd_update(), params)
