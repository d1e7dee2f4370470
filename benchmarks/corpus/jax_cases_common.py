"""Held-out JAX cases of common programs, written without looking at the advisor's rules
(captured and measured by ``run_jax.py``): a deep ensemble of small MLPs trained one member
at a time in a Python loop, each member's jitted step called on its own, and gradient
accumulation over micro-batches in a Python loop, the gradients summed with an un-jitted
``jax.tree_util.tree_map``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from corpus.common import case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


def mlp_init(rng: np.random.Generator, sizes: tuple[int, ...]) -> dict:
    """A dict of ``{"w0", "b0", ...}`` drawn with numpy (He-scaled), put on the device."""
    p = {}
    for k, (a, b) in enumerate(zip(sizes, sizes[1:])):
        p[f"w{k}"] = jnp.asarray(rng.standard_normal((a, b), dtype=np.float32)
                                 * np.sqrt(2.0 / a))
        p[f"b{k}"] = jnp.zeros(b)
    return p


def mlp_apply(p: dict, x):
    n = len(p) // 2
    for k in range(n - 1):
        x = jax.nn.relu(x @ p[f"w{k}"] + p[f"b{k}"])
    return x @ p[f"w{n - 1}"] + p[f"b{n - 1}"]


def xent(p: dict, x, y):
    logp = jax.nn.log_softmax(mlp_apply(p, x))
    return -jnp.take_along_axis(logp, y[:, None], 1).mean()


def table_batches(n: int, batch: int, features: int, seed: int):
    """``n`` batches of standardised feature rows and 2-way labels, held on the device."""
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.standard_normal((batch, features), dtype=np.float32)),
             jnp.asarray(rng.integers(0, 2, batch).astype(np.int32))) for _ in range(n)]


# -- a deep ensemble trained member by member ---------------------------------------------------
MEMBERS = 16


@case("jax_train_ensemble_loop", "jax", "training", 4, {**JX, "mode": "training"},
      split="tuned", warmup=3, fix="jax.vmap the step over the 16 members' stacked "
      "parameters (one call)", share_from_fix="host_overhead", also=("one_read",),
      tags=["ensemble", "vmap", "python_loop"])
def jax_train_ensemble_loop(variant):
    """A deep ensemble of 16 small MLP classifiers (32-64-64-2, SGD, each from its own
    seed) trained on the same batches of 64 rows: each step loops over the members in
    Python, calling the jitted ``update(params, x, y)`` on each member's parameter dict
    and keeping its loss with ``float`` for the log; the fix stacks the members'
    parameters and calls ``jax.jit(jax.vmap(update, in_axes=(0, None, None)))`` once
    a step, reading the 16 losses with one ``np.asarray``. Measured beside it
    (``one_read``): the same loop of calls with the losses stacked and read once after
    it, which keeps the 16 dispatches and drops 15 of the waits."""
    members = [mlp_init(np.random.default_rng(100 + m), (32, 64, 64, 2))
               for m in range(MEMBERS)]
    data = table_batches(8, 64, 32, seed=41)

    def update(p, x, y):
        loss, g = jax.value_and_grad(xent)(p, x, y)
        return jax.tree_util.tree_map(lambda a, d: a - 0.05 * d, p, g), loss

    one = jax.jit(update)
    together = jax.jit(jax.vmap(update, in_axes=(0, None, None)))
    state = {"members": members,
             "stacked": jax.tree_util.tree_map(lambda *a: jnp.stack(a), *members),
             "log": []}

    def step(i):
        x, y = data[i % len(data)]
        if variant == "fix":
            state["stacked"], losses = together(state["stacked"], x, y)
            state["log"] = np.asarray(losses).tolist()
            return state["log"]
        losses = []
        for m, p in enumerate(state["members"]):
            state["members"][m], loss = one(p, x, y)
            losses.append(loss if variant == "one_read" else float(loss))
        state["log"] = np.asarray(jnp.stack(losses)).tolist() if variant == "one_read" \
            else losses
        return state["log"]
    return step


# -- gradient accumulation over micro-batches in a Python loop ---------------------------------
MICRO = 4


@case("jax_train_grad_accum_loop", "jax", "training", 3, {**JX, "mode": "training"},
      split="holdout", warmup=2, fix="the 4 micro-batches' gradients accumulated by "
      "jax.lax.scan inside one jitted step", share_from_fix="host_overhead",
      tags=["grad_accumulation", "python_loop"])
def jax_train_grad_accum_loop(variant):
    """A 256-512-512-10 MLP classifier trained with gradient accumulation: each step
    takes 4 micro-batches of 128 rows held on the device, computes each one's loss and
    gradient with a jitted ``jax.value_and_grad``, adds the gradient to the running sum
    with an un-jitted ``jax.tree_util.tree_map(jnp.add, ...)`` and the loss to a running
    total, then divides by 4 (``tree_map`` again), applies the SGD update with a jitted
    function and logs the mean loss with ``float``: compute-bound; the fix accumulates
    the micro-batches with ``jax.lax.scan`` inside one jitted step, and what it saves
    (the eager adds' dispatch, the separate calls) is counted as host overhead."""
    params = mlp_init(np.random.default_rng(42), (256, 512, 512, 10))
    micro = [(x, y * 5 + 2) for x, y in table_batches(4 * MICRO, 128, 256, seed=43)]
    stacked = [tuple(jnp.stack(a) for a in zip(*micro[s:s + MICRO]))
               for s in range(0, len(micro), MICRO)]
    grad_fn = jax.jit(jax.value_and_grad(xent))
    apply = jax.jit(lambda p, g: jax.tree_util.tree_map(lambda a, d: a - 0.05 * d, p, g))

    @jax.jit
    def scanned(p, xs, ys):
        def body(acc, xy):
            loss, g = grad_fn(p, *xy)
            return (jax.tree_util.tree_map(jnp.add, acc[0], g), acc[1] + loss), None
        zeros = (jax.tree_util.tree_map(jnp.zeros_like, p), 0.0)
        (total, loss), _ = jax.lax.scan(body, zeros, (xs, ys))
        return jax.tree_util.tree_map(lambda a, g: a - 0.05 * g / MICRO, p, total), loss

    state = {"p": params, "log": []}

    def step(i):
        k = i % len(stacked)
        if variant == "fix":
            state["p"], total = scanned(state["p"], *stacked[k])
        else:
            acc, total = None, 0.0
            for x, y in micro[k * MICRO:(k + 1) * MICRO]:
                loss, g = grad_fn(state["p"], x, y)
                acc = g if acc is None else jax.tree_util.tree_map(jnp.add, acc, g)
                total = total + loss
            state["p"] = apply(state["p"], jax.tree_util.tree_map(lambda g: g / MICRO, acc))
        state["log"].append(float(total) / MICRO)
        del state["log"][:-100]
        return state["log"][-1]
    return step
