"""What one rank's task sends back: small, typed, independent of the trace's size."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..analysis.results import us
from .facts import rank_facts

#: Per-rank findings kept (the rest stay on the worker): enough to name the top one
#: and to count findings shared by many ranks.
MAX_FINDINGS = 5


@dataclass
class RankSummary:
    """One rank, summarised on the worker.  Times are int ns on the rank's own clock.

    ``times`` is (iterations x ``categories``) from the breakdown of the rank's busiest
    device (``side == "device"``) or its main thread (``"host"``); each row sums to
    ``durations``.  ``comm_total`` is all collective time per iteration (hidden or not).
    ``error`` is set (and the rest empty) when the rank could not be read or analyzed.
    ``facts``: what the rank's trace proves about the program (:mod:`.facts`).
    """

    rank: int
    path: str
    events: int = 0
    error: str | None = None
    header_rank: int | None = None  # distributedInfo.rank, when the file has it
    method: str = "none"  # how iterations were found
    labels: list[str] = field(default_factory=list)
    durations: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    side: str = ""
    categories: list[str] = field(default_factory=list)
    times: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    comm_total: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    findings: list[dict] = field(default_factory=list)  # id, title, severity, share
    facts: dict[str, dict] = field(default_factory=dict)  # key -> value, detail, proof
    worker: str = ""
    seconds: float = 0.0  # task wall time on the worker
    cpu_seconds: float = 0.0  # task CPU time (process, all threads): what scales to N workers
    from_cache: bool = False

    def __post_init__(self):
        self.durations = np.asarray(self.durations, np.int64).reshape(-1)
        self.times = np.asarray(self.times, np.int64).reshape(len(self.durations),
                                                              len(self.categories))
        self.comm_total = np.asarray(self.comm_total, np.int64).reshape(-1)

    @property
    def ok(self) -> bool:
        return self.error is None

    def column(self, category: str) -> np.ndarray:
        """One category per iteration (zeros when this rank does not have it)."""
        if category not in self.categories:
            return np.zeros(len(self.durations), np.int64)
        return self.times[:, self.categories.index(category)]

    def median_us(self) -> float | None:
        return us(float(np.median(self.durations))) if len(self.durations) else None

    def nbytes(self) -> int:
        """Approximate bytes held on the client (arrays, labels, findings, fixed part)."""
        arrays = self.durations.nbytes + self.times.nbytes + self.comm_total.nbytes
        labels = sum(49 + len(lb) + 8 for lb in self.labels)
        return (1000 + len(self.path) + arrays + labels + 300 * len(self.findings)
                + 200 * len(self.facts))

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("durations", "times", "comm_total"):
            d[k] = getattr(self, k).tolist()
        return d

    @classmethod
    def failed(cls, rank: int, path: str, error: str, **kw) -> RankSummary:
        return cls(rank=rank, path=path, error=error, **kw)


def summarize(rank: int, path: str, trace, analysis) -> RankSummary:
    """Condense one rank's trace + :class:`~..analysis.pipeline.Analysis` for the client."""
    bd = analysis.breakdown
    side = "device" if bd is not None and bd.device is not None else "host"
    cats: list[str] = []
    times = np.zeros((0, 0), np.int64)
    durs = np.zeros(0, np.int64)
    comm = np.zeros(0, np.int64)
    if bd is not None and not bd.whole_trace and bd.categories(side):
        cats = list(bd.categories(side))
        times = bd.times(side)
        durs = bd.durations
        comm = (bd.device.comm_total if side == "device"  # CPU collectives: the host's wait
                else bd.host.column("communication") if bd.host is not None
                else np.zeros(len(durs), np.int64))
    labels = list(analysis.iterations.labels)
    if len(labels) != len(durs):
        labels = []
    hr = _header_rank(trace.meta.extra.get("distributed"))
    return RankSummary(
        rank=rank, path=path, events=int(trace.events), header_rank=hr,
        method=analysis.iterations.method, labels=labels,
        durations=durs.astype(np.int64), side=side if cats else "",
        categories=cats, times=times.astype(np.int64), comm_total=comm.astype(np.int64),
        findings=[{"id": f.id, "title": f.title, "severity": f.severity,
                   "share": round(float(f.share), 4)} for f in analysis.findings[:MAX_FINDINGS]],
        facts=rank_facts(analysis.run),
    )


def _header_rank(info) -> int | None:
    """``distributedInfo.rank`` of a single-file Kineto trace (None when absent)."""
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
