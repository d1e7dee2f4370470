"""JAX cases of the diagnosis corpus (CPU backend): capture and measure.

Run with JAX in its own venv (jax[cpu]; never a runtime dependency of sofa_gui)::

    nice $JAX_VENV/bin/python benchmarks/corpus/run_jax.py [--only CASE ...]

Each capture is the logdir ``jax.profiler.trace`` writes (``<case>/capture-K/plugins/profile/
<run>/<host>.xplane.pb``, stored gzip-compressed; the ``.trace.json.gz`` beside it is dropped:
the XSpace holds the same events). Truth is measured without the profiler (``common.py``).
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gen_jax_capture import BATCH, SIZE, batches, forward, init, train_step  # noqa: E402

import corpus.jax_cases_flax as FLAX  # noqa: E402  (registers its cases)
import corpus.jax_cases_plain  # noqa: E402  (registers its cases)
from corpus.common import CLOCK, Driver, case, cli, measure, warmed  # noqa: E402

#: Every ``jax_cases_*.py`` beside this file registers its cases on import.
for _path in sorted(Path(__file__).parent.glob("jax_cases_*.py")):
    importlib.import_module(f"corpus.{_path.stem}")

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


@case("jax_train_unjitted", "jax", "training", 3, NOJIT, warmup=3,
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


# -- held-out cases written as users write them: a hand-written Adam, a metrics callback in
# the jitted step, a new batch shape (and so a new compilation) every step ------------------
def adam(lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    """An optax-style optimizer written by hand: ``(init, update)``, ``update`` returning
    the parameter updates and the new state."""
    def init_fn(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return {"m": zeros, "v": zeros, "t": jnp.zeros((), jnp.int32)}

    def update_fn(grads, state):
        t = state["t"] + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
        scale = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        updates = jax.tree_util.tree_map(lambda m, v: -scale * m / (jnp.sqrt(v) + eps), m, v)
        return updates, {"m": m, "v": v, "t": t}
    return init_fn, update_fn


def host_init(seed: int, sizes: tuple[int, ...]):
    """MLP parameters drawn with numpy on the host and put on the device (no jitted
    initializer: each would be one more compiled program in the capture)."""
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) / np.sqrt(a)),
             jnp.zeros(b)) for a, b in zip(sizes, sizes[1:])]


def apply_updates(params, updates):
    return jax.tree_util.tree_map(lambda p, u: p + u, params, updates)


def digit_batches(n: int = 8, batch: int = 128, seed: int = 0):
    """Flattened 28x28 images and labels, made once and held on the device."""
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.random((batch, 784), dtype=np.float32)),
             jnp.asarray(rng.integers(0, 10, batch).astype(np.int32))) for _ in range(n)]


@case("jax_train_adam_mlp", "jax", "training", 8, facts("training"), split="holdout",
      warmup=3, tags=["optax_style", "adam"])
def jax_train_adam_mlp(variant):
    """A GELU MLP classifier (784-1024-512-10) trained with a hand-written, optax-style Adam
    (``init``/``update``/``apply_updates``) inside one jitted ``update`` function, on
    batches of 128 held on the device; the loop keeps a running loss (one ``float`` a
    step): compute-bound."""
    init_fn, update_fn = adam()
    params = host_init(3, (784, 1024, 512, 10))
    state = {"p": params, "opt": init_fn(params), "loss": 0.0}
    data = digit_batches()

    def loss_fn(p, x, y):
        h = x
        for w, b in p[:-1]:
            h = jax.nn.gelu(h @ w + b)
        w, b = p[-1]
        return -jnp.take_along_axis(jax.nn.log_softmax(h @ w + b), y[:, None], 1).mean()

    @jax.jit
    def update(p, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        updates, opt_state = update_fn(grads, opt_state)
        return apply_updates(p, updates), opt_state, loss

    def step(i):
        x, y = data[i % len(data)]
        state["p"], state["opt"], loss = update(state["p"], state["opt"], x, y)
        state["loss"] = 0.9 * state["loss"] + 0.1 * float(loss)
    return step


@case("jax_train_metrics_callback", "jax", "training", 4, facts("training"),
      split="tuned", warmup=3, share_from_fix="sync", share_variant="no_callback",
      tags=["host_callback", "logging"])
def jax_train_metrics_callback(variant):
    """A jitted autoencoder step (784-256-64-256-784, SGD with momentum) that logs its
    loss and gradient norm from inside the compiled function with ``jax.debug.callback``
    (a Python function formatting a log line per step): compute-bound; what the same
    step without the callback (``no_callback``) saves is the callback's host round trip,
    counted as sync."""
    params = host_init(4, (784, 256, 64, 256, 784))
    state = {"p": params, "mom": jax.tree_util.tree_map(jnp.zeros_like, params)}
    data, log = digit_batches(seed=1), []

    def log_metrics(step, loss, gnorm):
        log.append(f"step {int(step)} loss {float(loss):.5f} |g| {float(gnorm):.4f}")
        del log[:-100]

    def loss_fn(p, x):
        h = x
        for w, b in p[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = p[-1]
        return jnp.mean((jax.nn.sigmoid(h @ w + b) - x) ** 2)

    @jax.jit
    def train(p, mom, x, i):
        loss, grads = jax.value_and_grad(loss_fn)(p, x)
        if variant != "no_callback":
            gnorm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads)))
            jax.debug.callback(log_metrics, i, loss, gnorm)
        mom = jax.tree_util.tree_map(lambda m, g: 0.9 * m + g, mom, grads)
        return jax.tree_util.tree_map(lambda a, m: a - 0.05 * m, p, mom), mom, loss

    def step(i):
        x, _ = data[i % len(data)]
        state["p"], state["mom"], loss = train(state["p"], state["mom"], x, i)
        loss.block_until_ready()
    return step


class CompileClock:
    """Adds the time JAX spends tracing, lowering and compiling (its monitoring events) to
    the current step's ``startup`` phase."""

    EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
              "/jax/core/compile/jaxpr_to_mlir_module_duration",
              "/jax/core/compile/backend_compile_duration")
    installed = False

    @classmethod
    def install(cls):
        if not cls.installed:
            jax.monitoring.register_event_duration_secs_listener(cls.record)
            cls.installed = True

    @staticmethod
    def record(event: str, seconds: float, **kw):
        if event in CompileClock.EVENTS:
            CLOCK.acc["startup"] += seconds


corpus.jax_cases_plain.register_startup_cases(CompileClock)


def sentence_batches(seed: int = 0, batch: int = 32, longest: int = 128):
    """Token batches of a new length each (16..``longest``), in a fixed order."""
    rng = np.random.default_rng(seed)
    lengths = 16 + (np.arange(113) * 47) % (longest - 15)
    return [(rng.integers(1, 1000, (batch, int(n))).astype(np.int32),
             rng.integers(0, 2, batch).astype(np.int32)) for n in lengths]


@case("jax_train_shape_recompile", "jax", "training", 3, facts("training"),
      split="tuned", warmup=2, fix="pad every batch to 128 tokens (one compilation)",
      tags=["recompile", "variable_length", "python_tracer_off"])
def jax_train_shape_recompile(variant):
    """A jitted sentence classifier (token embeddings, mean-pooled, a linear head; SGD)
    trained on batches whose length is that of their longest sentence, different every
    step: ``jax.jit`` traces and compiles the step again for each new shape (captured
    with the Python tracer off); padding every batch to 128 tokens, with a mask,
    compiles once."""
    CompileClock.install()
    (emb, _), (head, _) = host_init(5, (1000, 64, 2))
    params = {"emb": emb, "head": head}
    data = sentence_batches()

    def loss_fn(p, ids, mask, y):
        e = p["emb"][ids] * mask[..., None]
        logits = e.sum(1) / mask.sum(1, keepdims=True) @ p["head"]
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()

    @jax.jit
    def train(p, ids, mask, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, ids, mask, y)
        return jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), loss

    state = {"p": params}

    def step(i):
        ids, y = data[i % len(data)]
        mask = np.ones(ids.shape, np.float32)
        if variant == "fix":
            pad = 128 - ids.shape[1]
            ids, mask = np.pad(ids, ((0, 0), (0, pad))), np.pad(mask, ((0, 0), (0, pad)))
        state["p"], loss = train(state["p"], ids, mask, y)
        return float(loss)
    return step


# -- held-out field cases: a Python generator tokenizing text, a jitted call per sample --------
VOCAB = [f"w{k}" for k in range(4000)]
WORD_ID = {w: k + 2 for k, w in enumerate(VOCAB)}  # 0: padding, 1: unknown


def reviews_text(n: int = 2048, seed: int = 13) -> list[tuple[str, int]]:
    """Raw review texts (40..200 words, some unknown, mixed case) and their labels."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        draws = rng.integers(0, 4400, 40 + k % 161)
        words = [VOCAB[j] if j < 4000 else f"x{j}" for j in draws]
        out.append((" ".join(w.upper() if j % 7 == 0 else w for j, w in enumerate(words))
                    + ".", k % 2))
    return out


def text_batches(texts: list[tuple[str, int]], batch: int = 64, length: int = 128):
    """A Python generator: each review lower-cased, split, looked up word by word and
    padded to ``length`` tokens; each batch ``np.stack``-ed from the samples."""
    while True:
        for k in range(0, len(texts) - batch + 1, batch):
            ids, labels = [], []
            for text, label in texts[k:k + batch]:
                toks = [WORD_ID.get(w.strip(".,"), 1) for w in text.lower().split()]
                ids.append(np.array((toks + [0] * length)[:length], np.int32))
                labels.append(np.int32(label))
            yield np.stack(ids), np.stack(labels)


@case("jax_train_text_generator", "jax", "training", 4, facts("training"),
      split="holdout", warmup=3, tags=["generator", "text", "tokenize"])
def jax_train_text_generator(variant):
    """A jitted bag-of-embeddings sentiment classifier (4002x64 embeddings, mean-pooled, a
    64-128-2 MLP; SGD) fed by a Python generator that tokenizes each review word by word
    and ``np.stack``-s 64 of them into a batch every step: the loop waits for its batch
    (input-bound)."""
    rng = np.random.default_rng(6)
    params = {"emb": jnp.asarray(rng.standard_normal((4002, 64), dtype=np.float32) * 0.1),
              **{k: v for k, v in zip(("w1", "w2"), (w for w, _ in host_init(7, (64, 128, 2))))}}
    data = text_batches(reviews_text())

    def loss_fn(p, ids, y):
        mask = (ids > 0).astype(jnp.float32)
        h = (p["emb"][ids] * mask[..., None]).sum(1) / jnp.maximum(mask.sum(1), 1)[:, None]
        logits = jax.nn.relu(h @ p["w1"]) @ p["w2"]
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()

    @jax.jit
    def train(p, ids, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, ids, y)
        return jax.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), loss

    state = {"p": params}

    def step(i):
        with CLOCK("input"):
            ids, y = next(data)
        state["p"], loss = train(state["p"], ids, y)
        return float(loss)
    return step


@case("jax_infer_per_sample_jit", "jax", "inference", 4, facts("inference", batch=1),
      split="tuned", warmup=3, fix="jax.vmap the scoring function over the 64 requests",
      share_from_fix="host_overhead", per_item=64, fix_per_item=64,
      tags=["per_sample", "vmap"])
def jax_infer_per_sample_jit(variant):
    """A fraud scorer (a 48-256-256-1 MLP) jitted for one transaction and called in a
    Python loop over the 64 transactions of each step (each a numpy row from the host),
    the 64 scores stacked and read once: one dispatch per transaction; one call of
    ``jax.jit(jax.vmap(score))`` on the batch is the fix."""
    params = host_init(8, (48, 256, 256, 1))
    rows = np.random.default_rng(9).standard_normal((256, 48), dtype=np.float32)

    def score(p, x):
        h = x
        for w, b in p[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = p[-1]
        return jax.nn.sigmoid(h @ w + b)[0]

    one, batched = jax.jit(score), jax.jit(jax.vmap(score, in_axes=(None, 0)))

    def step(i):
        batch = rows[(64 * i) % 256:(64 * i) % 256 + 64]
        if variant == "fix":
            return np.asarray(batched(params, batch))
        return np.asarray(jnp.stack([one(params, x) for x in batch]))
    return step


# -- held-out everyday cases: a static argument that changes every step, float64 batches put
# on the device every step ----------------------------------------------------------------------
@case("jax_train_static_lr_recompile", "jax", "training", 2, facts("training"),
      split="tuned", warmup=2, fix="the learning rate passed as a traced argument",
      tags=["recompile", "static_argnums", "python_tracer_off"])
def jax_train_static_lr_recompile(variant):
    """An MLP classifier (64-128-10) trained with a step jitted with
    ``static_argnums`` on its learning rate, which a cosine schedule changes every step:
    each new value is a new static argument, so ``jax.jit`` traces and compiles the step
    again every step (captured with the Python tracer off); passing the rate as an
    ordinary, traced argument compiles once."""
    CompileClock.install()

    def update(p, x, y, lr):
        loss, grads = jax.value_and_grad(lambda q: mlp_losses(q, x, y).mean())(p)
        return jax.tree_util.tree_map(lambda a, g: a - lr * g, p, grads), loss

    train = jax.jit(update) if variant == "fix" else jax.jit(update, static_argnums=3)
    state = {"p": mlp_params(jax.random.PRNGKey(0), (64, 128, 10))}
    data = tabular()

    def step(i):
        x, y = data[i % len(data)]
        lr = 0.05 * 0.5 * (1 + np.cos(np.pi * (i % 1000) / 1000))
        state["p"], loss = train(state["p"], x, y, float(lr))
        return float(loss)
    return step


@case("jax_train_device_put_float64", "jax", "training", 3, facts("training"),
      split="tuned", warmup=3, fix="the data set converted to float32 and put on the "
      "device once, batches sliced there", tags=["device_put", "float64"])
def jax_train_device_put_float64(variant):
    """A jitted softmax regression over 1024 features trained on a float64 numpy data set
    (as ``np.random`` makes it): every step slices a batch of 512 rows and calls
    ``jax.device_put`` on it, which converts the 4 MB of float64 to float32 and copies it
    (phase ``copy``); the data set converted and put on the device once, the batches
    sliced there, is the fix."""
    rng = np.random.default_rng(6)
    xs, ys = rng.standard_normal((8 * 512, 1024)), rng.integers(0, 10, 8 * 512)
    w = jnp.zeros((1024, 10))

    @jax.jit
    def train(w, x, y):
        def loss_fn(w):
            logp = jax.nn.log_softmax(x @ w)
            return -jnp.take_along_axis(logp, y[:, None], 1).mean()
        loss, g = jax.value_and_grad(loss_fn)(w)
        return w - 0.1 * g, loss

    state = {"w": w}
    if variant == "fix":
        xs_dev, ys_dev = jax.device_put(xs.astype(np.float32)), jax.device_put(ys)

    def step(i):
        k = 512 * (i % 8)
        with CLOCK("copy"):
            if variant == "fix":
                x, y = xs_dev[k:k + 512], ys_dev[k:k + 512]
            else:
                x, y = jax.device_put(xs[k:k + 512]), jax.device_put(ys[k:k + 512])
            x.block_until_ready()
        state["w"], loss = train(state["w"], x, y)
        return float(loss)
    return step


@case("jax_train_scan_steps", "jax", "training", 4, facts("training"), split="tuned",
      warmup=3, fix="8 steps in one jitted lax.scan over 8 batches", per_item=1,
      fix_per_item=8, share_from_fix="host_overhead", tags=["small_steps", "scan"])
def jax_train_scan_steps(variant):
    """A small MLP classifier (64-128-128-10, SGD) trained on batches of 64 rows held on
    the device, its jitted step called once per batch from Python and the loss read with
    ``float`` after each: every step pays the call's dispatch and the read's round trip
    around a fraction of a millisecond of work; the fix runs 8 steps in one jitted
    ``jax.lax.scan`` over 8 stacked batches and reads their losses once (per batch)."""
    data = tabular(seed=3, batch=64)
    xs, ys = jnp.stack([x for x, _ in data]), jnp.stack([y for _, y in data])
    one = jax.jit(lambda p, x, y: sgd_update(p, x, y)[:2])

    @jax.jit
    def eight(p, xs, ys):
        return jax.lax.scan(lambda q, xy: sgd_update(q, *xy)[:2], p, (xs, ys))

    state = {"p": mlp_params(jax.random.PRNGKey(0), (64, 128, 128, 10))}

    def step(i):
        if variant == "fix":
            state["p"], losses = eight(state["p"], xs, ys)
            return np.asarray(losses).tolist()
        x, y = data[i % len(data)]
        state["p"], loss = one(state["p"], x, y)
        return float(loss)
    return step


def capture(c, dest: Path) -> None:
    if c.name in FLAX.FIT:  # a Keras fit: traced from inside the fit
        return FLAX.capture_fit(c, dest)
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


def measure_case(c, rounds: int) -> dict:
    return (FLAX.measure_fit if c.name in FLAX.FIT else measure)(c, rounds)


DRIVER = Driver("run_jax.py", capture, {"jax": jax.__version__}, measure=measure_case)

if __name__ == "__main__":
    sys.exit(cli(DRIVER, __doc__))
