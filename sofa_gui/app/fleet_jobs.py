"""Background jobs for big rank folders: the fleet analysis, and opening chosen ranks.

A folder with more than :data:`FLEET_MIN_RANKS` - 1 rank files is not loaded as one
trace: :func:`fleet_job` runs the per-rank analysis on Dask (the embedded
``LocalCluster`` or ``$SOFA_GUI_SCHEDULER``) and hands over a
:class:`~.events.FleetStarted` (the rank files), one :class:`~.events.FleetRankDone` per
finished rank and the :class:`~.events.FleetDone` result.
:func:`.jobs.open_ranks_job` then loads only the ranks the user asks for.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.analysis.pipeline import Options
from .events import FleetDone, FleetRankDone, FleetStarted

#: Folders with at least this many rank files open as a fleet (heat map first).
FLEET_MIN_RANKS = 9
#: Worker processes of the embedded cluster ($SOFA_GUI_FLEET_WORKERS, default one per core).
ENV_WORKERS = "SOFA_GUI_FLEET_WORKERS"


def fleet_files(path: Path):
    """The rank files when ``path`` is a rank folder big enough for the fleet view."""
    from ..core.errors import TraceFormatError
    from ..core.fleet.runset import rank_files

    if not path.is_dir():
        return None
    names = {p.name.lower() for p in path.iterdir()}
    if "manifest.json" in names or "sofa_time.txt" in names:
        return None
    try:
        files = rank_files(path)
    except TraceFormatError:
        return None
    return files if len(files) >= FLEET_MIN_RANKS else None


def embedded_workers() -> int | None:
    v = os.environ.get(ENV_WORKERS, "")
    return int(v) if v.isdigit() and int(v) > 0 else None


def fleet_job(state, path: str, options: Options) -> None:
    """Per-rank analysis on Dask, each rank handed over as it finishes."""
    from ..core.fleet.run import fleet

    total = []

    def started(files):
        total.append(len(files))
        state.partial(FleetStarted(path, files))
        state.update(0.02, f"Analyzing {len(files)} ranks on Dask")

    def done(summary):
        state.partial(FleetRankDone(summary))  # raises Cancelled once the job is cancelled
        n = done.count = getattr(done, "count", 0) + 1
        state.update(0.02 + 0.96 * n / total[0], f"{n}/{total[0]} ranks analyzed")

    res = fleet(path, workers=embedded_workers(), mode=options.iterations, on_start=started,
                on_done=done, on_engine=lambda eng: state.on_cancel(eng.cancel))
    state.partial(FleetDone(res))
    state.update(1.0, "Fleet analysis done")
