"""A real ``jax.profiler`` capture of a small CNN trained by a jitted step (CPU backend).

Run with JAX in its own venv (never a runtime dependency of sofa_gui)::

    $JAX_VENV/bin/python benchmarks/gen_jax_capture.py -o tests/data/tf

Writes ``OUT/jax_train/plugins/profile/<run>/<host>.xplane.pb`` with ``STEPS`` profiled
steps (after warm-up, so compilation is outside the window, unless ``--with-compile``) and
adds the ground truth (steps, median wall and input wait per step) to
``OUT/ground_truth.json``. Batches are made on the host in numpy, as a plain Python loop
feeding ``jax.jit`` does; no step annotations, so iterations must come from the pattern.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

STEPS = 12
WARMUP = 3
BATCH = 16
SIZE = 40


def init(key):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    return {
        "c1": jax.random.normal(k1, (5, 5, 3, 32)) * 0.1,
        "c2": jax.random.normal(k2, (3, 3, 32, 64)) * 0.05,
        "d1": jax.random.normal(k3, (10 * 10 * 64, 128)) * 0.01,
        "d2": jax.random.normal(k4, (128, 10)) * 0.05,
    }


def forward(p, x):
    dn = ("NHWC", "HWIO", "NHWC")
    x = jax.nn.relu(jax.lax.conv_general_dilated(x, p["c1"], (2, 2), "SAME",
                                                 dimension_numbers=dn))
    x = jax.nn.relu(jax.lax.conv_general_dilated(x, p["c2"], (1, 1), "SAME",
                                                 dimension_numbers=dn))
    x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = jax.nn.relu(x.reshape(x.shape[0], -1) @ p["d1"])
    return x @ p["d2"]


def loss_fn(p, x, y):
    logits = forward(p, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))


@jax.jit
def train_step(p, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - 0.01 * g, p, grads), loss


def batches(seed: int = 0):
    """Host-side numpy preprocessing of each batch (normalise, random flip)."""
    rng = np.random.default_rng(seed)
    while True:
        x = rng.integers(0, 256, (BATCH, SIZE, SIZE, 3)).astype(np.float32) / 255.0
        flip = rng.random(BATCH) < 0.5
        x[flip] = x[flip, :, ::-1]
        yield (x - x.mean()) / x.std(), rng.integers(0, 10, BATCH).astype(np.int32)


def run(params, data, n: int) -> tuple[object, list[float], list[float]]:
    walls, waits = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        x, y = next(data)
        t1 = time.perf_counter()
        params, loss = train_step(params, jnp.asarray(x), jnp.asarray(y))
        float(loss)  # the step's result is read every step, as a logging loop does
        waits.append(t1 - t0)
        walls.append(time.perf_counter() - t0)
    return params, walls, waits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default="tests/data/tf")
    args = ap.parse_args()
    out = Path(args.out)
    logdir = out / "jax_train"
    shutil.rmtree(logdir, ignore_errors=True)
    params, data = init(jax.random.PRNGKey(0)), batches()
    params, _, _ = run(params, data, WARMUP)
    with jax.profiler.trace(str(logdir)):
        params, walls, waits = run(params, data, STEPS)
    wall, wait = statistics.median(walls), statistics.median(waits)
    truth_path = out / "ground_truth.json"
    truth = json.loads(truth_path.read_text()) if truth_path.exists() else {}
    truth["jax_train"] = {
        "case": "jax_train", "steps": STEPS, "batch": BATCH, "jit": True,
        "about": f"JAX {jax.__version__} on {socket.gethostname()}, {os.cpu_count()} CPUs",
        "median_step_ms": round(wall * 1e3, 2), "median_input_wait_ms": round(wait * 1e3, 2),
        "input_share": round(wait / wall, 3), "input_bound": wait / wall >= 0.2,
        "slow_stage": "none (numpy batches, no tf.data)",
        "files": [str(p.relative_to(out)) for p in sorted(logdir.rglob("*.xplane.pb"))],
    }
    print(json.dumps(truth["jax_train"]))
    truth_path.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
