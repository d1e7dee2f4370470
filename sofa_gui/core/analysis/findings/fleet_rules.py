"""Cross-rank findings (``sofa-gui fleet``) in the rule registry: ids, titles, thresholds,
confidence factors, fixes.

They are computed over per-rank summaries by :mod:`sofa_gui.core.fleet.cross`, not over
one trace, so they have no trace checks; declaring them here lists them with every other
rule, keeps their remedies in the same table (:data:`.fixes.FIXES`) and grades them the
same way (:func:`fleet_finding`: severity from the rule's thresholds, confidence from its
named factors, fixes chosen by the job's run facts as ``analyze`` chooses them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..balance import MOVES, NOT_WORK
from ..facts_base import RunFacts
from ..results import Finding, Fix
from .context import BELOW, amdahl, rule_of
from .context import severity as graded
from .fixes import FIXES, choose_fixes
from .registry import RULES, declare

MODERATE, HIGH = 0.05, 0.20
_PT, _TF, _JAX, _ANY = "pytorch", "tensorflow", "jax", "any"
_GPU = ("cuda", "rocm")

declare("straggler_holds_collectives", "One rank holds the others in collectives", MODERATE,
        HIGH, "across ranks (fleet): own time (wall - exposed communication) and exposed "
              "communication per aligned iteration",
        factors={"others_wait_for_it": 0.9})
declare("straggler", "One rank slower than the median rank", MODERATE, HIGH,
        "across ranks (fleet): own time (wall - exposed communication) per aligned iteration",
        factors={"wait_not_matched": 0.6})
declare("load_imbalance", "Load imbalance across ranks", MODERATE, HIGH,
        "across ranks (fleet): spread of the ranks' median own time per iteration",
        factors={"spread_of_medians": 0.7})

#: Remedies by the breakdown category in which the straggler's extra time is largest.
CAUSE_FIXES: dict[str, list[Fix]] = {
    "compute": [
        Fix(_ANY, "Check the slow rank's GPU: clocks and throttling (nvidia-smi -q -d "
                  "PERFORMANCE,CLOCK / rocm-smi), ECC and XID errors, PCIe/NVLink width; "
                  "exclude or replace a degraded node.", devices=_GPU),
    ],
    "idle_input": [
        Fix(_ANY, "The slow rank waits for its input: check its node's storage/network read "
                  "speed and CPU load; give its DataLoader more workers or pre-stage the data "
                  "locally."),
    ],
    "idle_host": [
        Fix(_ANY, "The slow rank's host is slower at launching work: check CPU frequency, "
                  "other processes and NUMA/core pinning on that node (taskset, numactl)."),
    ],
}
_WAITS_ON = ("The slow rank's extra time is not in ops: find what it waits on. Time with no "
             "op on its main thread is Python outside the framework (a slow decoder or "
             "transform, a sleep, logging), I/O or a stall of its node; record that rank's "
             "Python side (sofa-gui record --py-spy) and read what fills its gaps")
#: Remedies by the shape of the straggler's extra time (:mod:`..balance`): op work that
#: moves when the data is balanced, or time that is not work, which only its cause removes.
SHAPE_FIXES: dict[str, list[Fix]] = {
    MOVES: [
        Fix(_PT, "Give every rank the same work: shuffle the samples before they are split "
                 "across the ranks (a length-sorted or bucketed dataset cut into contiguous "
                 "shards gives one rank all the long samples; DistributedSampler with "
                 "shuffle=True and set_epoch), bucket by length within each rank's batches, "
                 "or pack sequences to the same token count per batch."),
        Fix(_TF, "Give every replica the same work: shuffle before sharding the dataset, then "
                 "pad or bucket batches to equal shapes (tf.data bucket_by_sequence_length)."),
        Fix(_JAX, "Give every replica the same work: shuffle before sharding, then pad or pack "
                  "batches to fixed shapes under jax.jit."),
        Fix(_ANY, "If the ranks already get the same data, the slow rank's processor is "
                  "slower: check its clocks, throttling and other processes on its node."),
    ],
    NOT_WORK: [
        Fix(_PT, _WAITS_ON + "; torch.profiler(with_stack=True) on that rank shows it too. If "
                 "it is the rank preparing its batches, move that work into DataLoader "
                 "workers so it overlaps the step."),
        Fix(_TF, _WAITS_ON + ". If it is the rank preparing its batches, move that work into "
                 "its tf.data pipeline (a map with num_parallel_calls, then prefetch) so it "
                 "overlaps the step."),
        Fix(_JAX, _WAITS_ON + ". If it is the rank preparing its batches, make them in a "
                  "background thread so they overlap the jitted step."),
    ],
}
CAUSE_FIXES["data_loading"] = CAUSE_FIXES["idle_input"]  # the host's wait for its input
#: What every straggler finding offers whatever its cause.
_GENERIC = [
    Fix(_ANY, "Open the straggler next to the median rank (app: 'Open with median rank') and "
              "compare their iterations category by category."),
]
_SHAPED = [f for fixes in SHAPE_FIXES.values() for f in fixes]

# the straggler rules' table lists every remedy they can give; :func:`fixes_for` picks those
# of the straggler's cause
FIXES.setdefault("straggler_holds_collectives", [*_SHAPED, *_GENERIC])
FIXES.setdefault("straggler", [*_SHAPED, *_GENERIC])
FIXES.setdefault("load_imbalance", [
    Fix(_PT, "Balance work per rank: length-bucketed or packed batches, an even split of "
             "layers across pipeline stages, or uneven_inputs handling (DDP join())."),
    Fix(_TF, "Give every replica the same work: equal per-replica batch shapes "
             "(tf.distribute experimental_distribute_dataset with a global batch divisible by "
             "the replicas)."),
    Fix(_JAX, "Give every replica the same work: jax sharding with even shards."),
    Fix(_ANY, "Ranks differ steadily: compare the slowest with the fastest rank side by "
              "side; a node-level cause (hardware, co-located jobs) shows on all its ranks."),
])


def fixes_for(fid: str, category: str = "", shape: str = "") -> list[list[Fix]]:
    """The fixes of a fleet finding in groups, most specific first, before the run facts
    choose among them: those of the category where the straggler's extra time is largest,
    those of the shape of that time (:data:`SHAPE_FIXES`; both shapes' when it is not
    known), the rule's own."""
    if not fid.startswith("straggler"):
        return [RULES[fid].fixes]
    shapes = [shape] if shape in SHAPE_FIXES else list(SHAPE_FIXES)
    return [CAUSE_FIXES.get(category, []), [f for k in shapes for f in SHAPE_FIXES[k]],
            [f for f in RULES[fid].fixes if f not in _SHAPED]]


def choose_in_groups(groups: list[list[Fix]], facts: RunFacts
                     ) -> tuple[list[Fix], list[tuple[Fix, str]]]:
    """:func:`.fixes.choose_fixes` over each group in turn (the run's framework first
    within a group, the groups in their order), each fix once."""
    shown, hidden, seen = [], [], set()
    for group in groups:
        s, h = choose_fixes([f for f in group if f.text not in seen], facts)
        seen.update(f.text for f in group)
        shown += s
        hidden += h
    return shown, hidden


@dataclass
class FleetFinding(Finding):
    """A finding across ranks: which ranks and aligned iterations it names, and what it
    rests on."""

    ranks: list[int] = field(default_factory=list)
    iterations: list[int] = field(default_factory=list)
    rests_on: str = ""

    def to_dict(self) -> dict:
        out = super().to_dict()
        out.update(ranks=list(self.ranks), iterations=list(self.iterations),
                   rests_on=self.rests_on)
        return out


def fleet_finding(fid: str, share: float, summary: str, *, title: str = "",
                  factor: str = "", confidence: float | None = None, category: str = "",
                  shape: str = "", ranks: list[int] = (), iterations: list[int] = (),
                  graded_as: str = "", fixes: list[Fix] | None = None,
                  speedup: float | None = None, facts: RunFacts | None = None
                  ) -> FleetFinding:
    """A fleet finding graded by the registry: severity from the thresholds of ``fid``'s
    rule (``graded_as``'s for a per-rank finding shared across ranks; under the moderate
    threshold it is "low": the cross-rank test already found it), confidence the rule's
    factor ``factor`` (or ``confidence`` when it is a measured ratio); the speed-up Amdahl
    on ``share`` unless ``speedup`` gives it (a straggler's balanced step).  The job's
    run ``facts`` choose its fixes (:func:`.fixes.choose_fixes`: another framework's,
    device's or mode's are not shown, nor a change already made)."""
    spec = rule_of(graded_as or fid)
    sev = graded(spec, share)
    conf = spec.factor(factor) if factor else float(confidence if confidence is not None
                                                   else 1.0)
    why = (f"{factor.replace('_', ' ')}" if factor else "share of ranks that agree")
    shown, hidden = choose_in_groups([fixes] if fixes is not None
                                     else fixes_for(fid, category, shape),
                                     facts if facts is not None else RunFacts())
    return FleetFinding(fid, title or spec.title, "low" if sev == BELOW else sev, share,
                        amdahl(share) if speedup is None else speedup, summary, [], shown,
                        confidence=round(conf, 3), confidence_why=why, hidden_fixes=hidden,
                        ranks=list(ranks), iterations=list(iterations),
                        rests_on=spec.grounded if not graded_as
                        else "each rank's own analysis (top finding per rank)")
