"""JAX cases of the diagnosis corpus (CPU backend): capture and measure.

Run with JAX in its own venv (jax[cpu]; never a runtime dependency of sofa_gui)::

    nice $JAX_VENV/bin/python benchmarks/corpus/run_jax.py [--only CASE ...]

Each capture is the logdir ``jax.profiler.trace`` writes,
``tests/data/corpus/<case>/capture-K/plugins/profile/<run>/<host>.xplane.pb`` (the
``.trace.json.gz`` JAX writes beside it is dropped: the XSpace holds the same events).
Truth is measured without the profiler (``benchmarks/corpus/common.py``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gen_jax_capture import BATCH, SIZE, batches, forward, init, train_step  # noqa: E402

from corpus.common import CLOCK, Driver, case, cli, warmed  # noqa: E402

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


def facts(mode: str, **kw) -> dict:
    return {**JX, "mode": mode, **kw}


def train_loop(data, params=None):
    """Fetch a numpy batch (phase ``input``), run the jitted step, read the loss."""
    state = {"p": params or init(jax.random.PRNGKey(0))}

    def step(i):
        with CLOCK("input"):
            x, y = next(data)
        state["p"], loss = train_step(state["p"], jnp.asarray(x), jnp.asarray(y))
        float(loss)
    return step


@case("jax_train_jit", "jax", "training", 12, facts("training"), warmup=3)
def jax_train_jit(variant):
    """A jitted CNN training step (``jax.value_and_grad`` + SGD update) fed numpy batches
    made on the host: compute-bound."""
    return train_loop(batches())


def slow_batches(seed: int = 0):
    """Host preprocessing done in Python per sample (resample, jitter, normalise)."""
    rng = np.random.default_rng(seed)
    while True:
        xs = []
        for _ in range(BATCH):
            img = rng.integers(0, 256, (SIZE * 2, SIZE * 2, 3)).astype(np.float32) / 255.0
            for _ in range(6):
                img = np.clip(img + rng.normal(0, 0.01, img.shape), 0, 1)
            xs.append(img.reshape(SIZE, 2, SIZE, 2, 3).mean(axis=(1, 3)))
        x = np.stack(xs).astype(np.float32)
        yield (x - x.mean()) / x.std(), rng.integers(0, 10, BATCH).astype(np.int32)


@case("jax_train_input_numpy", "jax", "training", 10, facts("training"), split="holdout",
      warmup=3)
def jax_train_input_numpy(variant):
    """The jitted CNN step fed by slow per-sample numpy preprocessing in the loop's own
    thread: input-bound."""
    return train_loop(slow_batches())


infer = jax.jit(lambda p, x: jnp.argmax(forward(p, x), -1))


@case("jax_infer_jit", "jax", "inference", 12, facts("inference"), warmup=3)
def jax_infer_jit(variant):
    """Jitted CNN inference on batches of 64 held on the device: compute-bound."""
    params = init(jax.random.PRNGKey(1))
    x = jax.random.normal(jax.random.PRNGKey(2), (64, SIZE, SIZE, 3))

    def step(i):
        np.asarray(infer(params, x))
    return step


@case("jax_compile_startup", "jax", "training", 5, facts("training"), split="holdout",
      startup_in_window=True, warmup=1, tags=["warmup", "python_tracer_off"])
def jax_compile_startup(variant):
    """The jitted training step captured from its first call: tracing and XLA compilation
    dominate the window (captured with the Python tracer off: JAX's own tracing of
    itself would be most of the file)."""
    jax.clear_caches()
    return train_loop(batches())


@case("jax_infer_readback", "jax", "inference", 4, facts("inference"),
      fix="one np.asarray of the whole result", warmup=3, tags=["readback"])
def jax_infer_readback(variant):
    """Jitted inference of 16 images whose top 4 class scores are read back one element at
    a time (``float(out[k, j])`` in a Python loop, 64 per step): each read dispatches and
    waits."""
    params = init(jax.random.PRNGKey(1))
    x = jax.random.normal(jax.random.PRNGKey(2), (16, SIZE, SIZE, 3))
    fwd = jax.jit(forward)

    def step(i):
        out = fwd(params, x).block_until_ready()  # the compute, outside the read-back phase
        with CLOCK("sync"):
            if variant == "fix":
                vals = np.asarray(out[:, :4]).tolist()
            else:
                vals = [[float(out[k, j]) for j in range(4)] for k in range(16)]
        return vals
    return step


# -- held-out: an un-jitted training step, per-element read-back of per-example losses --------
def mlp_params(key, sizes=(64, 256, 256, 10)):
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (a, b)) / np.sqrt(a), jnp.zeros(b))
            for k, a, b in zip(keys, sizes, sizes[1:])]


def mlp_losses(params, x, y):
    """Per-example cross-entropy of an MLP classifier."""
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    logp = jax.nn.log_softmax(h @ w + b)
    return -jnp.take_along_axis(logp, y[:, None], 1)[:, 0]


def sgd_update(params, x, y):
    """Loss, per-example losses and the SGD-updated parameters."""
    def mean_loss(p):
        per = mlp_losses(p, x, y)
        return per.mean(), per
    (loss, per), grads = jax.value_and_grad(mean_loss, has_aux=True)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), loss, per


def tabular(seed: int = 0, n: int = 8, batch: int = 128):
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.standard_normal((batch, 64)).astype(np.float32)),
             jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))) for _ in range(n)]


NOJIT = {"framework": "jax", "device": "cpu", "mode": "training"}


@case("jax_train_unjitted", "jax", "training", 3, NOJIT, split="holdout", warmup=3,
      fix="jax.jit the update step", share_from_fix="host_overhead",
      tags=["op_by_op"])
def jax_train_unjitted(variant):
    """A one-hidden-layer MLP classifier trained with ``jax.value_and_grad`` and a ``tree_map`` SGD
    update called without ``jax.jit``: every primitive of the forward, the backward and
    the update is dispatched one by one from Python; jitting the step is the fix."""
    update = jax.jit(sgd_update) if variant == "fix" else sgd_update
    state = {"p": mlp_params(jax.random.PRNGKey(0), (64, 512, 10))}
    data = tabular()

    def step(i):
        x, y = data[i % len(data)]
        state["p"], loss, _ = update(state["p"], x, y)
        return float(loss)
    return step


@case("jax_train_loss_readback", "jax", "training", 3, facts("training"), split="holdout",
      warmup=3, fix="one jax.device_get of the per-example losses", tags=["readback"])
def jax_train_loss_readback(variant):
    """A jitted MLP training step whose per-example losses are logged for hard-example
    mining with ``jax.device_get(per[k])`` for each of the 32 examples: every index is a
    dispatched op and every get a read-back."""
    update = jax.jit(sgd_update)
    state = {"p": mlp_params(jax.random.PRNGKey(0))}
    data, hardest = tabular(batch=32), []

    def step(i):
        x, y = data[i % len(data)]
        state["p"], loss, per = update(state["p"], x, y)
        per.block_until_ready()
        with CLOCK("sync"):
            if variant == "fix":
                vals = jax.device_get(per).tolist()
            else:
                vals = [float(jax.device_get(per[k])) for k in range(per.shape[0])]
        hardest[:] = sorted(hardest + vals)[-16:]
        return float(loss)
    return step


def capture(c, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    step, first = warmed(c)
    opts = jax.profiler.ProfileOptions()
    if "python_tracer_off" in c.tags:
        opts.python_tracer_level = 0
    with jax.profiler.trace(str(dest), profiler_options=opts):
        for i in range(first, first + c.steps):
            step(i)
    for extra in dest.rglob("*.trace.json.gz"):
        extra.unlink()


DRIVER = Driver("run_jax.py", capture, {"jax": jax.__version__})

if __name__ == "__main__":
    sys.exit(cli(DRIVER, __doc__))
