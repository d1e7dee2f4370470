"""Dask distributed engine: an existing scheduler, or an embedded ``LocalCluster``.

Each rank is one task (:func:`~.task.rank_task`).  A task on a worker that dies is
rescheduled by the scheduler on another worker (up to ``allowed-failures``, 3 by
default); a task that raises is retried once (``RETRIES``), then reported as that
rank's error while the other ranks complete.  Futures are released as soon as their
summary is read, so the scheduler and the client never keep more than the summaries.

The embedded cluster only talks to its owner: scheduler, workers and client use
Dask's TLS with credentials made for this run (``Security.temporary()``: a fresh key
and certificate held in memory and handed to the workers it starts), so a process that
does not hold them, another local user's included, cannot connect, let alone run code
on the workers. Its HTTP servers serve nothing (no dashboard, logs or metrics).
An external scheduler (``--scheduler``,
``$SOFA_GUI_SCHEDULER``) is reached over ``tcp://``, ``tls://``, ``ws://`` or
``wss://``, with the TLS settings of the Dask config (``distributed.comm.tls.*``, or
``DASK_DISTRIBUTED__COMM__TLS__*`` in the environment); it and its workers are trusted
code, since Dask unpickles what they return (see docs/security.md).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..progress import Cancelled
from .runset import RankFile
from .summary import RankSummary
from .task import rank_task

ENV_SCHEDULER = "SOFA_GUI_SCHEDULER"
#: Address schemes an external scheduler may use (ucx:// needs libraries not installed).
SCHEMES = ("tcp", "tls", "ws", "wss")
#: The embedded cluster's HTTP servers (which Dask always starts, on a free loopback port)
#: serve nothing: no dashboard, no worker lists, logs or metrics for other local users.
NO_HTTP_ROUTES = {"distributed.scheduler.http.routes": [],
                  "distributed.worker.http.routes": []}
RETRIES = 1  # extra attempts for a task that raised (not for bad input: that is a result)
CONNECT_TIMEOUT_S = 20


class EngineError(Exception):
    """The cluster could not be reached or used (one line for the user)."""


@dataclass
class Engine:
    """Where the tasks ran (the JSON ``engine`` object)."""

    client: object
    scheduler: str
    embedded: bool
    pending: list = field(default_factory=list)  # futures of the running call

    def cancel(self) -> None:
        """Cancel the running tasks (any thread); :func:`run_ranks` then stops."""
        pending, self.pending = list(self.pending), []
        if pending:
            self.client.cancel(pending)

    def workers(self) -> int:
        return len(self.client.scheduler_info(n_workers=-1).get("workers", {}))

    def info(self) -> dict:
        return {"kind": "dask", "scheduler": self.scheduler, "workers": self.workers(),
                "embedded": self.embedded}


@contextmanager
def open_engine(scheduler: str | None = None, workers: int | None = None) -> Iterator[Engine]:
    """A connected engine; the embedded cluster (if any) is shut down on exit."""
    scheduler = scheduler or os.environ.get(ENV_SCHEDULER) or None
    cluster = None
    _quiet_dask()
    try:
        if scheduler:
            client = connect(scheduler)
        else:
            cluster, client = start_private_cluster(workers or os.cpu_count() or 1)
            scheduler = cluster.scheduler_address
        try:
            _check_workers(client)
            yield Engine(client, scheduler, cluster is not None)
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


def start_private_cluster(n_workers: int):
    """(cluster, client): a ``LocalCluster`` on 127.0.0.1 that only holders of this
    run's TLS credentials can use (see the module docstring)."""
    import dask
    from distributed import Client, LocalCluster
    from distributed.security import Security

    security = Security.temporary()
    with dask.config.set(NO_HTTP_ROUTES):  # the workers are started (and configured) here
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               host="127.0.0.1", protocol="tls://", security=security,
                               dashboard_address=None, silence_logs=logging.ERROR,
                               scheduler_kwargs={"dashboard": False,
                                                 "dashboard_address": "127.0.0.1:0"})
    try:
        return cluster, Client(cluster, security=security)
    except BaseException:
        cluster.close()
        raise


def connect(scheduler: str):
    """A client of the external ``scheduler``; :class:`EngineError` (one line) if the
    address is unusable or the scheduler cannot be reached."""
    from distributed import Client
    from distributed.security import Security

    from ..errors import one_line

    scheme = scheduler.split("://", 1)[0].lower() if "://" in scheduler else "tcp"
    if scheme not in SCHEMES:
        raise EngineError(f"Dask scheduler {scheduler}: the {scheme}:// scheme is not "
                          f"supported (use {', '.join(s + '://' for s in SCHEMES)})")
    security = Security()  # the TLS settings of the Dask config and environment
    if scheme in ("tls", "wss") and not (security.tls_ca_file and security.tls_client_cert):
        raise EngineError(f"Dask scheduler {scheduler}: no TLS credentials; set "
                          "distributed.comm.tls.ca-file, .client.cert and .client.key in the "
                          "Dask config (or DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
                          "..._CLIENT__CERT, ..._CLIENT__KEY)")
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT_S, security=security)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise EngineError(f"cannot reach Dask scheduler {scheduler}: "
                          f"{one_line(str(exc), 200)}") from None


def _quiet_dask() -> None:
    """Dask logs every connection at INFO (and a traceback for each stream closed at
    shutdown): keep stderr for the rank bar unless ``-v`` asked for debug logs."""
    import distributed  # noqa: F401  (its first import sets its loggers' levels: before ours)

    if logging.getLogger().level > logging.DEBUG:
        for name in ("distributed", "tornado"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _worker_version() -> str:
    from ... import __version__

    return __version__


def _check_workers(client) -> None:
    """Every worker must be able to import sofa_gui (external clusters)."""
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except TimeoutError:
        raise EngineError(f"no Dask workers joined within {CONNECT_TIMEOUT_S} s") from None
    try:
        client.run(_worker_version)
    except Exception as exc:  # ModuleNotFoundError pickled back from a worker
        raise EngineError(f"a Dask worker cannot run sofa_gui tasks ({type(exc).__name__}: "
                          f"{exc}); install sofa-gui on the workers") from None


def run_ranks(engine: Engine, files: list[RankFile], mode: str = "auto", use_cache: bool = True,
              on_done: Callable[[RankSummary], None] | None = None,
              cancelled: Callable[[], bool] | None = None) -> list[RankSummary]:
    """One task per rank file; summaries in rank order (failed ranks carry ``error``).

    Raises :class:`~sofa_gui.core.progress.Cancelled` once ``cancelled()`` is true or
    the tasks were cancelled (:meth:`Engine.cancel`): a cancelled rank did not fail,
    so it is never reported (nor handed to ``on_done``) as a failed summary.
    """
    from distributed import as_completed

    run = uuid.uuid4().hex[:8]
    futures = {}
    for f in files:
        fut = engine.client.submit(rank_task, str(f.path), f.rank, mode, use_cache,
                                   key=f"sofa-rank-{f.rank}-{run}", pure=False, retries=RETRIES)
        futures[fut.key] = (fut, f)
    out: list[RankSummary] = []
    t0 = time.perf_counter()
    engine.pending = [v[0] for v in futures.values()]
    try:
        for fut in as_completed(list(engine.pending)):
            _, f = futures.pop(fut.key)
            if fut.status == "cancelled" or (cancelled is not None and cancelled()):
                raise Cancelled
            out.append(_result(fut, f, t0))
            fut.release()
            if on_done is not None:
                on_done(out[-1])  # may raise (the app's Cancelled): tasks are cancelled below
    finally:
        engine.cancel()
        engine.pending = []
    out.sort(key=lambda s: s.rank)
    return out


def _result(fut, f: RankFile, t0: float) -> RankSummary:
    if fut.status == "finished":
        return fut.result()
    exc = fut.exception() if fut.status == "error" else None
    if exc is None:
        why = f"task {fut.status}"
    elif type(exc).__name__ == "KilledWorker":
        why = "the worker running this rank died every time it was tried (out of memory?)"
    else:
        why = f"{type(exc).__name__}: {exc}"
    return RankSummary.failed(f.rank, str(f.path), why,
                              seconds=round(time.perf_counter() - t0, 4))
