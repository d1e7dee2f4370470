"""Held-out JAX cases of plain programs, written without looking at the advisor's rules
(captured and measured by ``run_jax.py``): a jitted training step that blurs its images
with SciPy through ``jax.pure_callback``, and a deep ensemble of 8 small MLPs scored with
``jax.vmap`` over their stacked parameters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy import ndimage

from corpus.common import case
from corpus.jax_cases_common import JX, mlp_apply, mlp_init, xent


# -- host overhead: SciPy augmentation called back from inside the jitted step --------------
def scipy_blur(images: np.ndarray) -> np.ndarray:
    """``scipy.ndimage.gaussian_filter`` over each image's rows and columns (sigma 2)."""
    return ndimage.gaussian_filter(np.asarray(images), sigma=(0, 2, 2)).astype(np.float32)


def blur_matrix(n: int = 28, sigma: float = 2.0, radius: int = 8) -> jnp.ndarray:
    """The ``n x n`` matrix that blurs a row as ``gaussian_filter`` does (sigma 2, radius
    8, edges reflected): blurring an image is ``M @ image @ M.T``."""
    t = np.arange(-radius, radius + 1)
    k = np.exp(-0.5 * (t / sigma) ** 2)
    k /= k.sum()
    m = np.zeros((n, n), np.float32)
    for row in range(n):
        for off, w in zip(t, k):
            j = row + off
            j = -j - 1 if j < 0 else (2 * n - j - 1 if j >= n else j)
            m[row, j] += w
    return jnp.asarray(m)


def jnp_blur(images):
    """The same blur as two matrix products in ``jax.numpy``."""
    m = blur_matrix()
    return jnp.einsum("ij,bjk,lk->bil", m, images, m)


def make_update(blur):
    @jax.jit
    def update(p, images, y):
        x = blur(images).reshape(images.shape[0], -1)
        loss, g = jax.value_and_grad(xent)(p, x, y)
        return jax.tree_util.tree_map(lambda a, d: a - 0.05 * d, p, g), loss
    return update


def callback_blur(images):
    return jax.pure_callback(scipy_blur, jax.ShapeDtypeStruct(images.shape, jnp.float32),
                             images)


def digit_batches(n: int = 8, batch: int = 256, seed: int = 3):
    """``n`` batches of 28x28 grey images and 10-way labels, held on the device."""
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.random((batch, 28, 28), dtype=np.float32)),
             jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))) for _ in range(n)]


@case("jax_train_pure_callback_blur", "jax", "training", 10, {**JX, "mode": "training"},
      split="tuned", warmup=3, fix="the blur written in jax.numpy (two matrix products) "
      "inside the jitted step", share_from_fix="host_overhead",
      tags=["pure_callback", "scipy", "augmentation"])
def jax_train_pure_callback_blur(variant):
    """A 784-64-10 MLP digit classifier trained with a jitted SGD step whose augmentation
    blurs each batch of 256 images with ``scipy.ndimage.gaussian_filter`` called through
    ``jax.pure_callback``: the compiled step stops, hands its images to Python and waits
    for SciPy; the loss is read with ``float`` every step.  The fix writes the blur as two
    matrix products in ``jax.numpy`` inside the same jitted step."""
    p = mlp_init(np.random.default_rng(0), (784, 64, 10))
    update = make_update(jnp_blur if variant == "fix" else callback_blur)
    data, state = digit_batches(), {"p": p}

    def step(i):
        images, y = data[i % len(data)]
        state["p"], loss = update(state["p"], images, y)
        return float(loss)
    return step


# -- compute: a vmapped ensemble of 8 MLPs scoring batches --------------------------------------
MEMBERS = 8


def stacked_members(sizes=(64, 256, 256, 2)) -> dict:
    """8 members' parameter dicts, each from its own seed, stacked on a leading axis."""
    members = [mlp_init(np.random.default_rng(s), sizes) for s in range(MEMBERS)]
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *members)


@jax.jit
def ensemble_probs(params, x):
    """Every member's class probabilities (``vmap`` over the stacked parameters), their
    mean and the members' spread."""
    probs = jax.vmap(lambda p: jax.nn.softmax(mlp_apply(p, x)))(params)
    return probs.mean(0), probs.std(0)


@case("jax_infer_ensemble_vmap", "jax", "inference", 10, {**JX, "mode": "inference"},
      split="holdout", warmup=3, tags=["ensemble", "vmap", "uncertainty"])
def jax_infer_ensemble_vmap(variant):
    """A deep ensemble of 8 MLP classifiers (64-256-256-2, each from its own seed) scoring
    batches of 1,024 feature rows held on the device: one jitted call ``vmap``s the
    members over their stacked parameters and returns the mean probability and the
    members' spread, read back with ``np.asarray`` for the step's decisions.  Nothing is
    wrong: the step is the members' matrix products (compute)."""
    params = stacked_members()
    rng = np.random.default_rng(4)
    rows = [jnp.asarray(rng.standard_normal((1024, 64), dtype=np.float32)) for _ in range(4)]

    def step(i):
        mean, spread = ensemble_probs(params, rows[i % len(rows)])
        mean, spread = np.asarray(mean), np.asarray(spread)
        return (mean[:, 1] > 0.5) & (spread[:, 1] < 0.2)
    return step
