"""A real ``jax.profiler`` capture of a jitted step fed numpy batches converted with a
dtype, for the host breakdown's reading of a loop's ``jnp.array`` calls.

Run with JAX in its own venv (never a runtime dependency of sofa_gui)::

    $JAX_VENV/bin/python benchmarks/gen_jax_typed_conversion_capture.py \\
        -o tests/data/jax-typed-conversion

The loop draws a float64 numpy batch (64 rows of 32 features) and its labels each step and
converts both with ``jnp.array(x, dtype=jnp.float32)`` beside the jitted SGD step of a
small MLP: a conversion that changes the dtype leaves JAX's no-copy fast path and flattens
its one array as a tree (a ``tree_flatten`` of one leaf), walking no list.  ``STEPS`` steps
after three unprofiled ones, JAX's Python tracer on; the logdir is
``OUT/plugins/profile/<run>/`` (the Perfetto copy JAX also writes is dropped).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

STEPS = 6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    out = ap.parse_args().out
    rng = np.random.default_rng(0)
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    params = {"w1": jax.random.normal(k1, (32, 256)) * 0.1, "b1": jnp.zeros(256),
              "w2": jax.random.normal(k2, (256, 10)) * 0.1, "b2": jnp.zeros(10)}

    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)

    def one(p):
        xb = rng.standard_normal((64, 32))  # float64, as numpy makes it
        yb = rng.integers(0, 10, 64)
        x, y = jnp.array(xb, dtype=jnp.float32), jnp.array(yb, dtype=jnp.int32)
        p = step(p, x, y)
        jax.block_until_ready(p)
        return p

    for _ in range(3):
        params = one(params)
    shutil.rmtree(out, ignore_errors=True)
    with jax.profiler.trace(str(out)):
        for _ in range(STEPS):
            params = one(params)
    for extra in out.rglob("*.trace.json.gz"):
        extra.unlink()


if __name__ == "__main__":
    main()
