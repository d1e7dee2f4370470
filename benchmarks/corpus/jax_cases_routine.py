"""Held-out JAX cases of routine programs, written without looking at the advisor's rules
(captured and measured by ``run_jax.py``): batches augmented sample by sample with
un-jitted ``jax.numpy`` and ``jax.random`` calls in a Python generator, and a jitted Adam
step whose whole training state is pickled to disk every 4th step.
"""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from gen_jax_capture import init, train_step

from corpus.common import CLOCK, case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


# -- input: per-sample augmentation in un-jitted jax.numpy ------------------------------------
def augment(key, img):
    """A random 40x40 crop of a 48x48 photo, a random flip and brightness, standardised:
    the augmentation as written with ``jax.numpy`` and ``jax.random``."""
    k1, k2, k3 = jax.random.split(key, 3)
    dy, dx = jax.random.randint(k1, (2,), 0, 9)
    x = jax.lax.dynamic_slice(jnp.asarray(img, jnp.float32) / 255.0, (dy, dx, 0), (40, 40, 3))
    x = jnp.where(jax.random.uniform(k2) < 0.5, x[:, ::-1], x)
    x = x * jax.random.uniform(k3, minval=0.8, maxval=1.2)
    return (x - x.mean()) / (x.std() + 1e-6)


def augmented_batches(fast: bool, batch: int = 8, seed: int = 0):
    """A Python generator over 48x48 uint8 photos held in memory: each of a batch's 8
    samples augmented on its own with :func:`augment` called op by op, the batch
    ``jnp.stack``-ed (``fast``: one call of ``jax.jit(jax.vmap(augment))`` per batch)."""
    rng = np.random.default_rng(seed)
    photos = rng.integers(0, 256, (256, 48, 48, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 256).astype(np.int32)
    key, k = jax.random.PRNGKey(seed), 0
    many = jax.jit(jax.vmap(augment))
    while True:
        key, sub = jax.random.split(key)
        keys = jax.random.split(sub, batch)
        imgs = photos[k:k + batch]
        if fast:
            x = many(keys, imgs)
        else:
            x = jnp.stack([augment(keys[j], imgs[j]) for j in range(batch)])
        yield x, labels[k:k + batch]
        k = (k + batch) % 256


@case("jax_train_jnp_augment", "jax", "training", 3, {**JX, "mode": "training"},
      split="tuned", warmup=3,
      fix="the augmentation jax.jit(jax.vmap(...))-ed over each batch",
      tags=["augmentation", "generator", "op_by_op", "python_tracer_off"])
def jax_train_jnp_augment(variant):
    """The jitted CNN step fed by a Python generator that augments each of a batch's 8
    photos with un-jitted ``jax.numpy`` / ``jax.random`` calls (split keys, a random crop
    by ``dynamic_slice``, flip, brightness, standardise: every call a
    dispatched op) and stacks them with ``jnp.stack``; the fix calls
    ``jax.jit(jax.vmap(augment))`` once per batch (captured with the Python tracer off:
    JAX's own Python around each dispatched op would be most of the file)."""
    data = augmented_batches(fast=variant == "fix")
    state = {"p": init(jax.random.PRNGKey(0))}

    def step(i):
        with CLOCK("input"):
            x, y = next(data)
            x.block_until_ready()  # the augmentation's work, inside the input phase
        state["p"], loss = train_step(state["p"], x, jnp.asarray(y))
        return float(loss)
    return step


# -- compute: a training state pickled to disk every 4th step ---------------------------------
def adam_state(params):
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return {"m": zeros, "v": zeros, "t": jnp.zeros((), jnp.int32)}


@jax.jit
def adam_step(params, opt, x, y):
    """Cross-entropy of a ReLU MLP, its gradient and one Adam update (lr 1e-3)."""
    def loss_fn(p):
        h = x
        for w, b in p[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = p[-1]
        return -jnp.take_along_axis(jax.nn.log_softmax(h @ w + b), y[:, None], 1).mean()
    loss, g = jax.value_and_grad(loss_fn)(params)
    t = opt["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, opt["m"], g)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, opt["v"], g)
    scale = 1e-3 * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
    params = jax.tree_util.tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + 1e-8),
                                    params, m, v)
    return params, {"m": m, "v": v, "t": t}, loss


@case("jax_train_pickle_checkpoint", "jax", "training", 8, {**JX, "mode": "training"},
      split="tuned", warmup=3, tags=["checkpoint", "periodic", "pickle"])
def jax_train_pickle_checkpoint(variant):
    """A ReLU MLP classifier (512-1024-1024-10) trained with a jitted Adam step on batches
    of 64 held on the device; every 4th step the whole training state (parameters and
    Adam's moments, 19 MB) is fetched with ``jax.device_get`` and written with
    ``pickle.dump`` (phase ``periodic``): compute-bound, the checkpoint periodic."""
    rng = np.random.default_rng(12)
    sizes = (512, 1024, 1024, 10)
    params = [(jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) / np.sqrt(a)),
               jnp.zeros(b)) for a, b in zip(sizes, sizes[1:])]
    data = [(jnp.asarray(rng.standard_normal((64, 512), dtype=np.float32)),
             jnp.asarray(rng.integers(0, 10, 64).astype(np.int32))) for _ in range(4)]
    state = {"p": params, "opt": adam_state(params)}
    path = Path(tempfile.mkdtemp(prefix="corpus-ckpt-")) / "state.pkl"

    def step(i):
        x, y = data[i % len(data)]
        state["p"], state["opt"], loss = adam_step(state["p"], state["opt"], x, y)
        logged = float(loss)
        if i % 4 == 3:
            with CLOCK("periodic"), open(path, "wb") as f:
                pickle.dump(jax.device_get({"params": state["p"], "opt": state["opt"],
                                            "step": i}), f)
        return logged
    return step

