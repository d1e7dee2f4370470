"""Held-out JAX cases of ordinary programs, written without looking at the advisor's rules
(captured and measured by ``run_jax.py``): a jitted gradient whose hand-written Adam update
over a dict of parameters runs un-jitted with ``jax.tree_util.tree_map``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from corpus.common import case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}
WIDTHS = (64, 128, 128, 128, 128, 128, 128, 10)


def mlp_params(seed: int = 0) -> dict:
    """A dict of layers, each a dict of ``w`` and ``b``, as hand-written JAX models keep
    their parameters."""
    rng = np.random.default_rng(seed)
    return {f"dense_{k}": {"w": jnp.asarray(rng.standard_normal((a, b), dtype=np.float32)
                                            / np.sqrt(a)),
                           "b": jnp.zeros(b)}
            for k, (a, b) in enumerate(zip(WIDTHS, WIDTHS[1:]))}


def loss_fn(params, x, y):
    """Cross-entropy of a tanh MLP over the layers in order."""
    h = x
    names = sorted(params)
    for name in names[:-1]:
        h = jnp.tanh(h @ params[name]["w"] + params[name]["b"])
    logits = h @ params[names[-1]]["w"] + params[names[-1]]["b"]
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()


grad_fn = jax.jit(jax.value_and_grad(loss_fn))


def adam(params, grads, opt, lr: float = 1e-3):
    """One Adam update written with ``tree_map``: every leaf's moments, bias corrections
    and new value are separate ``jax.numpy`` calls when it runs outside ``jit``.  The
    step count ``opt["t"]`` is a Python int there (an integer array's value would be a
    new static exponent of ``0.9 ** t`` each step, compiled again) and a traced array
    inside ``jit``."""
    t = opt["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, opt["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * jnp.square(g), opt["v"],
                               grads)
    m_hat = jax.tree_util.tree_map(lambda m: m / (1 - 0.9 ** t), m)
    v_hat = jax.tree_util.tree_map(lambda v: v / (1 - 0.999 ** t), v)
    params = jax.tree_util.tree_map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + 1e-8),
                                    params, m_hat, v_hat)
    return params, {"m": m, "v": v, "t": t}


@jax.jit
def fused_step(params, opt, x, y):
    """The gradient and the same Adam update in one jitted function (the fix)."""
    loss, g = jax.value_and_grad(loss_fn)(params, x, y)
    params, opt = adam(params, g, opt)
    return params, opt, loss


@case("jax_train_unjitted_optimizer", "jax", "training", 4, {**JX, "mode": "training"},
      split="tuned", warmup=3, fix="the Adam update jitted with the gradient in one step",
      share_from_fix="host_overhead", tags=["optimizer", "tree_map", "op_by_op",
                                            "python_tracer_off"])
def jax_train_unjitted_optimizer(variant):
    """A tanh MLP (64-128x6-10, 14 parameter arrays in a dict of layers) on batches of 64
    held on the device: ``jax.jit(jax.value_and_grad(loss))`` computes the gradient, and a
    hand-written Adam update (``tree_map`` over moments, bias corrections and parameters)
    runs un-jitted in Python, about 18 dispatched ops per array (the step count a Python
    int); the loss is read every step. The fix jits the gradient and the update as one
    step (captured with the Python tracer off: JAX's own Python around each dispatched op
    would be most of the file)."""
    params = mlp_params()
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    t = jnp.zeros((), jnp.int32) if variant == "fix" else 0
    state = {"p": params, "opt": {"m": zeros, "v": zeros, "t": t}}
    rng = np.random.default_rng(1)
    data = [(jnp.asarray(rng.standard_normal((64, 64), dtype=np.float32)),
             jnp.asarray(rng.integers(0, 10, 64).astype(np.int32))) for _ in range(4)]

    def step(i):
        x, y = data[i % len(data)]
        if variant == "fix":
            state["p"], state["opt"], loss = fused_step(state["p"], state["opt"], x, y)
        else:
            loss, g = grad_fn(state["p"], x, y)
            state["p"], state["opt"] = adam(state["p"], g, state["opt"])
        return float(loss)
    return step
