"""Call trees of CPU threads: top-down (callees) and bottom-up (callers), per call path.

The slices of a thread nest by :func:`.self_time.parents` (one nesting row up, the
enclosing slice on the lane), the rule the self times already use; so Python frames of
``with_stack`` traces and py-spy's sampled stacks (slices on their own lane) join the
tree as they nest on the timeline. A node is a call path: the same name under the
same parent path is one node, with

* ``total``: the summed duration of its slices (for bottom-up: of the function's
  slices reached through that caller path, a recursive call counted once),
* ``self``: the part of those durations not spent in child slices,
* ``count``: its slices, and ``share``: total over the root's total.

A scope picks the slices: the top-level slices (no parent) that *start* inside the
window (as the Statistics table counts them) and every slice nested in them, so the
root's total is the thread's top-level time in the scope.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..trace import LaneKind, Trace
from .self_time import parents, self_times
from .stats import Scope, iteration_scope, range_scope, steady_scope


@dataclass
class CallTree:
    """Nodes in arrays; node 0 is the root (the thread, or the rank's threads)."""

    scope: str
    lane: str
    bottom_up: bool
    names: list[str]
    parent: np.ndarray  # int64 node -> parent node (-1 for the root)
    level: np.ndarray  # int64 distance from the root
    total: np.ndarray  # int64 ns
    self_ns: np.ndarray  # int64 ns
    count: np.ndarray  # int64
    #: per level: (slice ids, their node at that level) -- what :meth:`instances` reads
    members: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list, repr=False)
    _kids: list[list[int]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def width(self) -> np.ndarray:
        """What a frame's width shows: total time top-down, self time bottom-up (the
        callers of a function split its self time)."""
        if self.bottom_up:
            out = self.self_ns.copy()
            out[0] = self.total[0]
            return out
        return self.total

    def share(self, node: int) -> float:
        return float(self.total[node] / self.total[0]) if self.total[0] else 0.0

    def children(self, node: int) -> list[int]:
        """Child nodes, longest first (top-down: by total; bottom-up: by self, the time
        spent in the function itself), ties by name."""
        if self._kids is None:
            weight = self.width
            kids: list[list[int]] = [[] for _ in range(len(self))]
            for n, p in enumerate(self.parent.tolist()):
                if p >= 0:
                    kids[p].append(n)
            for k in kids:
                k.sort(key=lambda n: (-int(weight[n]), self.names[n]))
            self._kids = kids
        return self._kids[node]

    def instances(self, node: int) -> np.ndarray:
        """Slice ids of the node's instances (a thread node: its top-level slices),
        in start order."""
        lvl = int(self.level[node])
        if lvl >= len(self.members):
            return np.zeros(0, np.int64)
        ids, nodes = self.members[lvl]
        return np.unique(ids[nodes == node])

    def node_dict(self, node: int, depth: int | None = None) -> dict:
        d = {"name": self.names[node], "total_us": _us(self.total[node]),
             "self_us": _us(self.self_ns[node]), "count": int(self.count[node]),
             "share": round(self.share(node), 6)}
        if depth is None or depth > 0:
            d["children"] = [self.node_dict(c, None if depth is None else depth - 1)
                             for c in self.children(node)]
        else:
            d["children"] = []
        return d

    def to_dict(self, depth: int | None = None) -> dict:
        """``{"scope", "lane", "bottom_up", "root": {name, total_us, self_us, count,
        share, children: [...]}}``; ``depth`` levels below the root (None: all)."""
        return {"scope": self.scope, "lane": self.lane, "bottom_up": self.bottom_up,
                "root": self.node_dict(0, depth)}


def _us(ns) -> float:
    from .results import us

    return us(int(ns))


def scope_of(iterations, iteration: int | None = None, steady: bool = False,
             window: tuple[int, int] | None = None) -> Scope:
    """The whole trace, a window (ns), one iteration or the steady state."""
    if window is not None:
        return range_scope(*window)
    if iteration is None and not steady:
        return Scope()
    if iterations is None:
        raise IndexError("the trace has no iterations")
    return steady_scope(iterations) if steady else iteration_scope(iterations, iteration)


def cpu_lanes(trace: Trace) -> np.ndarray:
    """CPU lanes that hold slices, in display order."""
    order = trace.lanes.display_order()
    kind = np.asarray(trace.lanes.kind)
    used = np.bincount(trace.slices.lane, minlength=len(trace.lanes)) > 0
    return np.asarray([ln for ln in order.tolist() if kind[ln] == LaneKind.CPU and used[ln]],
                      np.int64)


def main_lane(trace: Trace) -> int:
    """The main thread of the lowest rank (the lane the breakdown reads), -1 if none."""
    from .host_side import main_thread

    cpu = cpu_lanes(trace)
    if not len(cpu):
        return -1
    ranks = np.asarray(trace.lanes.rank)[cpu]
    return main_thread(trace, cpu[ranks == ranks.min()])


def pick_lanes(trace: Trace, text: str | None) -> tuple[np.ndarray, str]:
    """Lanes for ``--lane``: None -> the main thread; ``rank N`` -> every CPU thread of
    rank N; else the CPU lane named ``text`` (exactly, else the one whose name holds it).
    ValueError names the choices when none or several match."""
    cpu = cpu_lanes(trace)
    names = trace.lanes.name
    if text is None:
        main = main_lane(trace)
        if main < 0:
            raise ValueError("the trace has no CPU thread with slices")
        return np.array([main], np.int64), names[main]
    words = text.lower().split()
    if len(words) == 2 and words[0] == "rank" and words[1].lstrip("-").isdigit():
        rank = int(words[1])
        mine = cpu[np.asarray(trace.lanes.rank)[cpu] == rank]
        if not len(mine):
            raise ValueError(f"no CPU thread of rank {rank}")
        return mine, f"all threads of rank {rank}"
    exact = [ln for ln in cpu.tolist() if names[ln] == text]
    hits = exact or [ln for ln in cpu.tolist() if text.lower() in names[ln].lower()]
    if len(hits) == 1:
        return np.array(hits, np.int64), names[hits[0]]
    listed = ", ".join(repr(names[ln]) for ln in (hits or cpu.tolist())[:8])
    why = "matches several" if hits else "matches no"
    raise ValueError(f"--lane {text!r} {why} CPU thread ({listed})")


def build(trace: Trace, lanes, scope: Scope | None = None, bottom_up: bool = False,
          lane_label: str = "") -> CallTree:
    """The call tree of ``lanes`` (CPU lane ids) in ``scope`` (None: whole trace)."""
    scope = scope or Scope()
    lanes = np.asarray(lanes, np.int64)
    s = trace.slices
    par = parents(trace)
    idx = np.flatnonzero(np.isin(s.lane, lanes))
    idx = idx[_in_scope(trace, idx, par, scope)]
    own = self_times(trace, idx, cand=np.flatnonzero(np.isin(s.lane, lanes))) if len(idx) \
        else np.zeros(0, np.int64)
    label = lane_label or (trace.lanes.name[int(lanes[0])] if len(lanes) == 1 else "threads")
    b = _Builder(trace, label, lanes)
    top = idx[par[idx] < 0]
    b.root_members(top, per_lane=len(lanes) > 1 and not bottom_up)
    if bottom_up:
        b.bottom_up(idx, own, par)
    else:
        b.top_down(idx, own, par)
    return b.finish(scope.label, label, bottom_up)


def _in_scope(trace: Trace, idx: np.ndarray, par: np.ndarray, scope: Scope) -> np.ndarray:
    """Mask over ``idx``: slices whose top-level ancestor starts inside the window."""
    if scope.start_ns is None and scope.end_ns is None:
        return np.ones(len(idx), bool)
    s = trace.slices
    root = np.full(len(s), -1, np.int64)
    root[idx] = idx
    depth = s.depth[idx]
    for d in range(1, int(depth.max()) + 1 if len(idx) else 0):
        at = idx[depth == d]
        p = par[at]
        at, p = at[p >= 0], p[p >= 0]
        root[at] = root[p]
    r = root[idx]
    start = s.start[np.maximum(r, 0)]
    lo = -np.inf if scope.start_ns is None else scope.start_ns
    hi = np.inf if scope.end_ns is None else scope.end_ns
    return (r >= 0) & (start >= lo) & (start < hi)


class _Builder:
    """Grows the node arrays one level at a time (every node of a level in one np.unique)."""

    def __init__(self, trace: Trace, label: str, lanes: np.ndarray):
        self.trace = trace
        self.names: list[str] = [label]
        self.parent = [np.array([-1], np.int64)]
        self.level = [np.array([0], np.int64)]
        self.stats = [np.zeros((1, 3), np.int64)]  # total, self, count
        self.members: list[tuple[np.ndarray, np.ndarray]] = []
        self.lanes = lanes
        self.n = 1
        self.base = 1
        self.lane_node = np.zeros(len(trace.lanes), np.int64)  # lane -> its node (root)

    def root_members(self, top: np.ndarray, per_lane: bool) -> None:
        s = self.trace.slices
        self.members.append((top, np.zeros(len(top), np.int64)))
        self.stats[0][0] = [int(s.dur[top].sum()), 0, len(top)]
        self.base = 2 if per_lane else 1  # the level of top-level slices' nodes
        if per_lane:  # one node per thread under the root
            lane_of = s.lane[top]
            keys = [int(x) for x in self.lanes if (lane_of == x).any()]
            nodes = self._add(np.zeros(len(keys), np.int64),
                              [self.trace.lanes.name[k] for k in keys], level=1)
            self.lane_node[keys] = nodes
            node = self.lane_node[lane_of]
            self._accumulate(node, s.dur[top], np.zeros(len(top), np.int64))
            self.members.append((top, node))

    def _add(self, parent_nodes: np.ndarray, names: list[str], level: int) -> np.ndarray:
        k = len(names)
        ids = np.arange(self.n, self.n + k, dtype=np.int64)
        self.names += names
        self.parent.append(np.asarray(parent_nodes, np.int64))
        self.level.append(np.full(k, level, np.int64))
        self.stats.append(np.zeros((k, 3), np.int64))
        self.n += k
        return ids

    def _accumulate(self, node: np.ndarray, total: np.ndarray, own: np.ndarray) -> None:
        st = np.concatenate(self.stats)
        n = len(st)  # float sums are exact below 2**53 ns (104 days)
        st[:, 0] += np.rint(np.bincount(node, weights=total, minlength=n)).astype(np.int64)
        st[:, 1] += np.rint(np.bincount(node, weights=own, minlength=n)).astype(np.int64)
        st[:, 2] += np.bincount(node, minlength=n)
        self.stats = [st]

    def _level_nodes(self, parent_node: np.ndarray, name_ids: np.ndarray,
                     level: int) -> np.ndarray:
        """Node per (parent node, name) pair, new nodes added for this level."""
        names = self.trace.names
        width = max(len(names), 1)
        key = np.asarray(parent_node, np.int64) * width + name_ids.astype(np.int64)
        uniq, inv = np.unique(key, return_inverse=True)  # one int64 key: a radix-free sort
        ids = self._add(uniq // width, [names[int(i)] for i in uniq % width], level)
        return ids[inv.reshape(-1)]

    def top_down(self, idx: np.ndarray, own: np.ndarray, par: np.ndarray) -> None:
        s = self.trace.slices
        node_of = np.full(len(s), -1, np.int64) if len(idx) else np.zeros(0, np.int64)
        base = self.base
        depth = s.depth[idx].astype(np.int64)
        for d in range(int(depth.max()) + 1 if len(idx) else 0):
            m = depth == d
            at, p = idx[m], par[idx[m]]
            up = np.where(p >= 0, node_of[np.maximum(p, 0)], -1)
            up = np.where(up >= 0, up, self.lane_node[s.lane[at]])
            node = self._level_nodes(up, s.name[at], base + d)
            node_of[at] = node
            self._accumulate(node, s.dur[at], own[m])
            self._member(base + d, at, node)

    def bottom_up(self, idx: np.ndarray, own: np.ndarray, par: np.ndarray) -> None:
        s = self.trace.slices
        name = s.name.astype(np.int64)
        recursive = np.zeros(len(idx), bool)  # a caller has the same name: total counted once
        walk, alive = idx.copy(), np.ones(len(idx), bool)
        while alive.any():
            walk = np.where(alive, par[np.maximum(walk, 0)], -1)
            alive = walk >= 0
            recursive[alive] |= name[walk[alive]] == name[idx[alive]]
        pos, anc, prev = np.arange(len(idx)), idx.copy(), np.zeros(len(idx), np.int64)
        level = 1
        while len(pos):
            node = self._level_nodes(prev, name[anc], level)
            ids = idx[pos]
            self._accumulate(node, np.where(recursive[pos], 0, s.dur[ids]), own[pos])
            self._member(level, ids, node)
            up = par[anc]
            more = up >= 0
            pos, anc, prev = pos[more], up[more], node[more]
            level += 1

    def _member(self, level: int, ids: np.ndarray, node: np.ndarray) -> None:
        while len(self.members) <= level:
            self.members.append((np.zeros(0, np.int64), np.zeros(0, np.int64)))
        old_ids, old_nodes = self.members[level]
        self.members[level] = (np.concatenate([old_ids, ids]), np.concatenate([old_nodes, node]))

    def finish(self, scope: str, lane: str, bottom_up: bool) -> CallTree:
        st = np.concatenate(self.stats)
        return CallTree(scope, lane, bottom_up, self.names, np.concatenate(self.parent),
                        np.concatenate(self.level), st[:, 0], st[:, 1], st[:, 2],
                        self.members)



#: Nodes the text lists at most (the JSON has them all); the rest are counted.
TEXT_NODES = 400


def tree_text(tree: CallTree, depth: int | None = None) -> list[str]:
    """Indented lines: total, self, count, share, then the name (children longest first)."""
    from ..units import fmt_ns

    how = "bottom-up: callers of each function" if tree.bottom_up else "top-down"
    lines = [f"Call tree ({how}), {tree.scope}, {tree.lane}: {fmt_ns(int(tree.total[0]))} "
             f"top-level time in {int(tree.count[0]):,} slices",
             f"{'Total':>10}  {'Self':>10}  {'Count':>8}  {'Share':>6}  Name"]
    stack, shown = [(0, 0)], 0
    while stack and shown < TEXT_NODES:
        node, lvl = stack.pop()
        lines.append(f"{fmt_ns(int(tree.total[node])):>10}  {fmt_ns(int(tree.self_ns[node])):>10}"
                     f"  {int(tree.count[node]):>8,}  {100 * tree.share(node):>5.1f}%  "
                     f"{'  ' * lvl}{tree.names[node]}")
        shown += 1
        if depth is None or lvl < depth:
            stack.extend((c, lvl + 1) for c in reversed(tree.children(node)))
    if stack:
        lines.append(f"... {len(tree) - shown:,} more nodes (use --depth or --json)")
    return lines


def icicle(tree: CallTree, max_level: int | None = None) -> tuple[np.ndarray, ...]:
    """Frames of the icicle graph: (node, x, width, level) arrays, width in ns
    (:attr:`CallTree.width`), each node's children packed from its left edge,
    longest first."""
    x = np.zeros(len(tree), np.int64)
    width = tree.width
    out_nodes: list[int] = []
    stack = [0]
    while stack:
        node = stack.pop()
        out_nodes.append(node)
        if max_level is not None and tree.level[node] >= max_level:
            continue
        left = int(x[node])
        for c in tree.children(node):
            x[c] = left
            left += int(width[c])
            stack.append(c)
    nodes = np.asarray(out_nodes, np.int64)
    return nodes, x[nodes], width[nodes], tree.level[nodes]
