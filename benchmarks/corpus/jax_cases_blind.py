"""Held-out JAX cases written without looking at the advisor's rules (captured and measured
by ``run_jax.py``): a toy diffusion model whose noising (keys split, timesteps and noise
drawn, the batch noised) runs un-jitted in the Python loop before each jitted update, and
data-parallel training code written with ``jax.pmap`` run on the one CPU device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from gen_jax_capture import BATCH, batches, forward, init

from corpus.common import CLOCK, case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


# -- a toy DDPM: the batch noised op by op in the training loop -------------------------------
T_STEPS, DIFF_BATCH, HIDDEN = 100, 512, 128


def two_moons(n: int = 8192, seed: int = 0) -> np.ndarray:
    """Points of the two-moons toy data set, scaled to about unit variance."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(a), 1 - np.cos(a))
    y = np.where(upper, np.sin(a), 0.5 - np.sin(a))
    pts = np.stack([x, y], 1) + rng.normal(0, 0.05, (n, 2))
    return ((pts - pts.mean(0)) / pts.std(0)).astype(np.float32)


def denoiser_params(seed: int = 0) -> list:
    """An MLP over the noisy point and a 32-wide sinusoidal embedding of the timestep."""
    rng = np.random.default_rng(seed)
    sizes = (2 + 32, HIDDEN, HIDDEN, HIDDEN, 2)
    return [(jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) / np.sqrt(a)),
             jnp.zeros(b)) for a, b in zip(sizes, sizes[1:])]


def time_embedding(t):
    freqs = jnp.exp(-jnp.log(1000.0) * jnp.arange(16) / 16)
    ang = t[:, None].astype(jnp.float32) * freqs[None]
    return jnp.concatenate([jnp.sin(ang), jnp.cos(ang)], 1)


def predict_noise(params, x_t, t):
    h = jnp.concatenate([x_t, time_embedding(t)], 1)
    for w, b in params[:-1]:
        h = jax.nn.silu(h @ w + b)
    w, b = params[-1]
    return h @ w + b


def noise_batch(key, data, sqrt_ab, sqrt_1mab):
    """The DDPM forward process on a random batch: (x_t, t, noise)."""
    k_idx, k_t, k_noise = jax.random.split(key, 3)
    x0 = data[jax.random.randint(k_idx, (DIFF_BATCH,), 0, data.shape[0])]
    t = jax.random.randint(k_t, (DIFF_BATCH,), 0, T_STEPS)
    noise = jax.random.normal(k_noise, x0.shape)
    return sqrt_ab[t, None] * x0 + sqrt_1mab[t, None] * noise, t, noise


@case("jax_train_diffusion_noise_loop", "jax", "training", 6, {**JX, "mode": "training"},
      split="tuned", warmup=3, fix="the noising inside the jitted step (key carried in it)",
      share_from_fix="input", share_variant="bare", tags=["diffusion", "prng_keys", "op_by_op"])
def jax_train_diffusion_noise_loop(variant):
    """A toy diffusion model (DDPM, 100 timesteps) trained on 2-D two-moons points held on
    the device: each step splits the PRNG key in Python, draws the batch's indices,
    timesteps and Gaussian noise with un-jitted ``jax.random`` calls and noises the batch
    with ``jax.numpy`` ops, then calls the jitted update (a 34-128-128-128-2 SiLU noise
    predictor, SGD with momentum); the loss is read every step for the progress bar.
    The input share is what the same update on a batch noised once (``bare``) saves: the
    noising's dispatch and its ops' run, which the update waits for.  The fix draws and
    noises inside the jitted step, which carries the key."""
    data = jnp.asarray(two_moons())
    betas = np.linspace(1e-4, 0.02, T_STEPS)
    ab = np.cumprod(1 - betas)
    sqrt_ab, sqrt_1mab = jnp.asarray(np.sqrt(ab), jnp.float32), jnp.asarray(
        np.sqrt(1 - ab), jnp.float32)
    params = denoiser_params()
    state = {"p": params, "m": jax.tree_util.tree_map(jnp.zeros_like, params),
             "key": jax.random.PRNGKey(0), "losses": []}

    def loss_fn(p, x_t, t, noise):
        return jnp.mean((predict_noise(p, x_t, t) - noise) ** 2)

    def sgd(p, m, grads):
        m = jax.tree_util.tree_map(lambda a, g: 0.9 * a + g, m, grads)
        return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, m), m

    @jax.jit
    def update(p, m, x_t, t, noise):
        loss, grads = jax.value_and_grad(loss_fn)(p, x_t, t, noise)
        return (*sgd(p, m, grads), loss)

    @jax.jit
    def update_from_key(p, m, key):
        key, sub = jax.random.split(key)
        loss, grads = jax.value_and_grad(loss_fn)(p, *noise_batch(sub, data, sqrt_ab,
                                                                   sqrt_1mab))
        return (*sgd(p, m, grads), key, loss)

    once = noise_batch(jax.random.PRNGKey(1), data, sqrt_ab, sqrt_1mab)

    def step(i):
        if variant == "fix":
            state["p"], state["m"], state["key"], loss = update_from_key(
                state["p"], state["m"], state["key"])
        else:
            if variant == "bare":
                x_t, t, noise = once
            else:
                state["key"], sub = jax.random.split(state["key"])
                x_t, t, noise = noise_batch(sub, data, sqrt_ab, sqrt_1mab)
            state["p"], state["m"], loss = update(state["p"], state["m"], x_t, t, noise)
        state["losses"].append(float(loss))  # the progress bar's loss, every step
    return step


# -- jax.pmap on one device --------------------------------------------------------------------
@case("jax_train_pmap_one_device", "jax", "training", 8,
      {**JX, "mode": "training", "compiled": "jax.pmap"}, split="holdout", warmup=3,
      fix="jax.jit in place of jax.pmap", tags=["pmap", "data_parallel"])
def jax_train_pmap_one_device(variant):
    """Data-parallel training code as the ``jax.pmap`` examples write it, run on a machine
    with one CPU device: the CNN's parameters replicated (stacked once per device),
    each host batch of 16 numpy images reshaped to ``(devices, batch / devices, ...)``,
    the step ``jax.pmap``-ed with its gradients and metrics averaged by
    ``jax.lax.pmean`` over the ``batch`` axis, and the loss and accuracy fetched with
    ``jax.device_get`` every step for the log.  The fix is the same step under
    ``jax.jit``, no device axis."""
    devices = jax.local_devices()
    n = len(devices)
    data = batches(seed=5)

    def loss_fn(p, x, y):
        logits = forward(p, x)
        loss = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))
        return loss, jnp.mean(jnp.argmax(logits, -1) == y)

    def train_step(p, x, y, axis=None):
        (loss, acc), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)
        if axis:
            grads = jax.lax.pmean(grads, axis_name=axis)
            loss, acc = jax.lax.pmean((loss, acc), axis_name=axis)
        p = jax.tree_util.tree_map(lambda a, g: a - 0.01 * g, p, grads)
        return p, {"loss": loss, "accuracy": acc}

    params = init(jax.random.PRNGKey(1))
    if variant == "fix":
        run = jax.jit(train_step)
        state = {"p": params}
    else:
        run = jax.pmap(lambda p, x, y: train_step(p, x, y, "batch"), axis_name="batch")
        state = {"p": jax.tree_util.tree_map(lambda a: jnp.stack([a] * n), params)}
    log = []

    def step(i):
        with CLOCK("input"):
            x, y = next(data)
            if variant != "fix":
                x = x.reshape((n, BATCH // n) + x.shape[1:])
                y = y.reshape((n, BATCH // n))
        state["p"], metrics = run(state["p"], x, y)
        metrics = jax.device_get(metrics)  # waits for the step: its compute, no extra read
        log.append({k: float(np.mean(v)) for k, v in metrics.items()})
    return step
