"""Held-out JAX cases of ordinary programs, written without looking at the advisor's rules
(captured and measured by ``run_jax.py``): data-parallel training with ``jax.pmap`` and
``jax.lax.pmean`` over two CPU devices, a jitted step whose batch is sharded over a
two-device ``Mesh`` with ``NamedSharding``, a character RNN unrolled with ``jax.lax.scan``,
and a training loop that converts each NumPy batch with ``jnp.asarray`` and logs the loss
every 10 steps.

The two-device cases need two CPU devices, which XLA makes only when told before JAX
starts; run each of them alone with the flag set::

    XLA_FLAGS=--xla_force_host_platform_device_count=2 \\
        $JAX_VENV/bin/python benchmarks/corpus/run_jax.py --only CASE

(the flag is not set for the whole generator: the other cases run on one device as
captured).  Such a case stops with that command when it finds one device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from corpus.common import CLOCK, case
from corpus.jax_cases_common import mlp_init, xent
from corpus.jax_cases_plain import digits

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}
TWO_DEVICES = "--xla_force_host_platform_device_count=2"


def two_devices() -> list:
    """The first two local devices; a clear stop where JAX was started with one."""
    devices = jax.local_devices()
    if len(devices) < 2:
        raise RuntimeError(f"this case needs two CPU devices: run it alone with "
                           f"XLA_FLAGS={TWO_DEVICES}")
    return devices[:2]


def sgd(p: dict, g: dict, lr: float = 0.05) -> dict:
    return jax.tree_util.tree_map(lambda a, d: a - lr * d, p, g)


# -- data-parallel training with jax.pmap and lax.pmean over two CPU devices --------------------
@case("jax_train_pmap_pmean_two_devices", "jax", "training", 6,
      {**JX, "mode": "training", "compiled": "jax.pmap", "devices": 2},
      split="tuned", warmup=3, fix="jax.jit on one device with the whole batch (no "
      "device axis, no pmean)", tags=["pmap", "data_parallel", "two_devices"])
def jax_train_pmap_pmean_two_devices(variant):
    """Data-parallel training as the ``jax.pmap`` examples write it, over two CPU devices:
    a 784-512-512-10 MLP classifier's parameters replicated on both, each host batch of
    512 NumPy rows reshaped to ``(2, 256, 784)``, the step ``jax.pmap``-ed with its
    gradients and loss averaged by ``jax.lax.pmean`` over the ``batch`` axis, SGD, and
    the first replica's loss read with ``float`` every step for the log: compute-bound.
    The fix is the same step under ``jax.jit`` on one device with the whole batch."""
    devices = two_devices()
    x_all, y_all = digits(seed=21)
    params = mlp_init(np.random.default_rng(22), (784, 512, 512, 10))

    def update(p, x, y, axis=None):
        loss, g = jax.value_and_grad(xent)(p, x, y)
        if axis:
            g, loss = jax.lax.pmean((g, loss), axis_name=axis)
        return sgd(p, g), loss

    if variant == "fix":
        run, state = jax.jit(update), {"p": params}
    else:
        run = jax.pmap(lambda p, x, y: update(p, x, y, "batch"), axis_name="batch",
                       devices=devices)
        state = {"p": jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), params)}
    log = []

    def step(i):
        k = (512 * i) % len(x_all)
        with CLOCK("input"):
            x, y = x_all[k:k + 512], y_all[k:k + 512]
            if variant != "fix":
                x, y = x.reshape(2, 256, 784), y.reshape(2, 256)
        state["p"], loss = run(state["p"], x, y)
        log.append(float(loss if variant == "fix" else loss[0]))
        del log[:-100]
    return step


# -- jax.jit with the batch sharded over a two-device Mesh ---------------------------------------
@case("jax_train_mesh_sharded_batch", "jax", "training", 6,
      {**JX, "mode": "training", "devices": 2, "sharding": "NamedSharding"},
      split="holdout", warmup=3, fix="the same jitted step on one device, no shardings",
      tags=["sharding", "mesh", "data_parallel", "two_devices"])
def jax_train_mesh_sharded_batch(variant):
    """Data parallelism the ``jax.sharding`` way: a ``Mesh`` of two CPU devices with one
    ``data`` axis, a 128-1024-1024-1 MLP regressor's parameters put on it replicated
    (``NamedSharding(mesh, P())``), each batch of 512 NumPy rows put on it with
    ``jax.device_put(x, NamedSharding(mesh, P("data")))`` (phase ``copy``), and one
    ``jax.jit``-ed step (mean squared error, SGD with momentum) that XLA partitions over
    the two devices; the loss is read with ``float`` every step: compute-bound.  The fix
    is the same jitted step with no shardings, on one device."""
    devices = two_devices()
    rng = np.random.default_rng(31)
    xs = rng.standard_normal((8 * 512, 128), dtype=np.float32)
    ys = (np.sin(xs[:, :8]).sum(1, keepdims=True) + 0.1 * rng.standard_normal(
        (8 * 512, 1), dtype=np.float32)).astype(np.float32)
    params = mlp_init(np.random.default_rng(32), (128, 1024, 1024, 1))
    if variant == "fix":
        rows = replicated = None
    else:
        mesh = Mesh(np.array(devices), ("data",))
        rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
        params = jax.device_put(params, replicated)
    state = {"p": params, "m": jax.tree_util.tree_map(jnp.zeros_like, params), "log": []}

    def mse(p, x, y):
        n = len(p) // 2
        h = x
        for k in range(n - 1):
            h = jax.nn.relu(h @ p[f"w{k}"] + p[f"b{k}"])
        return jnp.mean((h @ p[f"w{n - 1}"] + p[f"b{n - 1}"] - y) ** 2)

    @jax.jit
    def update(p, m, x, y):
        loss, g = jax.value_and_grad(mse)(p, x, y)
        m = jax.tree_util.tree_map(lambda a, d: 0.9 * a + d, m, g)
        return sgd(p, m, 0.01), m, loss

    def step(i):
        k = 512 * (i % 8)
        with CLOCK("input"):
            x, y = xs[k:k + 512], ys[k:k + 512]
        with CLOCK("copy"):
            if rows is None:
                x, y = jnp.asarray(x), jnp.asarray(y)
            else:
                x, y = jax.device_put(x, rows), jax.device_put(y, rows)
        state["p"], state["m"], loss = update(state["p"], state["m"], x, y)
        state["log"].append(float(loss))
        del state["log"][:-100]
    return step


# -- a character RNN unrolled with lax.scan -----------------------------------------------------
def char_batches(n: int = 16, batch: int = 32, length: int = 65, vocab: int = 64,
                 seed: int = 41) -> list[np.ndarray]:
    """``n`` batches of ``length`` character ids (a noisy repeating text)."""
    rng = np.random.default_rng(seed)
    text = np.tile(rng.integers(0, vocab, 997), 40)
    text = np.where(rng.random(len(text)) < 0.05, rng.integers(0, vocab, len(text)), text)
    starts = rng.integers(0, len(text) - length, (n, batch))
    return [np.stack([text[s:s + length] for s in row]).astype(np.int32) for row in starts]


@case("jax_train_scan_char_rnn", "jax", "training", 4, {**JX, "mode": "training"},
      split="holdout", warmup=3, tags=["rnn", "scan"])
def jax_train_scan_char_rnn(variant):
    """A character-level Elman RNN (64 symbols, a 64-wide embedding, 384 tanh units)
    trained on batches of 32 sequences of 64 characters: the forward pass unrolled with
    ``jax.lax.scan`` over time, next-character cross-entropy, gradients clipped by their
    global norm and an SGD update, all in one jitted step; the loss read with ``float``
    every step: compute-bound, nothing to fix."""
    rng = np.random.default_rng(42)
    vocab, width, hidden = 64, 64, 384

    def mat(a, b, scale):
        return jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) * scale)

    params = {"emb": mat(vocab, width, 0.1), "wx": mat(width, hidden, width ** -0.5),
              "wh": mat(hidden, hidden, hidden ** -0.5), "bh": jnp.zeros(hidden),
              "wo": mat(hidden, vocab, hidden ** -0.5), "bo": jnp.zeros(vocab)}
    data = [jnp.asarray(b) for b in char_batches(vocab=vocab)]

    def loss_fn(p, seq):
        xs = jnp.swapaxes(p["emb"][seq[:, :-1]], 0, 1)  # (time, batch, width)

        def cell(h, x):
            h = jnp.tanh(x @ p["wx"] + h @ p["wh"] + p["bh"])
            return h, h

        _, hs = jax.lax.scan(cell, jnp.zeros((seq.shape[0], hidden)), xs)
        logp = jax.nn.log_softmax(hs @ p["wo"] + p["bo"])
        target = jnp.swapaxes(seq[:, 1:], 0, 1)
        return -jnp.take_along_axis(logp, target[..., None], 2).mean()

    @jax.jit
    def update(p, seq):
        loss, g = jax.value_and_grad(loss_fn)(p, seq)
        norm = jnp.sqrt(sum(jnp.sum(d * d) for d in jax.tree_util.tree_leaves(g)))
        g = jax.tree_util.tree_map(lambda d: d * jnp.minimum(1.0, 5.0 / norm), g)
        return sgd(p, g, 0.5), loss

    state = {"p": params, "log": []}

    def step(i):
        state["p"], loss = update(state["p"], data[i % len(data)])
        state["log"].append(float(loss))
        del state["log"][:-100]
    return step


# -- jnp.asarray on each NumPy batch, the loss logged every 10 steps ----------------------------
@case("jax_train_asarray_log_every10", "jax", "training", 12, {**JX, "mode": "training"},
      split="tuned", warmup=3, fix="the data set put on the device once, each "
      "shuffled batch gathered there", tags=["asarray", "periodic_log", "shuffle"])
def jax_train_asarray_log_every10(variant):
    """A 784-512-512-10 MLP classifier trained with SGD on an MNIST-sized NumPy data set
    in memory: each step takes the next 128 indices of a shuffled permutation, gathers
    the rows with NumPy fancy indexing (phase ``input``), converts them with
    ``jnp.asarray`` (phase ``copy``) and calls the jitted update; the loss is read with
    ``float`` and logged only every 10 steps, so the steps between run asynchronously:
    compute-bound.  The fix a user tries puts the data set on the device once and gathers
    each shuffled batch there."""
    x_all, y_all = digits(seed=51)
    params = mlp_init(np.random.default_rng(52), (784, 512, 512, 10))
    perm = np.random.default_rng(53).permutation(len(x_all))
    if variant == "fix":
        x_dev, y_dev = jnp.asarray(x_all), jnp.asarray(y_all)

    @jax.jit
    def update(p, x, y):
        loss, g = jax.value_and_grad(xent)(p, x, y)
        return sgd(p, g), loss

    state = {"p": params, "log": []}

    def step(i):
        k = (128 * i) % len(perm)
        idx = perm[k:k + 128]
        if variant == "fix":
            with CLOCK("input"):
                x, y = x_dev[idx], y_dev[idx]
        else:
            with CLOCK("input"):
                xb, yb = x_all[idx], y_all[idx]
            with CLOCK("copy"):
                x, y = jnp.asarray(xb), jnp.asarray(yb)
        state["p"], loss = update(state["p"], x, y)
        if i % 10 == 0:
            state["log"].append(f"step {i} loss {float(loss):.4f}")
            del state["log"][:-100]
    return step
