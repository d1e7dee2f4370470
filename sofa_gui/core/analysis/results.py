"""Result types shared by the analyses, the CLI and the GUI.

Times are int64 ns on the trace's clock inside the program; ``to_dict``
converts them to µs on the same clock (the numbers a user sees in the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..units import us
from .codec import register

__all__ = ["us"]  # re-exported: analysis modules import it from here



def lower_median_index(durations: np.ndarray) -> int:
    """Index of the median duration (lower median, stable), -1 if none: the one "median
    iteration" every view and the breakdown compare against."""
    if not len(durations):
        return -1
    order = np.argsort(durations, kind="stable")
    return int(order[(len(order) - 1) // 2])

@dataclass
class PeriodicExtra:
    """Work that comes every ``every``-th iteration (evaluation, checkpoint, logging).

    It stays inside the iteration it follows; ``iterations`` lists which ones hold
    it, ``cost_ns_mean`` is their mean excess over a regular iteration and
    ``rests_on`` says what the detection saw.  ``per_call``: the extra is the start of a
    new high-level call that runs ``every`` iterations (a Keras ``evaluate`` /
    ``predict`` per step), its set-up part of every step, not work some steps add.
    """

    every: int
    phase: int  # first holder's index modulo ``every``
    name: str  # best label: dominant ops, or what kind of work it looks like
    cost_ns_mean: float
    share_of_time: float  # of the steady-state time
    iterations: list[int]
    rests_on: str = ""
    per_call: bool = False  # a new high-level call's set-up, paid by every step

    def to_dict(self) -> dict:
        return {"every": self.every, "phase": self.phase, "name": self.name,
                "cost_us_mean": us(self.cost_ns_mean),
                "share_of_time": round(float(self.share_of_time), 4),
                "iterations": list(self.iterations), "rests_on": self.rests_on,
                "per_call": self.per_call}


UNCERTAIN_BELOW = 0.5  # confidence under which iterations (and what rests on them) are "uncertain"


@dataclass
class Iterations:
    """Iterations found in a trace, how, and how sure we are.

    Per-iteration marks (filled by :func:`iterations.marks.mark_iterations`):
    ``warmup`` (leading iterations that differ from the steady state, which
    starts at ``steady_state_from``), ``micro_batches`` (backward passes per
    iteration, -1 unknown), ``device_starts/ends`` (span of the device work the
    iteration launched, -1 none), ``periodic_extras`` and ``repeats`` (calls of the
    main thread's most repeated call: how many times the step's inner loop ran).
    The analysis then marks the advisor's warm-up instead of the detector's
    (:meth:`mark_warmup`): it also reads the loader's waits and the inner loop's counts,
    and every surface shows the one marking its numbers use; ``detected_from`` keeps
    the detector's start, which the advisor's rule reads.
    """

    method: str  # "annotations" | "pattern" | "landmarks" | "none"
    stream: str  # which event stream was used, in words
    starts: np.ndarray  # int64 ns
    ends: np.ndarray  # int64 ns
    confidence: float = 0.0  # 0..1
    pattern: dict | None = None  # {"symbols": L, "occurrences": K}
    agreement: dict | None = None  # pattern vs annotations, when both exist
    reason: str = ""  # why none were found, or notes on how they were
    labels: list[str] = field(default_factory=list)  # e.g. "ProfilerStep#5"; may be empty
    warmup: np.ndarray | None = None  # bool per iteration: the leading warm-up shown
    steady_state_from: int = 0
    micro_batches: np.ndarray | None = None  # int per iteration, -1 unknown
    device_starts: np.ndarray | None = None  # int64 ns per iteration, -1 none
    device_ends: np.ndarray | None = None
    device_lags: bool = False  # device work of a step runs past the host's next step start
    device_free_at: int = -1  # ns: when the device was free for iteration 0 (-1: unknown)
    periodic_extras: list[PeriodicExtra] = field(default_factory=list)
    repeats: np.ndarray | None = None  # int per iteration: its most repeated call's count
    #: the detector's own ``steady_state_from`` once the advisor's warm-up is marked
    #: instead (None: the marks are still the detector's)
    detected_from: int | None = None

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def detector_from(self) -> int:
        """Where the iteration detector's steady state starts, whichever warm-up is
        marked: the input of the advisor's warm-up rule (:mod:`.findings.steady`), so
        marking the advisor's warm-up again gives the same marks."""
        return self.steady_state_from if self.detected_from is None else self.detected_from

    def mark_warmup(self, k: int) -> None:
        """Mark the first ``k`` iterations as the warm-up every surface shows, keeping the
        detector's start in ``detected_from``. In place, as the detector's marks and the
        pattern check's ``agreement`` are (one that lands after this still shows); the
        mask is a new array, so marks a viewer built from the old one stay whole."""
        n = len(self)
        k = max(0, min(int(k), n))
        warm = np.zeros(n, bool)
        warm[:k] = True
        self.detected_from = self.detector_from
        self.steady_state_from = k
        self.warmup = warm

    @property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts

    @property
    def uncertain(self) -> bool:
        """True when iterations were found but confidence is below 0.5."""
        return self.method != "none" and self.confidence < UNCERTAIN_BELOW

    @property
    def steady(self) -> np.ndarray:
        """Indexes of the steady-state iterations (all but the leading warm-up)."""
        n = len(self)
        first = min(self.steady_state_from, n - 1) if n else 0
        return np.arange(max(first, 0), n)

    @property
    def median_index(self) -> int:
        """The median iteration: lower median by duration (stable), -1 if none.  The one
        "median" every surface shows and compares against (the breakdown uses the same
        rule on the same durations; :mod:`.figures`)."""
        return lower_median_index(self.durations)

    def device_step_times(self) -> np.ndarray | None:
        """Step times on the device clock when the device lags its host (else None):
        the durations of :meth:`device_windows`, so host/device skew does not count."""
        w = self.device_windows()
        return None if w is None else (w[1] - w[0]).astype(np.int64)

    def device_windows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-iteration windows on the device clock when the device lags (else None).

        Step ``k`` runs from the end of step ``k-1``'s device work to the end of
        its own (finish to finish), so device idle waiting for step ``k``'s host
        work or input belongs to step ``k``.  Step 0 starts when the device was
        free for it (``device_free_at``: its host start, or the end of earlier
        device work still running then).
        """
        if not self.device_lags or self.device_starts is None or len(self) < 2:
            return None
        a, b = self.device_starts, self.device_ends
        first = self.device_free_at if self.device_free_at >= 0 else int(self.starts[0])
        if (a < 0).any() or (np.diff(b) <= 0).any() or b[0] <= first:
            return None
        return np.r_[first, b[:-1]].astype(np.int64), b.astype(np.int64)

    def extra_of(self, i: int) -> PeriodicExtra | None:
        """The periodic extra iteration ``i`` holds, if any."""
        return next((x for x in self.periodic_extras if i in x.iterations), None)

    def per_call(self) -> np.ndarray:
        """Iterations that start a new high-level call (``PeriodicExtra.per_call``): each
        step's own set-up, not extra work some steps add."""
        return np.asarray(sorted(i for x in self.periodic_extras if x.per_call
                                 for i in x.iterations), np.int64)

    @classmethod
    def none(cls, stream: str, reason: str) -> Iterations:
        z = np.zeros(0, np.int64)
        return cls("none", stream, z, z.copy(), 0.0, None, None, reason)

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "stream": self.stream,
            "pattern": self.pattern,
            "confidence": round(float(self.confidence), 4),
            "uncertain": self.uncertain,
            "agreement_with_annotations": self.agreement,
            "reason": self.reason,
            "steady_state_from": int(self.steady_state_from) if len(self) else None,
            "device_lags_host": bool(self.device_lags),
            "median_iteration": self.median_index if len(self) else None,
            "median_us": us(int(self.durations[self.median_index])) if len(self) else None,
            "periodic_extras": [x.to_dict() for x in self.periodic_extras],
            "items": [self._item(i) for i in range(len(self))],
        }

    def _item(self, i: int) -> dict:
        s, e = int(self.starts[i]), int(self.ends[i])
        item = {"index": i, "start_us": us(s), "end_us": us(e), "duration_us": us(e - s),
                "label": self.labels[i] if i < len(self.labels) and self.labels[i] else None,
                "warmup": bool(self.warmup[i]) if self.warmup is not None else False,
                "micro_batches": None, "device_start_us": None, "device_end_us": None}
        if self.micro_batches is not None and self.micro_batches[i] >= 0:
            item["micro_batches"] = int(self.micro_batches[i])
        if self.device_starts is not None and self.device_starts[i] >= 0:
            item["device_start_us"] = us(int(self.device_starts[i]))
            item["device_end_us"] = us(int(self.device_ends[i]))
        return item


@dataclass
class Evidence:
    """A place on the timeline that supports a finding (clickable in the GUI)."""

    label: str
    start_ns: int
    end_ns: int
    iteration: int | None = None
    lanes: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "start_us": us(self.start_ns),
            "end_us": us(self.end_ns),
            "iteration": self.iteration,
            "lanes": list(self.lanes),
        }


@dataclass
class Fix:
    """A remedy and what it applies to.

    ``framework``: "pytorch", "tensorflow", "jax", "tensorflow/jax" (both) or "any"; its
    text names no other framework's API.
    ``devices``/``modes``: the run facts it fits (empty: any).  ``fact``: the run fact it
    changes; ``unless``: values of that fact under which it is already applied (the fix
    is then not shown).  ``needs``: facts the run must be proven to have, as
    ``(key, allowed values)`` pairs (a DataLoader fix needs a DataLoader in the trace:
    unknown is not enough); ``excludes``: ``(key, values)`` pairs that rule it out.
    ``assumes``: ``(key, allowed values)`` pairs of facts the fix pays off under that a
    trace may not prove (a CPU's bf16 instructions): a known other value hides it; an
    unknown one leaves it shown as a condition, with no speed-up estimate
    (``gain`` :data:`CONDITIONAL`).
    ``because`` is filled per run with the fact that makes it fit.
    ``gain``: how its own speed-up is estimated (a key of :data:`GAIN_NEEDS`; "" = the
    finding's estimate applies to all its fixes), ``name`` a short label for it;
    ``estimate``/``estimate_why`` are filled per run, and ``settings`` with the values the
    estimate assumes for the fix's parameters (``num_workers``, ``main_threads``), which
    ``sofa-gui try`` applies.
    """

    framework: str
    text: str
    devices: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    fact: str = ""
    unless: tuple = ()
    needs: tuple[tuple[str, tuple], ...] = ()
    excludes: tuple[tuple[str, tuple], ...] = ()
    assumes: tuple[tuple[str, tuple], ...] = ()
    because: str = ""
    gain: str = ""
    name: str = ""
    estimate: float | None = None
    estimate_why: str = ""
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {"framework": self.framework, "text": self.text,
               "applies_to": {"devices": list(self.devices) or "any",
                              "modes": list(self.modes) or "any"}}
        if self.fact:
            out["applies_to"]["fact"] = self.fact
        if self.because:
            out["because"] = self.because
        if self.name:
            out["name"] = self.name
        if self.gain:
            out["needs"] = GAIN_NEEDS.get(self.gain, "")
            out["estimated_speedup"] = (None if self.estimate is None
                                        else round(float(self.estimate), 3))
            out["estimate_basis"] = self.estimate_why
        if self.settings:
            out["settings"] = dict(self.settings)
        return out

    @property
    def conditional(self) -> bool:
        """Shown on a condition the trace does not prove: no speed-up is claimed for it."""
        return self.gain == CONDITIONAL

    @property
    def estimate_label(self) -> str:
        """"this fix alone: 1.65x" / "... not estimated" / "" (no estimate of its own)."""
        if not self.gain:
            return ""
        if self.estimate is None:
            return f"not estimated: {self.estimate_why}"
        return f"this fix alone: {self.estimate:.2f}x"


#: ``Fix.gain`` of a fix shown on a condition the trace does not prove (``Fix.assumes``).
CONDITIONAL = "conditional"
#: What a fix's estimate model (``Fix.gain``) needs from the machine, in words.
GAIN_NEEDS = {"cores": "free CPU cores (one per worker)",
              "core": "one free CPU core (a background thread)",
              "removes": "no extra core (the work is removed, not moved)",
              "restarts": "no extra core (the loader's start-up is paid once, not every epoch)",
              "chain": "no extra core (the collectives send the same bytes, at other times)",
              "list_conversion": "no extra core (the list's walk in Python is removed)",
              "none": "not estimated",
              CONDITIONAL: "a fact the trace does not prove (not estimated)"}


@dataclass
class Cause:
    """One op / function / call site that makes up part of a finding's time.

    ``total_ns`` in the analyzed iterations, ``count`` occurrences, ``share`` of the
    finding's own time; ``instance`` one clickable occurrence."""

    label: str
    total_ns: int
    count: int
    share: float
    instance: Evidence | None = None

    def to_dict(self) -> dict:
        return {"label": self.label, "total_us": us(self.total_ns), "count": int(self.count),
                "share": round(float(self.share), 4),
                "instance": self.instance.to_dict() if self.instance else None}


@dataclass
class Finding:
    """One bottleneck the advisor names, with its weight, proof, causes and remedies.

    ``share``: fraction of steady-state iteration time its fixes could remove (for
    one-off / periodic findings: of the profiled time, and ``estimated_speedup`` is
    None: no per-iteration gain).  ``covers``: where that is only part of the time the
    finding is about (a hypothesis: compute made 2x faster saves half of it), the
    fraction of steady-state iteration time it is about; None where the fix removes all
    of it.  ``confidence`` 0..1 says how sure the estimate is.  ``estimate_floor``: the
    estimate is a lower bound (the trace shows part of what the fix removes and cannot
    size the rest, e.g. a program's cold first run with no warm run to compare with).
    ``estimate_assumes``: the change a hypothesis's estimate assumes ("2x faster
    compute"): its gain is that change's, shown on the fixes that make it, and promised
    for no other change ("" for an estimate read off the trace).
    """

    id: str
    title: str
    severity: str  # "high" | "medium" | "low"
    share: float  # fraction of iteration time explained, 0..1
    estimated_speedup: float | None  # if removed; None for one-off work
    summary: str
    evidence: list[Evidence]
    fixes: list[Fix]
    causes: list[Cause] = field(default_factory=list)
    confidence: float = 1.0
    confidence_why: str = ""
    hidden_fixes: list[tuple[Fix, str]] = field(default_factory=list)
    one_off_ns: int = 0
    estimated_by: str = ""  # the fix whose estimate is the finding's (per-fix estimates)
    #: what makes its reading (not only its size) unproven, e.g. slow steps that make the
    #: same calls as fast ones: such findings rank after the hypotheses
    tentative: str = ""
    #: other shown findings that measure disjoint time (their shares add up)
    disjoint_with: list[str] = field(default_factory=list)
    #: why this finding's wait sets the step time though its share may be smaller than
    #: another's (an input loader late for every step); "" when it does not
    paced: str = ""
    covers: float | None = None
    estimate_floor: bool = False
    estimate_assumes: str = ""

    @property
    def gain(self) -> float:
        """Expected fraction of time saved: per-step share, or one-off share of the profile."""
        if self.estimated_speedup is None:
            return float(self.share)
        return 1.0 - 1.0 / max(float(self.estimated_speedup), 1e-9)

    @property
    def rank_key(self) -> float:
        return self.gain * self.confidence

    def to_dict(self) -> dict:
        sp = self.estimated_speedup
        out = {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "share": round(float(self.share), 4),
            "estimated_speedup": None if sp is None else round(float(sp), 3),
            "confidence": round(float(self.confidence), 2),
            "confidence_why": self.confidence_why,
            "summary": self.summary,
            "causes": [c.to_dict() for c in self.causes],
            "evidence": [e.to_dict() for e in self.evidence],
            "fixes": [f.to_dict() for f in self.fixes],
            "fixes_not_shown": [{"text": f.text, "framework": f.framework, "why": why}
                                for f, why in self.hidden_fixes],
        }
        if self.one_off_ns:
            out["one_off_us"] = us(self.one_off_ns)
        if self.tentative:
            out["tentative"] = self.tentative
        if self.estimated_by:
            out["estimated_by"] = self.estimated_by
        if self.disjoint_with:
            out["disjoint_with"] = list(self.disjoint_with)
        if self.paced:
            out["paced"] = self.paced
        if self.covers is not None:
            out["covers"] = round(float(self.covers), 4)
        if self.estimate_floor:
            out["estimate_is_lower_bound"] = True
        if self.estimate_assumes:
            out["estimate_assumes"] = self.estimate_assumes
        return out


# result types the analysis cache may store
register(Iterations, PeriodicExtra, Finding, Cause, Evidence, Fix)
