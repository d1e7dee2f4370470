"""One call for the CLI and the app: rank files -> Dask tasks -> cross-rank result."""

from __future__ import annotations

from collections.abc import Callable

from .cross import FleetResult, cross_rank
from .engine import Engine, open_engine, run_ranks
from .runset import RankFile, rank_files, select
from .summary import RankSummary


def fleet(run_dir, scheduler: str | None = None, workers: int | None = None,
          ranks: str | None = None, mode: str = "auto", use_cache: bool = True,
          on_start: Callable[[list[RankFile]], None] | None = None,
          on_done: Callable[[RankSummary], None] | None = None,
          cancelled: Callable[[], bool] | None = None,
          on_engine: Callable[[Engine], None] | None = None) -> FleetResult:
    """Analyze every selected rank of ``run_dir`` on Dask and compare them.

    Raises TraceFormatError (bad folder), ValueError (bad ``ranks``) or
    :class:`~.engine.EngineError` (cluster unusable).
    """
    files = select(rank_files(run_dir), ranks)
    if not files:
        raise ValueError(f"--ranks {ranks} selects none of the folder's ranks")
    if on_start is not None:
        on_start(files)
    with open_engine(scheduler, workers) as engine:
        if on_engine is not None:
            on_engine(engine)
        summaries = run_ranks(engine, files, mode, use_cache, on_done, cancelled)
        info = engine.info()
    return cross_rank(summaries, info)
