"""Held-out JAX cases of plain programs, written without looking at the advisor's rules
(captured and measured by ``run_jax.py``): a text-classification server that pads each
batch of requests to its longest request, so ``jax.jit`` compiles again for every new
length, and a jitted training step followed by ``block_until_ready`` and an accuracy
counted in NumPy every step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from corpus.common import CLOCK, case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


def dense(rng, a: int, b: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    return (jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) / np.sqrt(a)),
            jnp.zeros(b))


# -- start-up: a server compiling again for each padded length -------------------------------
def encoder_params(seed: int = 0, vocab: int = 8000, width: int = 64) -> dict:
    """Token embeddings, one self-attention layer (q, k, v, out), a 64-128-64 feed-forward
    block and a 4-way head."""
    rng = np.random.default_rng(seed)
    names = ("q", "k", "v", "o")
    return {"emb": jnp.asarray(rng.standard_normal((vocab, width), dtype=np.float32) * 0.1),
            **{n: dense(rng, width, width) for n in names},
            "ff1": dense(rng, width, 2 * width), "ff2": dense(rng, 2 * width, width),
            "head": dense(rng, width, 4)}


def classify(p: dict, ids, mask):
    """One masked self-attention encoder layer over the tokens, mean-pooled over the real
    tokens, to 4 class probabilities."""
    def lin(name, h):
        w, b = p[name]
        return h @ w + b
    h = p["emb"][ids]
    att = lin("q", h) @ jnp.swapaxes(lin("k", h), 1, 2) / 8.0
    att = jax.nn.softmax(jnp.where(mask[:, None, :] > 0, att, -1e9), axis=-1)
    h = h + lin("o", att @ lin("v", h))
    h = h + lin("ff2", jax.nn.relu(lin("ff1", h)))
    pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return jax.nn.softmax(lin("head", pooled))


def requests(n: int = 4096, seed: int = 31) -> list[np.ndarray]:
    """Incoming requests: token ids of 8 to 512 tokens each."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 8000, k).astype(np.int32) for k in rng.integers(8, 513, n)]


def pad(batch: list[np.ndarray], length: int) -> tuple[np.ndarray, np.ndarray]:
    """The requests padded with 0 to ``length`` tokens, and their masks."""
    ids = np.zeros((len(batch), length), np.int32)
    mask = np.zeros((len(batch), length), np.float32)
    for k, r in enumerate(batch):
        ids[k, :len(r)], mask[k, :len(r)] = r, 1.0
    return ids, mask


def bucket(n: int) -> int:
    """The smallest of 64, 128, 256, 512 tokens that holds ``n``."""
    return next(b for b in (64, 128, 256, 512) if n <= b)


def register_startup_cases(compile_clock) -> None:
    """Register the case timed with ``run_jax.py``'s compile clock (``compile_clock``
    adds JAX's tracing, lowering and compiling to the step's ``startup`` phase)."""

    @case("jax_infer_dynamic_padding", "jax", "inference", 4, {**JX, "mode": "inference"},
          split="tuned", warmup=3,
          fix="pad to a bucket of 64/128/256/512 tokens (at most 4 compilations)",
          tags=["recompile", "variable_length", "dynamic_padding", "server",
                "python_tracer_off"])
    def jax_infer_dynamic_padding(variant):
        """A text-classification server (a one-layer self-attention encoder, mean-pooled,
        4 classes) answering 4 requests of 8 to 512 tokens a step, each batch padded to
        its longest request as dynamic padding does: nearly every batch has a length
        not seen before, so ``jax.jit`` traces and compiles the function again (captured
        with the Python tracer off); padding to a bucket of 64, 128, 256 or 512 tokens
        compiles at most 4 times."""
        compile_clock.install()
        params, reqs = encoder_params(), requests()
        fwd = jax.jit(lambda p, ids, mask: classify(p, ids, mask))  # a server's own cache

        def step(i):
            batch = reqs[(4 * i) % len(reqs):(4 * i) % len(reqs) + 4]
            longest = max(len(r) for r in batch)
            ids, mask = pad(batch, bucket(longest) if variant == "fix" else longest)
            return np.asarray(fwd(params, ids, mask)).argmax(1)
        return step


# -- compute: block_until_ready and a NumPy accuracy after every step -----------------------
def mlp(seed: int = 1, sizes=(784, 512, 512, 10)) -> list:
    rng = np.random.default_rng(seed)
    return [dense(rng, a, b) for a, b in zip(sizes, sizes[1:])]


def logits_of(params, x):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return h @ w + b


def xent(params, x, y):
    logits = logits_of(params, x)
    loss = -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()
    return loss, logits


@jax.jit
def sgd_momentum(params, vel, x, y):
    """One step of SGD with momentum 0.9; returns the logits for the caller's metric."""
    (loss, logits), g = jax.value_and_grad(xent, has_aux=True)(params, x, y)
    vel = jax.tree_util.tree_map(lambda v, d: 0.9 * v + d, vel, g)
    params = jax.tree_util.tree_map(lambda p, v: p - 0.01 * v, params, vel)
    return params, vel, loss, logits


@jax.jit
def sgd_momentum_acc(params, vel, x, y):
    """The same step counting the batch's right predictions on the device."""
    params, vel, loss, logits = sgd_momentum(params, vel, x, y)
    return params, vel, loss, (logits.argmax(1) == y).sum()


def digits(n: int = 8192, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """An MNIST-sized data set held in memory as NumPy arrays (float32 pixels)."""
    rng = np.random.default_rng(seed)
    return (rng.random((n, 784), dtype=np.float32),
            rng.integers(0, 10, n).astype(np.int32))


@case("jax_train_block_numpy_metric", "jax", "training", 6, {**JX, "mode": "training"},
      split="holdout", warmup=3,
      fix="right predictions counted in the jitted step and read as one int; no "
      "block_until_ready, no logits read back",
      tags=["block_until_ready", "numpy_metric", "readback"])
def jax_train_block_numpy_metric(variant):
    """A 784-512-512-10 MLP trained with SGD and momentum on batches of 256 rows sliced
    from NumPy arrays in memory; after every jitted step the loop calls
    ``loss.block_until_ready()`` (for an honest step time), reads the logits back with
    ``np.asarray`` and counts the right predictions with NumPy for a running accuracy.
    The fix counts them inside the jitted step and reads the count with one ``int``,
    without the wait or the logits."""
    x_all, y_all = digits()
    params = mlp()
    state = {"p": params, "v": jax.tree_util.tree_map(jnp.zeros_like, params),
             "right": 0, "seen": 0}

    def step(i):
        k = (256 * i) % len(x_all)
        with CLOCK("input"):
            x, y = x_all[k:k + 256], y_all[k:k + 256]
        if variant == "fix":
            state["p"], state["v"], loss, right = sgd_momentum_acc(state["p"], state["v"],
                                                                   x, y)
            state["right"] += int(right)
        else:
            state["p"], state["v"], loss, logits = sgd_momentum(state["p"], state["v"],
                                                                x, y)
            loss.block_until_ready()
            with CLOCK("sync"):
                preds = np.asarray(logits).argmax(1)
            state["right"] += int((preds == y).sum())
        state["seen"] += len(y)
        return state["right"] / state["seen"]
    return step
