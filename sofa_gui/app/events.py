"""What a background job hands to the GUI: one typed event per kind of result.

A job (:mod:`.jobs`, :mod:`.fleet_jobs`) calls ``state.partial(event)`` with one of
these; the session (:class:`sofa_gui.qt.session.Session`) looks up its handler by the
event's type, so a new kind of result is a new class here plus one entry in the
session's table, and an event nobody handles is an error instead of a silent no-op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a job imports this module before any heavy part
    from ..core.analysis.pipeline import Analysis
    from ..core.fleet.cross import FleetResult
    from ..core.fleet.runset import RankFile
    from ..core.fleet.summary import RankSummary
    from ..core.trace import Trace
    from ..view.model import Prepared


@dataclass(frozen=True)
class TraceReady:
    """A trace was loaded (or read from the cache) and indexed for the timeline."""

    trace: Trace
    prepared: Prepared


@dataclass(frozen=True)
class AnalysisReady:
    """``analysis.<part>`` is ready (a snapshot: parts still running are None)."""

    analysis: Analysis
    part: str


@dataclass(frozen=True)
class CompareReady:
    """The other run of a comparison, loaded and fully analyzed."""

    trace: Trace
    analysis: Analysis


@dataclass(frozen=True)
class FleetStarted:
    """A big rank folder opens as a fleet: its rank files, before any rank is analyzed."""

    path: str
    files: list[RankFile]


@dataclass(frozen=True)
class FleetRankDone:
    """One rank of the fleet is analyzed."""

    summary: RankSummary


@dataclass(frozen=True)
class FleetDone:
    """The cross-rank result of the fleet (stragglers, spread)."""

    result: FleetResult
