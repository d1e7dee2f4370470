"""The decode workers: how they start (fork or spawn, dying with their parent), their pool
started with Ctrl-C held back and stopped without waiting on a worker that died mid-send."""

from __future__ import annotations

import contextlib
import os
import sys
import threading


@contextlib.contextmanager
def sigint_held():
    """Ctrl-C held back while the pool forks its workers and starts its threads (they
    keep it blocked; the workers ignore it): a KeyboardInterrupt raised inside an
    at-fork hook is printed and dropped, and the open went on to exit 0."""
    import signal

    hold = threading.current_thread() is threading.main_thread() and hasattr(
        signal, "pthread_sigmask")
    if hold:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if hold:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class WorkerDied(Exception):
    """A decode worker process ended before its result arrived (killed, out of memory)."""


def workers_of(pool) -> list:
    return list((getattr(pool, "_processes", None) or {}).values())


def exit_text(exitcode: int) -> str:
    if exitcode < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def stop_pool(pool) -> None:
    """Shut the pool down; workers still busy (cancel, an error elsewhere) are killed."""
    if pool is None:
        return
    procs = workers_of(pool)
    died = any(p.exitcode not in (None, 0) for p in procs)
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.kill() if died else p.terminate()
    for p in procs:
        p.join(timeout=5)
    if writer is not None:  # a worker stopped mid-send leaves the pool's reader waiting
        writer.close()  # for the rest: with the workers gone, ours was the last open end
    pool.shutdown(wait=True)  # joins its manager thread: the caller may fork again later


def die_with_parent(parent: int) -> None:
    """Pool-worker start-up: ask the kernel to kill this worker when the process that
    started it dies (Linux ``PR_SET_PDEATHSIG``), so a loader killed on cancel or app exit
    leaves no decode worker behind; a worker whose parent is already gone exits."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    import signal

    # Ctrl-C is the parent's to handle: it stops the workers (no worker traceback, and a
    # worker's KeyboardInterrupt must not pass for a decode error read again serially)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.getppid() != parent:
        os._exit(1)


def start_context():
    """fork where it is safe (one thread, no Qt: the CLI), else spawn (the app)."""
    import multiprocessing as mp

    if (threading.active_count() == 1 and "PySide6" not in sys.modules
            and "fork" in mp.get_all_start_methods()):
        return mp.get_context("fork")
    return mp.get_context("spawn")
