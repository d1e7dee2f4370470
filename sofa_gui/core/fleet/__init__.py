"""Runs bigger than one machine: per-rank analysis on a Dask cluster, cross-rank results.

Each rank file is imported and analyzed as one task on a worker, where the data
is (:mod:`.task`); only a small :class:`~.summary.RankSummary` travels back.
:mod:`.engine` runs the tasks on an existing scheduler or an embedded
``LocalCluster``; :mod:`.cross` aligns iterations across ranks and finds
stragglers, collective wait skew and cross-rank findings.

Client memory: the summaries only, about ``(15 x 8 bytes) x iterations`` plus a
few hundred bytes per rank (see :func:`.summary.RankSummary.nbytes`).
"""
