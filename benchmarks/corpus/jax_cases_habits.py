"""Held-out JAX cases of everyday library habits, written without looking at the advisor's
rules (captured and measured by ``run_jax.py``): the Equinox MNIST tutorial's CNN trained
with ``eqx.filter_jit`` and ``eqx.filter_value_and_grad`` around an optax AdamW; a
regression whose loop builds ``jax.jit(lambda ...)`` afresh every step to close over the
step's learning rate; a matrix-factorisation recommender whose jitted sparse update
scatters into its embedding tables without ``donate_argnums``; and an MLP-Mixer trained
with ``optax.inject_hyperparams`` on a warm-up cosine schedule, its learning rate read
from the optimizer state for the log (a well-written loop).

Generator-only packages, in the JAX venv beside jax 0.10.2: equinox 0.13.8 (with
jaxtyping 0.3.11), optax 0.2.8.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from corpus.common import case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


def digits(n: int, batch: int, seed: int) -> list[tuple[jax.Array, jax.Array]]:
    """``n`` batches of MNIST-shaped images ``(batch, 1, 28, 28)`` (strokes on a dark
    ground) and their labels, made with NumPy and held on the device."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = (rng.random((batch, 1, 28, 28), dtype=np.float32) > 0.8).astype(np.float32)
        out.append((jnp.asarray(x), jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))))
    return out


# -- the Equinox tutorial's CNN, eqx.filter_jit around the whole step --------------------------
class CNN(eqx.Module):
    """The Equinox MNIST tutorial's model: a 4x4 convolution to 3 channels, max-pooling,
    then Linear 1728-512-64-10 with sigmoid and ReLU."""

    layers: list

    def __init__(self, key):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.layers = [eqx.nn.Conv2d(1, 3, kernel_size=4, key=k1),
                       eqx.nn.MaxPool2d(kernel_size=2), jax.nn.relu, jnp.ravel,
                       eqx.nn.Linear(1728, 512, key=k2), jax.nn.sigmoid,
                       eqx.nn.Linear(512, 64, key=k3), jax.nn.relu,
                       eqx.nn.Linear(64, 10, key=k4), jax.nn.log_softmax]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def cnn_loss(model, x, y):
    pred = jax.vmap(model)(x)
    return -jnp.mean(jnp.take_along_axis(pred, y[:, None], 1))


optim = optax.adamw(3e-4)


@eqx.filter_jit
def make_step(model, opt_state, x, y):
    """The tutorial's step, at the script's top level beside ``optim``."""
    loss, grads = eqx.filter_value_and_grad(cnn_loss)(model, x, y)
    updates, opt_state = optim.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


@case("jax_train_equinox_filter_jit", "jax", "training", 3,
      {**JX, "mode": "training", "batch": 64},
      split="holdout", warmup=3, fix="eqx.partition the model once and jax.jit a step "
      "over its arrays (eqx.combine inside)", share_from_fix="host_overhead",
      tags=["equinox", "filter_jit", "optax"])
def jax_train_equinox_filter_jit(variant):
    """The Equinox MNIST tutorial as written: a ``CNN(eqx.Module)`` whose layers are a
    Python list (``Conv2d(1, 3, 4)``, ``MaxPool2d(2)``, ``Linear`` 1728-512-64-10),
    trained with ``optim = optax.adamw(3e-4)`` by a ``@eqx.filter_jit`` ``make_step(model,
    opt_state, x, y)`` at the script's top level that takes
    ``eqx.filter_value_and_grad(loss)``, updates with ``optim.update(grads, opt_state,
    eqx.filter(model, eqx.is_array))`` and ``eqx.apply_updates``; batches of 64 images
    held on the device, the loss read with ``.item()`` each step.  Every call of the
    filtered step flattens the model and the optimizer state and splits arrays from the
    rest on the host before the compiled program runs.  The fix partitions the model once
    (``eqx.partition(model, eqx.is_array)``) and jits a plain step over the arrays,
    recombining them with ``eqx.combine`` inside."""
    model = CNN(jax.random.PRNGKey(5678))
    opt_state = optim.init(eqx.filter(model, eqx.is_array))
    data = digits(8, 64, seed=21)
    params, static = eqx.partition(model, eqx.is_array)

    @jax.jit
    def plain_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(
            lambda p: cnn_loss(eqx.combine(p, static), x, y))(params)
        updates, opt_state = optim.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    state = {"m": model, "p": params, "opt": opt_state, "log": []}

    def step(i):
        x, y = data[i % len(data)]
        if variant == "fix":
            state["p"], state["opt"], loss = plain_step(state["p"], state["opt"], x, y)
        else:
            state["m"], state["opt"], loss = make_step(state["m"], state["opt"], x, y)
        state["log"].append(loss.item())
        del state["log"][:-100]
        return state["log"][-1]
    return step


# -- jax.jit(lambda ...) built inside the loop to close over the step's learning rate ----------
def house_rows(n: int, batch: int, seed: int):
    """``n`` batches of 8 standardised housing features and a price target (a noisy
    nonlinear function of them), held on the device."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(8).astype(np.float32)
    out = []
    for _ in range(n):
        x = rng.standard_normal((batch, 8), dtype=np.float32)
        y = np.tanh(x @ w) + 0.1 * x[:, 0] ** 2 + 0.05 * rng.standard_normal(batch)
        out.append((jnp.asarray(x), jnp.asarray(y.astype(np.float32))))
    return out


def reg_init(seed: int, sizes=(8, 64, 64, 1)) -> list:
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) * np.sqrt(2.0 / a)),
             jnp.zeros(b)) for a, b in zip(sizes, sizes[1:])]


def reg_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return jnp.mean(((h @ w + b)[:, 0] - y) ** 2)


def sgd_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(reg_loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


@case("jax_train_jit_lambda_in_loop", "jax", "training", 3,
      {**JX, "mode": "training", "batch": 256},
      split="tuned", warmup=2, fix="jax.jit(sgd_step) once, the learning rate passed as "
      "an argument", share_from_fix="startup",
      tags=["recompile", "jit_in_loop", "python_tracer_off"])
def jax_train_jit_lambda_in_loop(variant):
    """A house-price regressor (an 8-64-64-1 ReLU MLP, mean squared error, SGD with a
    step-decayed learning rate) on batches of 256 rows held on the device, written as a
    forum question writes it: inside the loop, ``step_fn = jax.jit(lambda p, x, y:
    sgd_step(p, x, y, lr))`` closes over the step's learning rate and is called once,
    then the loss is read with ``float``.  Each step's lambda is a new function, so
    ``jax.jit`` traces, lowers and compiles it again every step (captured with the
    Python tracer off).  The fix jits ``sgd_step`` once and passes the learning rate as
    an ordinary argument."""
    data = house_rows(8, 256, seed=12)
    jitted = jax.jit(sgd_step)
    state = {"p": reg_init(13), "log": []}

    def step(i):
        x, y = data[i % len(data)]
        lr = 0.05 * 0.5 ** (i // 100)
        if variant == "fix":
            state["p"], loss = jitted(state["p"], x, y, lr)
        else:
            step_fn = jax.jit(lambda p, x, y: sgd_step(p, x, y, lr))
            state["p"], loss = step_fn(state["p"], x, y)
        state["log"].append(float(loss))
        del state["log"][:-100]
        return state["log"][-1]
    return step


# -- matrix factorisation: a sparse scatter update into tables that are not donated ------------
USERS, ITEMS, DIM, RATINGS = 120_000, 40_000, 64, 2048


@case("jax_train_mf_scatter_no_donate", "jax", "training", 5,
      {**JX, "mode": "training", "batch": RATINGS},
      split="tuned", warmup=3, fix="jax.jit(update, donate_argnums=0): the tables' "
      "buffers donated, the scatter done in place", share_from_fix="memory_copies",
      tags=["embedding", "recommender", "scatter", "donate_argnums"])
def jax_train_mf_scatter_no_donate(variant):
    """An explicit-feedback recommender (MovieLens style) by matrix factorisation: user and
    item embedding tables of 120,000 and 40,000 rows by 64 (41 MB together) and per-row
    biases, trained by SGD on batches of 2,048 (user, item, rating) triples held on the
    device.  The jitted ``update(params, u, i, r)`` gathers the batch's rows, takes the
    gradient of the squared error (plus L2) with respect to the gathered rows only, and
    scatters the updates back with ``params["U"].at[u].add(-lr * gu)`` (and likewise for
    the items and the biases); the loss is read with ``float``.  Without
    ``donate_argnums`` the tables passed in stay valid, so the compiled update copies
    every table whole before scattering its 2,048 rows into the copy.  The fix jits the
    same update with ``donate_argnums=0``: the tables' buffers are reused and the
    scatter is done in place."""
    rng = np.random.default_rng(17)
    params = {"U": jnp.asarray(0.1 * rng.standard_normal((USERS, DIM), dtype=np.float32)),
              "V": jnp.asarray(0.1 * rng.standard_normal((ITEMS, DIM), dtype=np.float32)),
              "bu": jnp.zeros(USERS), "bv": jnp.zeros(ITEMS)}
    batches = []
    for _ in range(8):
        u = rng.integers(0, USERS, RATINGS).astype(np.int32)
        it = rng.integers(0, ITEMS, RATINGS).astype(np.int32)
        r = rng.integers(1, 6, RATINGS).astype(np.float32)
        batches.append((jnp.asarray(u), jnp.asarray(it), jnp.asarray(r)))

    def update(params, u, i, r, lr=0.05, l2=1e-4):
        rows = (params["U"][u], params["V"][i], params["bu"][u], params["bv"][i])

        def loss_fn(rows):
            pu, qi, bu, bi = rows
            pred = 3.5 + bu + bi + jnp.sum(pu * qi, axis=1)
            return jnp.mean((pred - r) ** 2) + l2 * (jnp.mean(pu * pu) + jnp.mean(qi * qi))
        loss, (gu, gi, gbu, gbi) = jax.value_and_grad(loss_fn)(rows)
        return {"U": params["U"].at[u].add(-lr * RATINGS * gu),
                "V": params["V"].at[i].add(-lr * RATINGS * gi),
                "bu": params["bu"].at[u].add(-lr * RATINGS * gbu),
                "bv": params["bv"].at[i].add(-lr * RATINGS * gbi)}, loss

    train = jax.jit(update, donate_argnums=0) if variant == "fix" else jax.jit(update)
    state = {"p": params, "log": []}

    def step(k):
        u, i, r = batches[k % len(batches)]
        state["p"], loss = train(state["p"], u, i, r)
        state["log"].append(float(loss))
        del state["log"][:-100]
        return state["log"][-1]
    return step


# -- a well-written MLP-Mixer with optax.inject_hyperparams on a schedule ----------------------
PATCH, TOKENS, HIDDEN, BLOCKS = 4, 64, 64, 1


def mixer_init(seed: int) -> dict:
    """MLP-Mixer parameters for 32x32x3 images cut into 4x4 patches (64 tokens of 48)."""
    rng = np.random.default_rng(seed)

    def dense(a, b):
        return {"w": jnp.asarray(rng.standard_normal((a, b), dtype=np.float32)
                                 * np.sqrt(1.0 / a)), "b": jnp.zeros(b)}

    def norm(d):
        return {"g": jnp.ones(d), "b": jnp.zeros(d)}
    blocks = [{"n1": norm(HIDDEN), "t1": dense(TOKENS, 64), "t2": dense(64, TOKENS),
               "n2": norm(HIDDEN), "c1": dense(HIDDEN, 128), "c2": dense(128, HIDDEN)}
              for _ in range(BLOCKS)]
    return {"stem": dense(PATCH * PATCH * 3, HIDDEN), "blocks": blocks,
            "norm": norm(HIDDEN), "head": dense(HIDDEN, 10)}


def layer_norm(p, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-6) * p["g"] + p["b"]


def mixer_apply(params, images):
    n = images.shape[0]
    x = images.reshape(n, 8, PATCH, 8, PATCH, 3).transpose(0, 1, 3, 2, 4, 5)
    x = x.reshape(n, TOKENS, PATCH * PATCH * 3) @ params["stem"]["w"] + params["stem"]["b"]
    for blk in params["blocks"]:
        y = layer_norm(blk["n1"], x).transpose(0, 2, 1)
        y = jax.nn.gelu(y @ blk["t1"]["w"] + blk["t1"]["b"]) @ blk["t2"]["w"] + blk["t2"]["b"]
        x = x + y.transpose(0, 2, 1)
        y = layer_norm(blk["n2"], x)
        x = x + jax.nn.gelu(y @ blk["c1"]["w"] + blk["c1"]["b"]) @ blk["c2"]["w"] \
            + blk["c2"]["b"]
    x = layer_norm(params["norm"], x).mean(1)
    return x @ params["head"]["w"] + params["head"]["b"]


def colour_images(n: int, batch: int, seed: int):
    """``n`` batches of 32x32 colour images (blocky colour fields plus noise) and 10-way
    labels, held on the device."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.standard_normal((batch, 8, 8, 3), dtype=np.float32)
        x = base.repeat(4, 1).repeat(4, 2) + 0.3 * rng.standard_normal((batch, 32, 32, 3),
                                                                        dtype=np.float32)
        out.append((jnp.asarray(x), jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))))
    return out


@case("jax_train_mixer_inject_hyperparams", "jax", "training", 4,
      {**JX, "mode": "training", "batch": 64},
      split="holdout", warmup=3, tags=["optax", "inject_hyperparams", "schedule", "mixer"])
def jax_train_mixer_inject_hyperparams(variant):
    """An MLP-Mixer (4x4 patches of 32x32 colour images to 64 tokens of width 64, one
    block of token- and channel-mixing MLPs, layer norms, mean-pooled head) trained on
    batches of 64 held on the device with
    ``optax.chain(optax.clip_by_global_norm(1.0),
    optax.inject_hyperparams(optax.adamw)(learning_rate=schedule, weight_decay=0.05))``,
    ``schedule`` a ``warmup_cosine_decay_schedule``; one ``@jax.jit`` ``train_step``
    does the forward, ``jax.value_and_grad``, ``tx.update`` and ``optax.apply_updates``,
    and the loop logs the loss and the current learning rate, read from
    ``opt_state[1].hyperparams["learning_rate"]``, with one ``jax.device_get`` a step:
    compute-bound, nothing to fix."""
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 50, 2000, 1e-5)
    tx = optax.chain(optax.clip_by_global_norm(1.0),
                     optax.inject_hyperparams(optax.adamw)(learning_rate=schedule,
                                                           weight_decay=0.05))
    params = mixer_init(31)
    data = colour_images(6, 64, seed=32)

    def loss_fn(p, x, y):
        logp = jax.nn.log_softmax(mixer_apply(p, x))
        return -jnp.take_along_axis(logp, y[:, None], 1).mean()

    @jax.jit
    def train_step(p, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        updates, opt_state = tx.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, loss

    state = {"p": params, "opt": tx.init(params), "log": []}

    def step(i):
        x, y = data[i % len(data)]
        state["p"], state["opt"], loss = train_step(state["p"], state["opt"], x, y)
        loss, lr = jax.device_get((loss, state["opt"][1].hyperparams["learning_rate"]))
        state["log"].append((float(loss), float(lr)))
        del state["log"][:-100]
        return state["log"][-1]
    return step
