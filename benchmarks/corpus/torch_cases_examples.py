"""PyTorch cases shaped like the programs of the pytorch/examples repository, written
without looking at the advisor's rules and held out but for REINFORCE, whose chained calls'
estimate was made on it: REINFORCE on a pendulum simulated in
Python one action at a time (``reinforcement_learning/reinforce.py``), the word-level
LSTM language model trained with truncated back-propagation through time and
``repackage_hidden`` (``word_language_model``), and a two-layer graph convolutional
network trained full-batch on a Cora-sized citation graph with a sparse adjacency
(``gcn``).
"""

from __future__ import annotations

from collections import deque

import numpy as np
import torch
from torch.distributions import Categorical

from corpus.common import CLOCK, case
from corpus.torch_cases import Loop, facts

nn = torch.nn
F = torch.nn.functional


# -- REINFORCE: one pendulum, one policy call per action ---------------------------------------
TORQUES = (-2.0, 0.0, 2.0)
HORIZON = 64  # the environment's time limit: every episode is this many actions
GAMMA = 0.99
EPS = np.finfo(np.float32).eps.item()
LOCKSTEP = 8


def angle_normalize(x):
    return ((x + np.pi) % (2 * np.pi)) - np.pi


class Pendulum:
    """Gym's ``Pendulum-v1`` dynamics in Python and numpy, its torque one of 3 discrete
    values (as users discretise it for a categorical policy), with a time limit of
    :data:`HORIZON` steps."""

    max_speed, dt, g, m, length = 8.0, 0.05, 10.0, 1.0, 1.0

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.state, self.t = np.zeros(2), 0

    def reset(self):
        self.state = self.rng.uniform(low=[-np.pi, -1.0], high=[np.pi, 1.0])
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        th, thdot = self.state
        return np.array([np.cos(th), np.sin(th), thdot], dtype=np.float32)

    def step(self, action: int):
        th, thdot = self.state
        u = np.clip(TORQUES[action], -2.0, 2.0)
        costs = angle_normalize(th) ** 2 + 0.1 * thdot ** 2 + 0.001 * (u ** 2)
        newthdot = thdot + (3 * self.g / (2 * self.length) * np.sin(th)
                            + 3.0 / (self.m * self.length ** 2) * u) * self.dt
        newthdot = np.clip(newthdot, -self.max_speed, self.max_speed)
        self.state = np.array([th + newthdot * self.dt, newthdot])
        self.t += 1
        return self._obs(), -float(costs), False, self.t >= HORIZON, {}


class Policy(nn.Module):
    """The example's policy: 3 observations, 128 hidden with dropout, 3 action
    probabilities; it keeps the episode's log-probabilities and rewards."""

    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(3, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, len(TORQUES))
        self.saved_log_probs, self.rewards = [], []

    def forward(self, x):
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=1)


def discounted(rewards) -> deque:
    """The example's returns: ``R = r + gamma * R`` from the last reward back."""
    R, returns = 0, deque()
    for r in rewards[::-1]:
        R = r + GAMMA * R
        returns.appendleft(R)
    return returns


@case("pt_train_reinforce_pendulum", "pytorch", "training", 3,
      facts("training", optimizer="adam", batch=1), split="tuned", warmup=3,
      fix=f"{LOCKSTEP} pendulums stepped in lockstep, one policy call per time step",
      share_from_fix="host_overhead", fix_per_item=LOCKSTEP,
      tags=["reinforcement_learning", "environment", "batch1", "python_loop", "example"])
def pt_train_reinforce_pendulum(variant):
    """pytorch/examples' ``reinforce.py`` on a pendulum simulated in Python (gym's
    ``Pendulum-v1`` equations, 3 discrete torques, 64-step episodes): per action the
    observation becomes a 1x3 tensor, the policy (3-128-3, dropout) gives the
    probabilities, a ``Categorical`` samples the action, its log-probability is kept and
    ``action.item()`` goes to ``env.step``; at the episode's end ``finish_episode``
    discounts the rewards in Python, normalises them, sums ``-log_prob * R`` with
    ``torch.cat`` and takes one Adam step (lr 1e-2).  A step is one episode; the
    environment's steps and resets are what the step waits for (``input``).  The fix
    steps 8 pendulums in lockstep, as a vector environment does, with one policy call on
    the 8 observations per time step and one update per 8 episodes."""
    torch.manual_seed(0)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    envs = [Pendulum(100 + k) for k in range(LOCKSTEP if variant == "fix" else 1)]
    reward_log = {"running": -5.0}

    def select_action(state):
        state = torch.from_numpy(state).float().unsqueeze(0)
        probs = policy(state)
        m = Categorical(probs)
        action = m.sample()
        policy.saved_log_probs.append(m.log_prob(action))
        with CLOCK("sync"):
            return action.item()

    def finish_episode():
        returns = torch.tensor(discounted(policy.rewards))
        returns = (returns - returns.mean()) / (returns.std() + EPS)
        policy_loss = [-log_prob * R for log_prob, R in zip(policy.saved_log_probs, returns)]
        optimizer.zero_grad()
        loss = torch.cat(policy_loss).sum()
        loss.backward()
        optimizer.step()
        del policy.rewards[:]
        del policy.saved_log_probs[:]

    def episode(i):
        env = envs[0]
        with CLOCK("input"):
            state, _ = env.reset()
        ep_reward = 0.0
        for _t in range(1, 10000):
            action = select_action(state)
            with CLOCK("input"):
                state, reward, done, truncated, _ = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
            if done or truncated:
                break
        reward_log["running"] = 0.05 * ep_reward + 0.95 * reward_log["running"]
        finish_episode()
        return reward_log["running"]

    def lockstep(i):
        with CLOCK("input"):
            states = np.stack([env.reset()[0] for env in envs])
        log_probs, rewards = [], []
        for _t in range(HORIZON):
            probs = policy(torch.from_numpy(states))
            m = Categorical(probs)
            actions = m.sample()
            log_probs.append(m.log_prob(actions))
            with CLOCK("sync"):
                picked = actions.tolist()
            with CLOCK("input"):
                steps = [env.step(a) for env, a in zip(envs, picked)]
                states = np.stack([s[0] for s in steps])
            rewards.append(np.array([s[1] for s in steps]))
        returns = torch.tensor(np.array(discounted(rewards)), dtype=torch.float32)
        returns = (returns - returns.mean(0)) / (returns.std(0) + EPS)
        optimizer.zero_grad()
        loss = -(torch.stack(log_probs) * returns).sum()
        loss.backward()
        optimizer.step()
        return float(returns.sum())
    return Loop(lockstep if variant == "fix" else episode)


# -- the word language model: truncated BPTT over a batchified token stream -------------------
NTOKENS, EMSIZE, NHID, NLAYERS, BPTT, BATCH_LM = 2000, 128, 128, 2, 35, 16


class RNNModel(nn.Module):
    """The example's ``RNNModel``: embedding, a 2-layer ``nn.LSTM`` with dropout, a linear
    decoder to the vocabulary and a log-softmax."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.ntoken, self.nhid, self.nlayers = ntoken, nhid, nlayers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def token_stream(n: int = 120_000, seed: int = 9) -> torch.Tensor:
    """A tokenised corpus as ``data.Corpus`` makes it: word ids with a Zipf-like
    frequency over a 2,000-word vocabulary."""
    rng = np.random.default_rng(seed)
    ids = np.minimum(rng.zipf(1.2, n) - 1, NTOKENS - 1)
    return torch.from_numpy(ids.astype(np.int64))


def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source: torch.Tensor, i: int):
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


@case("pt_train_word_lm_bptt", "pytorch", "training", 4, facts("training"),
      split="holdout", warmup=3,
      fix="torch.optim.SGD(foreach=True) in place of the per-parameter add_ loop",
      share_from_fix="host_overhead",
      tags=["lstm", "language_model", "bptt", "manual_sgd", "example"])
def pt_train_word_lm_bptt(variant):
    """pytorch/examples' ``word_language_model`` training: a 2-layer LSTM language model
    (2,000 words, 128-wide embedding and hidden state, dropout 0.2) over a token stream
    ``batchify``-ed into 16 columns, ``get_batch`` windows of 35 tokens, the hidden state
    carried between windows through ``repackage_hidden``, ``NLLLoss`` on the log-softmax,
    ``clip_grad_norm_(0.25)``, the example's hand-written SGD update (``p.data.add_(p.grad,
    alpha=-lr)`` over the parameters) and ``total_loss += loss.item()`` every batch, the
    average printed every 200 batches.  The fix measured beside it is
    ``torch.optim.SGD(foreach=True)`` in place of the update's loop."""
    torch.manual_seed(0)
    train_data = batchify(token_stream(), BATCH_LM)
    model = RNNModel(NTOKENS, EMSIZE, NHID, NLAYERS)
    criterion, lr = nn.NLLLoss(), 20.0
    opt = torch.optim.SGD(model.parameters(), lr=lr, foreach=True) if variant == "fix" \
        else None
    model.train()
    state = {"hidden": model.init_hidden(BATCH_LM), "total_loss": 0.0}
    starts = range(0, train_data.size(0) - 1 - BPTT, BPTT)

    def step(batch):
        i = starts[batch % len(starts)]
        with CLOCK("input"):
            data, targets = get_batch(train_data, i)
        model.zero_grad()
        state["hidden"] = repackage_hidden(state["hidden"])
        output, state["hidden"] = model(data, state["hidden"])
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        if opt is not None:
            opt.step()
        else:
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
        with CLOCK("sync"):
            state["total_loss"] += loss.item()
        if batch % 200 == 0 and batch > 0:
            state["line"] = f"| {batch:5d} batches | loss {state['total_loss'] / 200:5.2f}"
            state["total_loss"] = 0.0
        return state["total_loss"]
    return Loop(step)


# -- GCN: full-batch training on a citation graph with a sparse adjacency -----------------------
N_NODES, N_FEATURES, N_CLASSES, HIDDEN = 2708, 1433, 7, 16


class GraphConv(nn.Module):
    """The example's graph convolution: ``support = x @ kernel``, then the normalised
    sparse adjacency times it with ``torch.spmm``, plus a bias."""

    def __init__(self, input_dim, output_dim):
        super().__init__()
        self.kernel = nn.Parameter(torch.empty(input_dim, output_dim))
        self.bias = nn.Parameter(torch.zeros(output_dim))
        nn.init.xavier_normal_(self.kernel)

    def forward(self, x, adj):
        return torch.spmm(adj, torch.mm(x, self.kernel)) + self.bias


class GCN(nn.Module):
    def __init__(self, dropout_p=0.5):
        super().__init__()
        self.gc1 = GraphConv(N_FEATURES, HIDDEN)
        self.gc2 = GraphConv(HIDDEN, N_CLASSES)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x, adj):
        x = self.dropout(F.relu(self.gc1(x, adj)))
        return F.log_softmax(self.gc2(x, adj), dim=1)


def citation_graph(seed: int = 4):
    """A Cora-sized graph as the example loads it: binary bag-of-words features (about 18
    words a paper) normalised by row, about 5,400 undirected citations, self-loops added
    and the adjacency normalised ``D^-1/2 (A + I) D^-1/2`` into a sparse COO tensor,
    labels and train / validation masks."""
    rng = np.random.default_rng(seed)
    feats = (rng.random((N_NODES, N_FEATURES)) < 18 / N_FEATURES).astype(np.float32)
    feats /= np.maximum(feats.sum(1, keepdims=True), 1.0)
    src = rng.integers(0, N_NODES, 5429)
    dst = rng.integers(0, N_NODES, 5429)
    rows = np.concatenate([src, dst, np.arange(N_NODES)])
    cols = np.concatenate([dst, src, np.arange(N_NODES)])
    key = np.unique(rows * N_NODES + cols)
    rows, cols = key // N_NODES, key % N_NODES
    deg = np.bincount(rows, minlength=N_NODES).astype(np.float32)
    vals = 1.0 / np.sqrt(deg[rows] * deg[cols])
    adj = torch.sparse_coo_tensor(np.stack([rows, cols]), vals.astype(np.float32),
                                  (N_NODES, N_NODES)).coalesce()
    labels = torch.from_numpy(rng.integers(0, N_CLASSES, N_NODES))
    order = rng.permutation(N_NODES)
    mask_train = torch.zeros(N_NODES, dtype=torch.bool)
    mask_val = torch.zeros(N_NODES, dtype=torch.bool)
    mask_train[order[:140]] = True
    mask_val[order[140:640]] = True
    return torch.from_numpy(feats), adj, labels, mask_train, mask_val


@case("pt_train_gcn_cora", "pytorch", "training", 6, facts("training", optimizer="adam"),
      split="holdout", warmup=3, tags=["gnn", "sparse", "full_batch", "example"])
def pt_train_gcn_cora(variant):
    """pytorch/examples' ``gcn`` training: a two-layer graph convolutional network
    (1,433 features, 16 hidden, 7 classes, dropout 0.5) trained full-batch on a
    Cora-sized graph (2,708 papers, dense row-normalised features, a sparse normalised
    adjacency multiplied with ``torch.spmm``) with Adam (lr 0.01, weight decay 5e-4) and
    ``NLLLoss`` on the 140 training nodes; each epoch (one step) then evaluates the whole
    graph under ``torch.no_grad()`` twice, for the training and the validation nodes, and
    reads each loss and accuracy with ``.item()``."""
    torch.manual_seed(0)
    features, adj, labels, mask_train, mask_val = citation_graph()
    model = GCN()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    criterion = nn.NLLLoss()

    def test(mask):
        model.eval()
        with torch.no_grad():
            output = model(features, adj)
            output, target = output[mask], labels[mask]
            loss = criterion(output, target)
            acc = (output.argmax(dim=1) == target).float().sum() / len(target)
        with CLOCK("sync"):
            return loss.item(), acc.item()

    def step(epoch):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss = criterion(output[mask_train], labels[mask_train])
        loss.backward()
        optimizer.step()
        loss_train, acc_train = test(mask_train)
        loss_val, acc_val = test(mask_val)
        return loss_train, acc_train, loss_val, acc_val
    return Loop(step)
