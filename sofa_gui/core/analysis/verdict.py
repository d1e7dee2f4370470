"""The verdict: what limits the run, in one word, with the share of time it holds.

Findings are ranked by expected gain x confidence, which answers "what is worth doing
first"; the verdict answers "what limits my run": the largest of these shares of the
profiled iterations (warm-up included):

==============  ==============================================  ===========================
bound           device run (breakdown categories)               host-only run
==============  ==============================================  ===========================
compute         compute, memset, memcpy_d2d                     forward, backward, optimizer,
                                                                other (the main thread's
                                                                untraced own work)
input           idle_input                                      data_loading
communication   communication (exposed)                         communication
host_overhead   idle_launch, idle_host                          runtime, python, the
                                                                tiny-op share of compute
                                                                (``op_overhead_bound``) and
                                                                a small compiled step's
                                                                fixed cost per call
                                                                (``call_overhead_bound``)
sync            idle_sync                                       sync, and the loops of element
                                                                reads (``host_reads_in_loop``)
memory_copies   memcpy_h2d / d2h / p2p / other, idle_copy       memcpy, and large copy ops
                                                                (``memory_copy_bound``)
startup         what warm-up iterations take over the steady median (not counting more
                waiting for input, collectives or syncs: a first epoch that fills a
                cache is input), plus one-off calls later on, plus compiles that recur in
                the steady steps (``recompile``: start-up work repeated)
==============  ==============================================  ===========================

Device idle no category explains (``idle_other``) is no bound; the basis says how much
of it there is.  One exception to "the largest share": when the input finding proves that
the loader paces the run (batches made beside the step, the main thread waiting for one
in every steady step: ``findings/input_pacing.py``), the bound is input, and the basis
says why, whatever the compute's share.  With several ranks the breakdown of the rank
that waits most in collectives is read: in synchronous data parallelism its step is the
job's step (its own work, then the wait for the slowest rank).  A host's communication
is its main thread in or waiting for a collective, and DDP's copies of the gradients into
and out of the buckets the all-reduce sends (``host_side.py``): the loop without DDP
saves both.  When that rank makes the same op calls as another rank but takes longer
over them (ranks of a host-only run share its cores), the difference is communication
too: the slowest rank sets its step, so at its peer's pace it would have waited longer.
The part of its collective wait that the rank arriving last spent waiting for its own
batch (beyond the read rank's own wait for one) is input seen through the collective
(``balance.peer_input``): a faster loader shortens it, a faster collective does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..units import fmt_pct as pct
from .balance import peer_input
from .codec import register
from .host_side import OP_CATEGORIES

BOUNDS = ("compute", "input", "communication", "host_overhead", "sync", "memory_copies",
          "startup")
LABELS = {"compute": "Compute", "input": "Input", "communication": "Communication",
          "host_overhead": "Host overhead", "sync": "Sync", "memory_copies": "Memory copies",
          "startup": "Start-up"}
DEVICE_MAP = {"compute": "compute", "memset": "compute", "memcpy_d2d": "compute",
              "idle_input": "input", "communication": "communication",
              "idle_launch": "host_overhead", "idle_host": "host_overhead",
              "idle_sync": "sync", "memcpy_h2d": "memory_copies",
              "memcpy_d2h": "memory_copies", "memcpy_p2p": "memory_copies",
              "memcpy_other": "memory_copies", "idle_copy": "memory_copies"}
HOST_MAP = {"forward": "compute", "backward": "compute", "optimizer": "compute",
            "other": "compute",
            "data_loading": "input", "communication": "communication",
            "runtime": "host_overhead", "python": "host_overhead", "sync": "sync",
            "memcpy": "memory_copies"}
#: Waiting for these is not one-off work even in the first iterations.
WAITS = ("input", "communication", "sync")
#: What moved a rank's op time above its fastest peer's into communication (not a finding).
SLOWER = "slower_than_peers"
#: What moved a rank's collective wait for a peer that waited for its batch into input.
PEER_INPUT = "peer_input_wait"
#: A finding smaller than this that ranks above the bound it is smaller than says so.
SMALL = 0.10


@dataclass
class Verdict:
    """``bound`` (one of :data:`BOUNDS`, "" when nothing is measured), its ``share`` of
    the profiled iterations and the ``basis`` it rests on, in words."""

    bound: str
    share: float
    basis: str
    shares: dict[str, float]
    #: time read into another bound than its breakdown category's: (what moved it: a
    #: finding id, or ``SLOWER`` for a rank's ops above its peer's, the bound it went to,
    #: its share of the profiled iterations, the bounds it was taken from)
    moved: list[tuple[str, str, float, tuple[str, ...]]] = field(default_factory=list)
    #: the breakdown read: its label and kind ("device" or "host")
    side: tuple[str, str] = ("", "")

    @property
    def label(self) -> str:
        return LABELS.get(self.bound, "Unknown")

    @property
    def headline(self) -> str:
        """"Compute-bound: 72% of the profiled time"."""
        if not self.bound:
            return "Bound unknown: " + self.basis
        return f"{self.label}-bound: {pct(self.share)} of the profiled time"

    def to_dict(self) -> dict:
        return {"bound": self.bound, "label": self.label, "share": round(self.share, 4),
                "basis": self.basis,
                "shares": {k: round(v, 4) for k, v in self.shares.items()},
                "moved": [{"by": by, "to": to, "share": round(sh, 4), "from": list(src)}
                          for by, to, sh, src in self.moved]}


def compute_verdict(breakdown, findings, warmup: np.ndarray | None = None) -> Verdict:
    """The verdict of one analysis: ``breakdown`` (a :class:`.breakdown.TraceBreakdown`),
    its ``findings`` and the warm-up rows (``None``: none)."""
    if breakdown is None or not len(breakdown.durations):
        return Verdict("", 0.0, "no iterations or breakdown to measure", {})
    side, label, rank = _side(breakdown)
    if side is None:
        return Verdict("", 0.0, "no breakdown of the main thread or a device", {})
    mapping = DEVICE_MAP if side.categories[0] == "compute" else HOST_MAP
    times = side.times.astype(np.float64)
    total = float(times.sum()) or 1.0
    ns = dict.fromkeys(BOUNDS, 0.0)
    warm = np.asarray(warmup if warmup is not None else [], np.int64)
    steady = np.setdiff1d(np.arange(len(times)), warm)
    base = np.median(times[steady], axis=0) if len(steady) else np.zeros(times.shape[1])
    for k, cat in enumerate(side.categories):
        bound = mapping.get(cat)
        col = times[:, k]
        extra = float(np.maximum(col[warm] - base[k], 0.0).sum()) if len(warm) else 0.0
        if bound is None or bound not in WAITS:
            ns["startup"] += extra  # warm-up work over a steady step: one-off
            col_ns = float(col.sum()) - extra
        else:
            col_ns = float(col.sum())
        if bound is not None:
            ns[bound] += col_ns
    like_steady = float(times[steady].sum()) + float(np.minimum(times[warm], base).sum())
    moved = _move_measured(ns, findings, like_steady, mapping is HOST_MAP)
    slower = min(_slower_than_peers(breakdown, side, rank), ns["compute"])
    ns["compute"] -= slower  # the same ops at a peer's pace: the wait would hold it
    ns["communication"] += slower
    through = 0.0
    if mapping is HOST_MAP:
        through = min(float(peer_input(breakdown, side)[0].sum()), ns["communication"])
    ns["communication"] -= through  # the last rank's wait for its batch, seen through
    ns["input"] += through
    later = min(_later_one_off(findings, ns["startup"]), ns["compute"])
    ns["startup"] += later  # one-off calls in steady steps ran as part of them
    ns["compute"] -= later
    moved += [(by, to, t, ("compute",)) for by, to, t in
              ((SLOWER, "communication", slower), ("startup_cost", "startup", later)) if t > 0]
    moved += [(PEER_INPUT, "input", through, ("communication",))] if through > 0 else []
    moved = [(by, to, t / total, src) for by, to, t, src in moved]
    shares = {k: v / total for k, v in ns.items()}
    bound = max(BOUNDS, key=lambda b: (shares[b], -BOUNDS.index(b)))
    if shares[bound] <= 0:
        return Verdict("", 0.0, "no time in any category", shares, moved)
    paced = next((f.paced for f in findings or [] if getattr(f, "paced", "")), "")
    if paced and shares["input"] > 0:  # the loader sets the step time (input_pacing.py)
        bound = "input"
    basis = (_basis(bound, shares, label, rank) + (" " + paced if paced else "")
             + _slower_words(slower, total, side, rank) + _peer_input_words(through, total, side))
    return Verdict(bound, min(shares[bound], 1.0), basis, shares, moved,
                   (label, "host" if mapping is HOST_MAP else "device"))


def _side(bd):
    """(the breakdown to read, its label, the slowest rank when several): with several
    ranks, the rank that waits most in collectives (its step is the job's step: its own
    work plus the wait for the slowest); its busiest device, else its main thread."""
    sides = bd.devices or bd.hosts
    slow = None
    if bd.ranks is not None and len(bd.ranks.straggler) and len(sides) > 1:
        ranks, counts = np.unique(bd.ranks.straggler, return_counts=True)
        slow = int(ranks[np.argmax(counts)])
        side = max(sides, key=lambda x: float(x.column("communication").sum())
                   / max(float(x.times.sum()), 1.0))
        return side, side.label, slow
    side = bd.device if bd.devices else bd.host
    return side, (side.label if side is not None else ""), slow


def _slower_than_peers(bd, side, slow) -> float:
    """ns of the read rank's op time above what the same op calls take on the rank that
    runs them fastest (0 when no other rank makes the same calls in every iteration, on a
    device run, or when the read rank is the slowest itself).  Ranks on one host's CPU
    share its cores: the same step runs slower on one rank while the others' work holds
    them.  The read rank waits for the slowest rank, whose pace sets the step: had its
    ops run at its peer's pace it would have waited that much longer, so the difference
    is time the wait holds, not work the step needs."""
    if slow is None or bd.devices or getattr(side, "rank", slow) == slow \
            or not len(getattr(side, "calls", ())):
        return 0.0
    peers = [h for h in bd.hosts if h is not side and np.array_equal(h.calls, side.calls)]
    if not peers or not side.calls.sum():
        return 0.0
    return max(_op_ns(side) - min(_op_ns(h) for h in peers), 0.0)


def _op_ns(host) -> float:
    return float(sum(host.column(c).sum() for c in OP_CATEGORIES))


def _slower_words(slower: float, total: float, side, slow) -> str:
    """The sentence saying what :func:`_slower_than_peers` counted ("" when nothing)."""
    if slower < 0.01 * total:
        return ""
    return (f" Rank {side.rank}'s ops took {pct(slower / total)} of the time more than the "
            f"same calls on the fastest rank; its step is set by the slowest, rank {slow}, "
            f"so at that pace it would have waited as much longer: that time is counted as "
            f"communication.")


def _peer_input_words(through: float, total: float, side) -> str:
    """The sentence saying what :func:`.balance.peer_input` counted ("" when nothing)."""
    if through < 0.01 * total:
        return ""
    return (f" Rank {side.rank}'s collectives waited {pct(through / total)} of the time for "
            f"a rank that was still waiting for its own batch: that time is counted as "
            f"input, seen through the collective.")


#: Findings that measure, on a host-only run, time the breakdown's categories give to
#: compute or host overhead, and the bound that time belongs to: per-op overhead (tiny ops
#: and the Python between them), loops of element reads (the indexing and Python around
#: each read), memory-bound copies, the batch made op by op between a compiled
#: step's calls (input), and a small compiled step's fixed cost per call (its dispatch and
#: its result's hand-back, inside framework calls the breakdown counts as compute);
#: anomaly mode's checks and stack capture (in the forward ops' own time); and a host
#: callback's own work (a SciPy filter the compiled step waits for, inside its call).
MOVED_BY = {"op_overhead_bound": ("host_overhead", ("compute",)),
            "host_reads_in_loop": ("sync", ("host_overhead", "compute")),
            "memory_copy_bound": ("memory_copies", ("compute",)),
            "recompile": ("startup", ("compute", "host_overhead")),
            "eager_input_bound": ("input", ("compute", "host_overhead")),
            "anomaly_detection_on": ("host_overhead", ("compute",)),
            "call_overhead_bound": ("host_overhead", ("compute",)),
            "host_callback_work": ("host_overhead", ("compute",))}
#: Of those, the ones measured on any run (a device waits for the host while it
#: compiles), whose bound holds none of their time yet (steady compiles are neither
#: warm-up excess nor one-off calls); on a device run their time is taken from host
#: overhead first (the device idles while the host compiles).
EVERY_SIDE = ("op_overhead_bound", "recompile")
#: Of the others, those whose time no breakdown category of their bound holds yet: the
#: stack capture of anomaly mode is in the forward ops' own time, a small compiled step's
#: fixed cost per call inside the call and its wait (framework ops) and the loop's work
#: between the calls (its share leaves out what host overhead holds already), a host
#: callback's work inside the call; none of it is held.
NONE_HELD = ("anomaly_detection_on", "call_overhead_bound", "host_callback_work")


def _move_measured(ns: dict, findings, total: float, host_only: bool) -> list:
    """Time the findings of :data:`MOVED_BY` measured goes to their bound: up to their
    share of ``total``, the time that runs as steady steps do (the steady rows, and the
    warm-up rows up to a steady step: their excess is start-up, the rest has a steady
    step's make-up), less what that bound already holds (reads are ``sync`` already),
    taken from the categories they are in.  Returns what moved: (finding id, bound, ns,
    the bounds taken from)."""
    out = []
    for f in findings or []:
        if f.id not in MOVED_BY or (f.id not in EVERY_SIDE and not host_only):
            continue
        bound, sources = MOVED_BY[f.id]
        if not host_only and f.id == "recompile":
            sources = sources[::-1]
        held = 0.0 if f.id in EVERY_SIDE or f.id in NONE_HELD else ns[bound]
        want = max(float(f.share) * total - held, 0.0)
        taken = {}
        for src in sources:
            moved = min(want, ns[src])
            ns[src] -= moved
            ns[bound] += moved
            want -= moved
            if moved > 0:
                taken[src] = moved
        if taken:
            out.append((f.id, bound, sum(taken.values()), tuple(taken)))
    return out


def _later_one_off(findings, counted: float) -> float:
    """One-off calls outside the warm-up (``startup_cost``'s one-off time beyond what the
    warm-up rows hold), ns."""
    f = next((f for f in findings or [] if f.id == "startup_cost"), None)
    if f is None or not f.one_off_ns:
        return 0.0
    return max(float(f.one_off_ns) - counted, 0.0)


def _basis(bound: str, shares: dict, label: str, rank) -> str:
    others = sorted(((s, b) for b, s in shares.items() if b != bound and s >= 0.05),
                    reverse=True)
    rest = "; ".join(f"{LABELS[b].lower()} {pct(s)}" for s, b in others[:3])
    where = f"{label}" + (f" (rank {rank} is the slowest: the others wait for it)"
                          if rank is not None else "")
    unexplained = 1.0 - sum(shares.values())
    tail = (f"; {pct(unexplained)} of the time the trace does not explain"
            if unexplained >= 0.10 else "")
    return (f"{LABELS[bound]} takes {pct(shares[bound])} of the profiled iterations on "
            f"{where}" + (f"; then {rest}" if rest else "") + tail + ".")


def note_small_findings(findings, verdict: Verdict) -> None:
    """A finding under :data:`SMALL` ranked above the finding of the bound (or above
    everything, when the bound has none) says that it is smaller than the bound."""
    if not verdict.bound or verdict.share < SMALL:
        return
    for f in findings or []:
        if bound_of(f.id) == verdict.bound:
            return
        if f.share < SMALL and f.share < verdict.share:
            f.summary = (f"Smaller than what limits the run: it covers {pct(f.share)}, while "
                         f"the run is {verdict.label.lower()}-bound ({pct(verdict.share)} of "
                         f"the profiled time); it ranks here by expected gain x confidence. "
                         + f.summary)


def fit_compute_hypothesis(findings, verdict: Verdict) -> None:
    """The faster-compute hypothesis covers only the compute the verdict leaves: where the
    verdict reads part of the compute categories as another bound's (a loop of tiny ops
    is host overhead, ops that make the batch are input), that time is not compute to
    make faster, and the card would otherwise show a compute share beside the verdict's
    that the two cannot both be.  Its share, estimate and summary follow."""
    if not any("compute" in src for _, _, _, src in verdict.moved):
        return
    left = verdict.shares.get("compute", 0.0)
    for f in findings or []:
        if f.id != "compute_bound" or f.covers is None or f.covers <= left:
            continue
        gain = f.share / f.covers if f.covers else 0.0  # what the hypothesis saves of it
        f.summary = (f"Compute left to make faster: {pct(left)} of the step. Of the "
                     f"{pct(f.covers)} below, the verdict reads all but {pct(left)} as other "
                     f"bounds' time (measured by the findings that moved it); the share and "
                     f"estimate cover that {pct(left)}. " + f.summary)
        f.covers, f.share = left, left * gain
        f.estimated_speedup = 1.0 / max(1.0 - f.share, 1e-6)


#: The bound each finding id is about ("" for findings about variation or one rank).
FINDING_BOUND = {
    "input_pipeline_bound": "input", "eager_input_bound": "input",
    "compute_bound": "compute", "cpu_bound": "compute",
    "communication_bound": "communication", "op_overhead_bound": "host_overhead",
    "launch_overhead_bound": "host_overhead", "host_dispatch_bound": "host_overhead",
    "setup_overhead_bound": "host_overhead", "anomaly_detection_on": "host_overhead",
    "call_overhead_bound": "host_overhead", "sequence_loop": "host_overhead",
    "wrapper_overhead_bound": "host_overhead",
    "synchronization_stalls": "sync", "blocking_readback": "sync",
    "host_reads_in_loop": "sync", "host_callback_round_trip": "sync",
    "host_callback_work": "host_overhead",
    "startup_cost": "startup", "recompile": "startup",
    "host_device_copy_bound": "memory_copies", "memory_copy_bound": "memory_copies"}


def bound_of(fid: str) -> str:
    return FINDING_BOUND.get(fid, "")


register(Verdict)  # result types the analysis cache may store
