"""The run facts' types, the registry of their probes and the helpers probes share
(see :mod:`.run_facts` for the facts and :func:`.run_facts.run_facts`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..trace import Trace
from .codec import register
from .results import us


@dataclass
class Fact:
    """One fact about the run: its value (None = unknown), a few words of detail, and
    what proves it (an event name or a file field; ``slice`` >= 0 is clickable)."""

    key: str
    value: object = None
    detail: str = ""
    proof: str = ""
    slice: int = -1

    @property
    def known(self) -> bool:
        return self.value is not None

    def to_dict(self, trace: Trace | None = None) -> dict:
        out = {"value": self.value, "detail": self.detail, "proof": self.proof}
        if trace is not None and self.slice >= 0:
            s = trace.slices
            out["event"] = {"name": trace.name_of(self.slice),
                            "start_us": us(int(s.start[self.slice])),
                            "end_us": us(int(s.start[self.slice] + s.dur[self.slice])),
                            "lane": int(s.lane[self.slice])}
        return out

    def said(self) -> str:
        """``"value (detail): proof"`` for headers and fix notes."""
        if not self.known:
            return "unknown"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.value}{detail}" + (f": {self.proof}" if self.proof else "")


@dataclass
class RunFacts:
    facts: dict[str, Fact] = field(default_factory=dict)

    def get(self, key: str) -> Fact:
        return self.facts.get(key) or Fact(key)

    def value(self, key: str):
        return self.get(key).value

    def to_dict(self, trace: Trace | None = None) -> dict:
        return {k: self.get(k).to_dict(trace) for k in FACT_KEYS}

    def header(self) -> str:
        """One line for summaries: the known facts, short."""
        parts = []
        for k in FACT_KEYS:
            f = self.get(k)
            if f.known:
                parts.append(f"{k} {f.value}" + (f" ({f.detail})" if f.detail else ""))
        return "; ".join(parts) if parts else "nothing about the run is proven by the trace"


FACT_KEYS = ("framework", "device", "mode", "ranks", "cpu_cores", "cpu_other", "cpu_interf",
             "cpu_handover", "dataloader", "host_copies", "precision", "cpu_bf16", "compiled",
             "optimizer", "grad_mode", "anomaly_detection", "collectives", "tf_data",
             "tf_data_parallel", "tf_data_prefetch", "tf_data_cache")
PROBES: list[Callable[[Trace], list[Fact]]] = []


def probe(fn: Callable[[Trace], list[Fact]]) -> Callable[[Trace], list[Fact]]:
    """Register a fact probe: a function ``(trace) -> list[Fact]``; the first probe to
    prove a key wins (in the order they are registered)."""
    PROBES.append(fn)
    return fn


# -- helpers -------------------------------------------------------------------------------
def first_named(trace: Trace, pattern: str, kinds=None) -> int:
    """First slice (in time) whose name matches ``pattern`` (regex), -1 if none."""
    rx = re.compile(pattern)
    ids = [i for i, n in enumerate(trace.names) if rx.search(n)]
    if not ids:
        return -1
    s = trace.slices
    named = np.zeros(len(trace.names), bool)  # a lookup per slice: one pass, not isin's four
    named[ids] = True
    hit = named[s.name]
    if kinds is not None:
        hit &= np.isin(s.kind, [int(k) for k in kinds])
    idx = np.flatnonzero(hit)
    return int(idx[np.argmin(s.start[idx])]) if len(idx) else -1


def named(trace: Trace, key: str, value, pattern: str, detail: str = "", kinds=None) -> Fact:
    j = first_named(trace, pattern, kinds)
    if j < 0:
        return Fact(key)
    return Fact(key, value, detail, f"`{trace.name_of(j)}`", j)


def trace_header(trace: Trace) -> dict:
    h = trace.meta.extra.get("header")
    return h if isinstance(h, dict) else {}


register(RunFacts, Fact)  # result types the analysis cache may store
