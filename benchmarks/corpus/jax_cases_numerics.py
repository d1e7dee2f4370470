"""Held-out JAX cases of numerical programs, written without looking at the advisor's rules
(captured and measured by ``run_jax.py``): Hamiltonian Monte Carlo on a Bayesian logistic
regression whose leapfrog steps are a Python loop of jitted gradient calls, and a Gaussian-process
regression whose kernel hyperparameters are fitted by gradient descent on the marginal
likelihood through ``jnp.linalg.cholesky``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from corpus.common import case

JX = {"framework": "jax", "device": "cpu", "compiled": "jax.jit"}


# -- HMC: leapfrog steps in a Python loop ------------------------------------------------------
HMC_ROWS, HMC_FEATURES, LEAPFROG, EPS = 512, 16, 30, 0.01


def logistic_data(seed: int = 21):
    """512 rows of 16 standardised features and 0/1 labels from a noisy linear rule."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((HMC_ROWS, HMC_FEATURES), dtype=np.float32)
    w = rng.standard_normal(HMC_FEATURES).astype(np.float32)
    y = (x @ w + rng.standard_normal(HMC_ROWS) > 0).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


@case("jax_train_hmc_leapfrog_loop", "jax", "training", 3, {**JX, "mode": "training"},
      split="tuned", warmup=3,
      fix="the whole transition in one jitted function, the leapfrog steps in "
      "jax.lax.fori_loop", share_from_fix="host_overhead",
      tags=["hmc", "mcmc", "python_loop", "leapfrog"])
def jax_train_hmc_leapfrog_loop(variant):
    """Hamiltonian Monte Carlo sampling the posterior of a Bayesian logistic regression
    (16 weights, a standard normal prior, 512 rows held on the device), written as an
    MCMC-from-scratch tutorial writes it: the gradient of the log density is
    ``jax.jit(jax.grad(log_density))``, and each sample draws a momentum and runs 30
    leapfrog steps of size 0.01 in a Python ``for`` loop (a half-step of the momentum,
    a step of the position, another half-step: two jitted gradient calls and three
    ``jnp`` updates each), then computes both Hamiltonians with a jitted function and
    accepts in Python with ``float`` of the log acceptance ratio.  The fix jits the whole
    transition with the leapfrog steps in ``jax.lax.fori_loop`` and the accept decided
    by ``jnp.where``, reading only the accept flag."""
    x, y = logistic_data()

    def log_density(q):
        z = x @ q
        return jnp.sum(y * z - jnp.logaddexp(0.0, z)) - 0.5 * jnp.sum(q * q)

    def hamiltonian(q, p):
        return -log_density(q) + 0.5 * jnp.sum(p * p)

    grad_ld = jax.jit(jax.grad(log_density))
    energy = jax.jit(hamiltonian)

    def leapfrog(q, p, grad):
        p = p + 0.5 * EPS * grad(q)
        q = q + EPS * p
        return q, p + 0.5 * EPS * grad(q)

    @jax.jit
    def transition(q, key):
        k_mom, k_acc = jax.random.split(key)
        p0 = jax.random.normal(k_mom, q.shape)
        q1, p1 = jax.lax.fori_loop(0, LEAPFROG,
                                   lambda _, s: leapfrog(*s, jax.grad(log_density)), (q, p0))
        log_ratio = hamiltonian(q, p0) - hamiltonian(q1, p1)
        accept = jnp.log(jax.random.uniform(k_acc)) < log_ratio
        return jnp.where(accept, q1, q), accept

    state = {"q": jnp.zeros(HMC_FEATURES), "key": jax.random.PRNGKey(3), "accepted": []}

    def step(i):
        state["key"], key = jax.random.split(state["key"])
        if variant == "fix":
            state["q"], accept = transition(state["q"], key)
            state["accepted"].append(bool(accept))
        else:
            k_mom, k_acc = jax.random.split(key)
            q = state["q"]
            p0 = jax.random.normal(k_mom, q.shape)
            q1, p1 = q, p0
            for _ in range(LEAPFROG):
                q1, p1 = leapfrog(q1, p1, grad_ld)
            log_ratio = float(energy(q, p0) - energy(q1, p1))
            accept = float(jnp.log(jax.random.uniform(k_acc))) < log_ratio
            if accept:
                state["q"] = q1
            state["accepted"].append(accept)
        del state["accepted"][:-1000]
        return state["accepted"][-1]
    return step


# -- Gaussian process: marginal likelihood through a Cholesky factor ----------------------------
GP_POINTS, GP_DIMS = 640, 3


def gp_data(seed: int = 22):
    """640 noisy samples of a smooth function of 3 inputs."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (GP_POINTS, GP_DIMS)).astype(np.float32)
    f = np.sin(2 * x[:, 0]) + 0.5 * np.cos(3 * x[:, 1]) * x[:, 2]
    y = (f + 0.1 * rng.standard_normal(GP_POINTS)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


@case("jax_train_gp_cholesky", "jax", "training", 5, {**JX, "mode": "training"},
      split="holdout", warmup=3, tags=["gaussian_process", "cholesky", "linalg"])
def jax_train_gp_cholesky(variant):
    """Gaussian-process regression on 640 points of 3 inputs, its hyperparameters (log
    length-scales per input, log signal variance, log noise) fitted as a GP tutorial
    writes it in plain JAX: the jitted step builds the squared-exponential kernel matrix,
    factors it with ``jnp.linalg.cholesky``, solves with ``jax.scipy.linalg.cho_solve``
    for the negative log marginal likelihood, takes its gradient with
    ``jax.value_and_grad`` and moves the hyperparameters by hand-written Adam; the loss
    is read with ``float`` for the log every step: compute-bound, no fix claimed."""
    x, y = gp_data()

    def nll(theta):
        ls, var, noise = jnp.exp(theta[:GP_DIMS]), jnp.exp(theta[GP_DIMS]), \
            jnp.exp(theta[GP_DIMS + 1])
        z = x / ls
        sq = jnp.sum(z * z, 1)
        d2 = jnp.maximum(sq[:, None] + sq[None, :] - 2 * z @ z.T, 0.0)
        k = var * jnp.exp(-0.5 * d2) + (noise + 1e-4) * jnp.eye(GP_POINTS)
        chol = jnp.linalg.cholesky(k)
        alpha = jax.scipy.linalg.cho_solve((chol, True), y)
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(chol))) \
            + 0.5 * GP_POINTS * jnp.log(2 * jnp.pi)

    @jax.jit
    def adam_step(theta, m, v, t):
        loss, g = jax.value_and_grad(nll)(theta)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mhat, vhat = m / (1 - 0.9 ** t), v / (1 - 0.999 ** t)
        return theta - 0.02 * mhat / (jnp.sqrt(vhat) + 1e-8), m, v, loss

    zeros = jnp.zeros(GP_DIMS + 2)
    state = {"theta": zeros, "m": zeros, "v": zeros, "log": []}

    def step(i):
        state["theta"], state["m"], state["v"], loss = adam_step(
            state["theta"], state["m"], state["v"], float(i + 1))
        state["log"].append(float(loss))
        del state["log"][:-100]
        return state["log"][-1]
    return step
