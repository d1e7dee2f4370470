"""JAX cases of scientific and reinforcement-learning programs, written without looking
at the advisor's rules (captured and measured by ``run_jax.py``): k-means colour
quantisation whose jitted update runs once per iteration with a ``float(shift) < tol``
check after each, a REINFORCE agent stepping a NumPy CartPole with a jitted policy call
per environment step, an Ising-model Metropolis sampler whose sweeps are a Python loop of
jitted sweeps, and a physics-informed network whose residual gradient is taken per
collocation point in a Python loop.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from corpus.common import CLOCK, case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


# -- k-means colour quantisation: one jitted update per iteration, a float() check after each --
K, MAX_ITER, TOL, PIXELS = 16, 50, 1e-5, 48


def photos(n: int = 8, seed: int = 31) -> list[np.ndarray]:
    """``n`` synthetic 48x48 RGB photos: smooth colour fields over a few blobs, as
    ``(pixels, 3)`` float32 rows in [0, 1]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:PIXELS, 0:PIXELS] / PIXELS
    out = []
    for _ in range(n):
        img = np.zeros((PIXELS, PIXELS, 3), np.float32)
        for _ in range(12):
            cy, cx, r = rng.uniform(0, 1, 3) * (1, 1, 0.3) + (0, 0, 0.05)
            w = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
            img += w[..., None] * rng.uniform(0, 1, 3)
        img += 0.03 * rng.standard_normal(img.shape)
        out.append(np.clip(img / img.max(), 0, 1).reshape(-1, 3).astype(np.float32))
    return out


def kmeans_update(centroids, pixels):
    """One Lloyd iteration: assign each pixel to its nearest centroid, move each centroid
    to its pixels' mean; also how far the centroids moved."""
    d = jnp.sum((pixels[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
    onehot = jax.nn.one_hot(jnp.argmin(d, axis=1), K)
    counts = onehot.sum(0)
    new = jnp.where(counts[:, None] > 0,
                    (onehot.T @ pixels) / jnp.maximum(counts, 1.0)[:, None], centroids)
    return new, jnp.sum((new - centroids) ** 2)


@case("jax_train_kmeans_tol_check", "jax", "training", 3, {**JX, "mode": "training"},
      split="tuned", warmup=2,
      fix="the iterations in jax.lax.while_loop inside one jitted fit (same tolerance)",
      share_from_fix="host_overhead", tags=["kmeans", "python_loop", "convergence_check"])
def jax_train_kmeans_tol_check(variant):
    """Colour quantisation of 48x48 photos to 16 colours by k-means, written as a k-means
    tutorial writes it: ``update = jax.jit(kmeans_update)`` is called once per iteration
    from a Python ``for`` loop of at most 50, and after each the loop checks convergence
    with ``if float(shift) < tol: break``; each step fits one photo from 16 pixels drawn
    with NumPy, then maps every pixel to its colour with a jitted assignment read back
    with ``np.asarray``.  The fix runs the same iterations and the same test in
    ``jax.lax.while_loop`` inside one jitted fit."""
    images = [jnp.asarray(p) for p in photos()]
    inits = [jnp.asarray(p[np.random.default_rng(k).choice(len(p), K, replace=False)])
             for k, p in enumerate(photos())]
    update = jax.jit(kmeans_update)

    @jax.jit
    def fit(centroids, pixels):
        def cond(s):
            return (s[1] < MAX_ITER) & (s[2] >= TOL)

        def body(s):
            c, it, _ = s
            c, shift = kmeans_update(c, pixels)
            return c, it + 1, shift
        c, it, _ = jax.lax.while_loop(cond, body, (centroids, 0, jnp.inf))
        return c, it

    @jax.jit
    def quantise(centroids, pixels):
        d = jnp.sum((pixels[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        return centroids[jnp.argmin(d, axis=1)]

    log = []

    def step(i):
        pixels, c = images[i % len(images)], inits[i % len(inits)]
        if variant == "fix":
            c, iters = fit(c, pixels)
            iters = int(iters)
        else:
            for iters in range(1, MAX_ITER + 1):  # noqa: B007 - logged after the loop
                c, shift = update(c, pixels)
                if float(shift) < TOL:
                    break
        out = np.asarray(quantise(c, pixels))
        log.append((iters, float(out.mean())))
        del log[:-100]
        return log[-1]
    return step


# -- REINFORCE on a NumPy CartPole: a jitted policy call per environment step -----------------
HORIZON, ENVS = 100, 8


class CartPole:
    """gym's ``CartPole-v1`` equations in plain Python (Euler steps of 0.02 s), reset
    when the pole falls or the cart leaves the track."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.state = None

    def reset(self) -> np.ndarray:
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        return self.state.astype(np.float32)

    def step(self, action: int):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        done = abs(x) > 2.4 or abs(theta) > 0.2095
        return self.state.astype(np.float32), 1.0, done


def policy_init(seed: int = 0, sizes=(4, 64, 64, 2)) -> list:
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) / np.sqrt(a)),
             jnp.zeros(b)) for a, b in zip(sizes, sizes[1:])]


def policy_logits(params, obs):
    h = obs
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return h @ w + b


def discounted(rewards: np.ndarray, dones: np.ndarray, gamma: float = 0.99) -> np.ndarray:
    """Returns-to-go along the time axis, restarting after each episode's end."""
    out, run = np.zeros_like(rewards), np.zeros(rewards.shape[1:], rewards.dtype)
    for t in range(len(rewards) - 1, -1, -1):
        run = rewards[t] + gamma * run * (1.0 - dones[t])
        out[t] = run
    return out


@case("jax_train_reinforce_cartpole", "jax", "training", 3, {**JX, "mode": "training"},
      split="tuned", warmup=2,
      fix=f"{ENVS} CartPoles stepped in a loop as a synchronous vector environment does, "
      "one policy call on their 8 observations per time step", share_from_fix="host_overhead",
      fix_per_item=ENVS, tags=["reinforcement_learning", "environment", "python_loop"])
def jax_train_reinforce_cartpole(variant):
    """A REINFORCE agent (a 4-64-64-2 tanh policy) learning CartPole, the environment
    gym's equations in NumPy and Python floats: each step is a rollout of 100 environment
    steps (the pole reset whenever it falls); per environment step the observation goes
    to the jitted ``policy(params, obs)``, the two action probabilities come back with
    ``np.asarray`` and the action is drawn with ``rng.choice(2, p=probs)``; after the
    rollout the returns are discounted in NumPy and one jitted policy-gradient update
    runs over the 100 transitions.  The environment's steps and resets are what the
    rollout waits for (``input``).  The fix steps 8 CartPoles one after another in a loop,
    as gym's ``SyncVectorEnv`` does, with one policy call on the 8 observations per time
    step, the 8 actions drawn at once, and one update over the 800 transitions."""
    n = ENVS if variant == "fix" else 1
    envs = [CartPole(200 + k) for k in range(n)]
    rng = np.random.default_rng(7)
    state = {"p": policy_init(), "obs": np.stack([e.reset() for e in envs])}
    policy = jax.jit(lambda p, o: jax.nn.softmax(policy_logits(p, o)))

    @jax.jit
    def update(p, obs, actions, returns):
        def loss_fn(p):
            logp = jax.nn.log_softmax(policy_logits(p, obs))
            chosen = jnp.take_along_axis(logp, actions[:, None], 1)[:, 0]
            adv = (returns - returns.mean()) / (returns.std() + 1e-8)
            return -jnp.mean(chosen * adv)
        loss, g = jax.value_and_grad(loss_fn)(p)
        return jax.tree_util.tree_map(lambda a, d: a - 1e-2 * d, p, g), loss

    def step(i):
        obs_buf = np.zeros((HORIZON, n, 4), np.float32)
        act_buf = np.zeros((HORIZON, n), np.int32)
        rew_buf, done_buf = np.zeros((HORIZON, n), np.float32), np.zeros((HORIZON, n))
        for t in range(HORIZON):
            obs_buf[t] = state["obs"]
            if variant == "fix":
                probs = np.asarray(policy(state["p"], state["obs"]))
                actions = (rng.random(n) < probs[:, 1]).astype(np.int32)
            else:
                probs = np.asarray(policy(state["p"], state["obs"][0]))
                actions = [rng.choice(2, p=probs / probs.sum())]
            with CLOCK("input"):
                for k, env in enumerate(envs):
                    obs, r, done = env.step(int(actions[k]))
                    if done:
                        obs = env.reset()
                    state["obs"][k], act_buf[t, k] = obs, actions[k]
                    rew_buf[t, k], done_buf[t, k] = r, done
        returns = discounted(rew_buf, done_buf)
        state["p"], loss = update(state["p"], obs_buf.reshape(-1, 4), act_buf.reshape(-1),
                                  returns.reshape(-1))
        return float(loss)
    return step


# -- Ising model: a Python loop of jitted Metropolis sweeps -----------------------------------
LATTICE, SWEEPS = 192, 10


@case("jax_train_ising_sweep_loop", "jax", "training", 3, JX,  # a sampler: no mode
      split="tuned", warmup=2,
      fix="the 10 sweeps in jax.lax.fori_loop inside one jitted function",
      share_from_fix="host_overhead", tags=["ising", "mcmc", "python_loop"])
def jax_train_ising_sweep_loop(variant):
    """A 2-D Ising model on a 192x192 periodic lattice annealed by Metropolis sampling, as
    a statistical-physics notebook writes it in JAX: a jitted ``sweep(spins, key, beta)``
    updates the two checkerboard halves in turn (neighbour sums with ``jnp.roll``, the
    flips accepted against ``jax.random.uniform``); each step runs 10 sweeps in a Python
    ``for`` loop at the step's temperature, then reads the magnetisation and the energy
    per spin with ``float`` for the log.  The fix runs the 10 sweeps in
    ``jax.lax.fori_loop`` inside one jitted function."""
    yy, xx = np.indices((LATTICE, LATTICE))
    black = jnp.asarray((yy + xx) % 2 == 0)

    def half(spins, key, beta, mask):
        nb = (jnp.roll(spins, 1, 0) + jnp.roll(spins, -1, 0)
              + jnp.roll(spins, 1, 1) + jnp.roll(spins, -1, 1))
        d_e = 2.0 * spins * nb
        flip = mask & (jax.random.uniform(key, spins.shape) < jnp.exp(-beta * d_e))
        return jnp.where(flip, -spins, spins)

    def one_sweep(spins, key, beta):
        k1, k2 = jax.random.split(key)
        return half(half(spins, k1, beta, black), k2, beta, ~black)

    sweep = jax.jit(one_sweep)

    @jax.jit
    def sweeps(spins, key, beta):
        keys = jax.random.split(key, SWEEPS)
        return jax.lax.fori_loop(0, SWEEPS, lambda s, sp: one_sweep(sp, keys[s], beta), spins)

    @jax.jit
    def observables(spins):
        nb = jnp.roll(spins, 1, 0) + jnp.roll(spins, 1, 1)
        return jnp.abs(spins.mean()), -jnp.mean(spins * nb)

    rng = np.random.default_rng(5)
    state = {"s": jnp.asarray(rng.choice([-1.0, 1.0], (LATTICE, LATTICE)).astype(np.float32)),
             "key": jax.random.PRNGKey(11), "log": []}

    def step(i):
        beta = 0.2 + 0.3 * (i % 20) / 19
        state["key"], key = jax.random.split(state["key"])
        if variant == "fix":
            state["s"] = sweeps(state["s"], key, beta)
        else:
            for k in jax.random.split(key, SWEEPS):
                state["s"] = sweep(state["s"], k, beta)
        m, e = observables(state["s"])
        state["log"].append((beta, float(m), float(e)))
        del state["log"][:-100]
        return state["log"][-1]
    return step


# -- a PINN whose residual gradient is taken per collocation point in a Python loop ----------
POINTS = 28


def pinn_init(seed: int = 3, sizes=(1, 32, 32, 1)) -> list:
    rng = np.random.default_rng(seed)
    return [(jnp.asarray(rng.standard_normal((a, b), dtype=np.float32) * np.sqrt(1.0 / a)),
             jnp.zeros(b)) for a, b in zip(sizes, sizes[1:])]


def u_net(params, t):
    """The network's solution u(t) at one scalar time."""
    h = jnp.reshape(t, (1, 1))
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return (h @ w + b)[0, 0]


def point_loss(params, t):
    """Squared residual of the damped oscillator u'' + 0.2 u' + 4 u = 0 at ``t`` plus the
    initial conditions u(0) = 1, u'(0) = 0 (weighted per point)."""
    du = jax.grad(u_net, argnums=1)
    d2u = jax.grad(du, argnums=1)
    res = d2u(params, t) + 0.2 * du(params, t) + 4.0 * u_net(params, t)
    ic = (u_net(params, 0.0) - 1.0) ** 2 + du(params, 0.0) ** 2
    return res ** 2 + ic / POINTS


@case("jax_train_pinn_point_loop", "jax", "training", 3, {**JX, "mode": "training"},
      split="tuned", warmup=2,
      fix=f"jax.vmap of the point gradient over the {POINTS} points, mean and update in "
      "one jitted step", share_from_fix="host_overhead",
      tags=["pinn", "physics_informed", "python_loop", "per_point_grad"])
def jax_train_pinn_point_loop(variant):
    """A physics-informed network (1-32-32-1, tanh) fitting a damped oscillator
    u'' + 0.2 u' + 4 u = 0 with u(0) = 1, u'(0) = 0 on [0, 5], written as a first PINN
    is written: the loss at one collocation point nests ``jax.grad`` for u' and u'', its
    parameter gradient is ``jax.jit(jax.value_and_grad(point_loss))``, and each step loops
    in Python over 28 random points, adding each point's gradient into the running sum
    with ``jax.tree_util.tree_map`` and its loss into a total, then applies the averaged
    gradient by SGD and reads the loss with ``float``.  The fix takes the 28 points'
    gradients with ``jax.vmap`` and averages and applies them inside one jitted step."""
    point_grad = jax.jit(jax.value_and_grad(point_loss))

    @jax.jit
    def train(params, ts):
        losses, grads = jax.vmap(jax.value_and_grad(point_loss), in_axes=(None, 0))(params, ts)
        g = jax.tree_util.tree_map(lambda a: a.mean(0), grads)
        return jax.tree_util.tree_map(lambda p, d: p - 1e-3 * d, params, g), losses.mean()

    rng = np.random.default_rng(9)
    batches = [jnp.asarray(rng.uniform(0, 5, POINTS).astype(np.float32)) for _ in range(8)]
    state = {"p": pinn_init(), "log": []}

    def step(i):
        ts = batches[i % len(batches)]
        if variant == "fix":
            state["p"], loss = train(state["p"], ts)
        else:
            total, acc = 0.0, None
            for t in ts:
                loss_t, g = point_grad(state["p"], t)
                acc = g if acc is None else jax.tree_util.tree_map(jnp.add, acc, g)
                total = total + loss_t
            state["p"] = jax.tree_util.tree_map(lambda p, d: p - 1e-3 * d / POINTS,
                                                state["p"], acc)
            loss = total / POINTS
        state["log"].append(float(loss))
        del state["log"][:-100]
        return state["log"][-1]
    return step
