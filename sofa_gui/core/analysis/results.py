"""Result types shared by the analyses, the CLI and the GUI.

Times are int64 ns on the trace's clock inside the program; ``to_dict``
converts them to µs on the same clock (the numbers a user sees in the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def us(ns) -> float:
    """ns -> µs, rounded to 3 decimals (ns resolution) for JSON output.

    Integer ns are divided exactly (int / int is correctly rounded), so epoch
    stamps (~1.7e18 ns, beyond float64's 2**53) come out as the file's µs.
    """
    if isinstance(ns, (int, np.integer)):
        return round(int(ns) / 1000, 3)
    return round(float(ns) / 1000.0, 3)


@dataclass
class Iterations:
    """Iterations found in a trace, how, and how sure we are."""

    method: str  # "annotations" | "pattern" | "none"
    stream: str  # which event stream was used, in words
    starts: np.ndarray  # int64 ns
    ends: np.ndarray  # int64 ns
    confidence: float = 0.0  # 0..1
    pattern: dict | None = None  # {"symbols": L, "occurrences": K}
    agreement: dict | None = None  # pattern vs annotations, when both exist
    reason: str = ""  # why none were found, or notes on how they were
    labels: list[str] = field(default_factory=list)  # e.g. "ProfilerStep#5"; may be empty

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts

    def index_at(self, t_ns: int) -> int:
        """Iteration containing ``t_ns`` or -1."""
        i = int(np.searchsorted(self.starts, t_ns, side="right")) - 1
        return i if 0 <= i < len(self) and t_ns < self.ends[i] else -1

    @classmethod
    def none(cls, stream: str, reason: str) -> Iterations:
        z = np.zeros(0, np.int64)
        return cls("none", stream, z, z.copy(), 0.0, None, None, reason)

    def to_dict(self) -> dict:
        items = [
            {"index": i, "start_us": us(s), "end_us": us(e), "duration_us": us(e - s)}
            for i, (s, e) in enumerate(zip(self.starts.tolist(), self.ends.tolist()))
        ]
        for item, label in zip(items, self.labels):
            item["label"] = label
        return {
            "method": self.method,
            "stream": self.stream,
            "pattern": self.pattern,
            "confidence": round(float(self.confidence), 4),
            "agreement_with_annotations": self.agreement,
            "reason": self.reason,
            "items": items,
        }


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
    framework: str  # "pytorch" | "tensorflow/jax" | "any"
    text: str

    def to_dict(self) -> dict:
        return {"framework": self.framework, "text": self.text}


@dataclass
class Finding:
    """One bottleneck the advisor names, with its weight, proof and remedies."""

    id: str
    title: str
    severity: str  # "high" | "medium" | "low"
    share: float  # fraction of iteration time explained, 0..1
    estimated_speedup: float  # if removed
    summary: str
    evidence: list[Evidence]
    fixes: list[Fix]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "share": round(float(self.share), 4),
            "estimated_speedup": round(float(self.estimated_speedup), 3),
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "fixes": [f.to_dict() for f in self.fixes],
        }
