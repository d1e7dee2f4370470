"""Held-out JAX cases written without looking at the advisor's rules (captured and
measured by ``run_jax.py``): a dropout MLP whose loop splits a fresh PRNG key per layer
in Python before every jitted step, and logistic regression trained with Newton steps
whose jitted step solves for the direction by conjugate gradients in
``jax.lax.while_loop``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from corpus.common import case
from corpus.jax_cases_common import mlp_init, table_batches

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit", "mode": "training"}


# -- dropout keys split per layer in a Python loop ---------------------------------------------
DROP_LAYERS = 16


@case("jax_train_dropout_keys_loop", "jax", "training", 8, JX,
      split="tuned", warmup=3,
      fix="one key passed to the jitted step, split there with jax.random.split(key, 16)",
      share_from_fix="host_overhead", tags=["prng", "dropout", "python_loop"])
def jax_train_dropout_keys_loop(variant):
    """A from-scratch MLP classifier (64 features, 16 hidden ReLU layers of 64 with
    dropout 0.1 after each, 2 classes, SGD) trained on batches of 32 rows held on the
    device, as a tutorial threads its randomness: before each call of the jitted
    ``update(params, x, y, keys)`` the loop splits the running key once per dropout
    layer, ``key, sub = jax.random.split(key)`` in a Python ``for`` over the layers, and
    passes the list of 16 sub-keys; the loss is read with ``float`` for the log.  The
    fix passes one key and splits it inside the jitted step."""
    sizes = (64,) + (64,) * DROP_LAYERS + (2,)
    params = mlp_init(np.random.default_rng(7), sizes)
    data = table_batches(8, 32, 64, seed=8)

    def forward(p, x, keys):
        for k in range(DROP_LAYERS):
            x = jax.nn.relu(x @ p[f"w{k}"] + p[f"b{k}"])
            keep = jax.random.bernoulli(keys[k], 0.9, x.shape)
            x = jnp.where(keep, x / 0.9, 0.0)
        return x @ p[f"w{DROP_LAYERS}"] + p[f"b{DROP_LAYERS}"]

    def loss_fn(p, x, y, keys):
        logp = jax.nn.log_softmax(forward(p, x, keys))
        return -jnp.take_along_axis(logp, y[:, None], 1).mean()

    def sgd(p, x, y, keys):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y, keys)
        return jax.tree_util.tree_map(lambda a, d: a - 0.05 * d, p, g), loss

    update = jax.jit(sgd)
    update_one_key = jax.jit(lambda p, x, y, key: sgd(p, x, y,
                                                       jax.random.split(key, DROP_LAYERS)))
    state = {"p": params, "key": jax.random.PRNGKey(0), "log": []}

    def step(i):
        x, y = data[i % len(data)]
        if variant == "fix":
            state["key"], sub = jax.random.split(state["key"])
            state["p"], loss = update_one_key(state["p"], x, y, sub)
        else:
            keys = []
            for _ in range(DROP_LAYERS):
                state["key"], sub = jax.random.split(state["key"])
                keys.append(sub)
            state["p"], loss = update(state["p"], x, y, keys)
        state["log"].append(float(loss))
        del state["log"][:-100]
        return state["log"][-1]
    return step


# -- Newton-CG: the direction solved by conjugate gradients in lax.while_loop -------------------
FEATURES, ROWS, CHUNKS, CG_TOL, CG_MAX = 512, 8192, 4, 1e-3, 50


def newton_cg_data(seed: int = 9) -> list:
    """4 chunks of 8192 rows x 512 features (correlated columns) with 0/1 labels from a
    noisy linear rule, on the device."""
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((FEATURES, FEATURES)).astype(np.float32) / np.sqrt(FEATURES)
    w = rng.standard_normal(FEATURES).astype(np.float32)
    chunks = []
    for _ in range(CHUNKS):
        x = (rng.standard_normal((ROWS, FEATURES), dtype=np.float32)
             @ (np.eye(FEATURES) + mix)).astype(np.float32)
        y = (x @ w + rng.standard_normal(ROWS) * 4 > 0).astype(np.float32)
        chunks.append((jnp.asarray(x), jnp.asarray(y)))
    return chunks


@case("jax_train_newton_cg_while_loop", "jax", "training", 6,
      JX, split="holdout", warmup=3,
      tags=["while_loop", "second_order", "solver"])
def jax_train_newton_cg_while_loop(variant):
    """L2-regularised logistic regression (512 features, 4 chunks of 8192 rows held on the
    device) trained with subsampled Newton steps, as a numerical-optimisation tutorial
    writes Newton-CG in JAX: each jitted step takes the gradient on one chunk, then
    solves ``H d = -g`` by conjugate gradients with Hessian-vector products (``jax.jvp``
    of ``jax.grad``) in ``jax.lax.while_loop`` until the residual falls under 1e-3 of the
    gradient's norm (at most 50 iterations), and moves by ``d``; the loss and the
    iteration count are read with ``float``/``int`` for the log: compute-bound, no fix
    claimed."""
    data = newton_cg_data()

    def loss_fn(w, x, y):
        z = x @ w
        return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 1e-2 * jnp.sum(w * w)

    grad = jax.grad(loss_fn)

    @jax.jit
    def newton_step(w, x, y):
        def hvp(v):
            return jax.jvp(lambda u: grad(u, x, y), (w,), (v,))[1]

        g = grad(w, x, y)
        tol = CG_TOL * jnp.linalg.norm(g)

        def cond(s):
            _, r, _, rr, k = s
            return (jnp.sqrt(rr) > tol) & (k < CG_MAX)

        def body(s):
            d, r, p, rr, k = s
            hp = hvp(p)
            alpha = rr / (p @ hp)
            d, r = d + alpha * p, r - alpha * hp
            rr_new = r @ r
            return d, r, r + (rr_new / rr) * p, rr_new, k + 1

        r0 = -g
        d, _, _, _, iters = jax.lax.while_loop(
            cond, body, (jnp.zeros_like(w), r0, r0, r0 @ r0, 0))
        w = w + d
        return w, loss_fn(w, x, y), iters

    state = {"w": jnp.zeros(FEATURES), "log": []}

    def step(i):
        x, y = data[i % CHUNKS]
        state["w"], loss, iters = newton_step(state["w"], x, y)
        state["log"].append((float(loss), int(iters)))
        del state["log"][:-100]
        return state["log"][-1]
    return step
