"""Decode a trace in a child process so the GUI's Python thread never waits on the GIL.

Decoding a big JSON trace is one long C call (msgspec / orjson) that holds the GIL,
so a worker *thread* would freeze the GUI for as long. Instead a spawned child runs
:func:`~sofa_gui.core.importers.load_trace`, which writes the Arrow cache, and the
parent then memory-maps that cache (:func:`~sofa_gui.core.store.load_cached`), which
costs milliseconds. Progress and the outcome travel over a pipe; cancelling sets an
event the child's ``check_cancelled`` sees and, if it is stuck in a C call, kills it.

It lives outside ``sofa_gui.qt`` on purpose: the spawned child imports the
module that holds its entry point, and importing anything under ``sofa_gui.qt``
loads PySide6 and pyqtgraph (~0.6 s and tens of MB the child does not need).
Qt-free; used by :mod:`sofa_gui.app.jobs`.

Like any ``multiprocessing`` spawn user, a script that starts the app must
guard its entry (``if __name__ == "__main__":``); the ``sofa-gui`` commands do,
and a frozen build must call ``multiprocessing.freeze_support()`` first.
"""

from __future__ import annotations

import gzip
import logging
import multiprocessing as mp
import os
import threading
import time
import traceback
import zlib
from pathlib import Path

from ..core.errors import TraceFormatError
from ..core.progress import Cancelled

log = logging.getLogger(__name__)

#: Seconds the child gets to stop by itself after a cancel before it is killed.
_GRACE_S = 0.3
_POLL_S = 0.05
_SEND_INTERVAL_S = 0.05
#: Niceness added to background work (child process, job threads) so the GUI
#: thread wins the CPU when cores are scarce.
BACKGROUND_NICE = 10


class _PipeProgress:
    """Core ``Progress`` in the child: throttled reports up the pipe, cancel via an event.

    ``tag`` is "progress" for the load, "aprogress" for the analysis (which may run
    while the parent still waits for the trace); ``lock`` serialises sends from two
    threads (a message is one write of under 4 KiB, which a pipe keeps whole, so the
    forked cache writer of :func:`_analyse_while_writing` may send too).
    """

    def __init__(self, conn, cancel_event, lock=None, tag: str = "progress"):
        self._conn, self._cancel = conn, cancel_event
        self._lock = lock or threading.Lock()
        self._tag = tag
        self._last = 0.0

    def update(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last >= _SEND_INTERVAL_S or fraction >= 1.0:
            self._last = now
            _send(self._conn, self._lock, (self._tag, float(fraction), message))
        self.check_cancelled()

    def check_cancelled(self) -> None:
        if self._cancel.is_set():
            raise Cancelled()


def _send(conn, lock, msg: tuple) -> None:
    with lock:
        try:
            conn.send(msg)
        except OSError:  # the parent stopped listening (took a handoff, cancelled, exited)
            pass


def _child_main(path: str, conn, cancel_event, options=None, renice: bool = True) -> None:
    """Child entry point: load (and cache) ``path``, send one outcome message; then, with
    analysis ``options``, analyze it into the analysis cache (the parent meanwhile
    indexes the timeline on the other core) and send ``("analyzed",)``.

    When the cache cannot be written (read-only or full), the tables are handed
    over in a private temp folder instead, so the parent never decodes twice.
    """
    from ..core import store
    from ..core.importers import open_trace

    if renice and hasattr(os, "nice"):
        os.nice(BACKGROUND_NICE)  # the GUI process gets the cores first
    # may start the parallel decode's pool (a daemonic process may not); its workers die
    # with this child (parallel.die_with_parent) when it is killed on cancel or app exit
    mp.current_process().daemon = False
    lock = threading.Lock()
    progress = _PipeProgress(conn, cancel_event, lock)
    try:
        trace, entry = open_trace(path, progress, use_cache=True)
        if options is not None and entry is not None:
            _analyse_while_writing(path, trace, entry, options, conn, cancel_event, lock)
            return
        if entry is not None:
            trace.cache_entry = store.save_cached(path, trace, entry)
        _send_trace(trace, conn, lock)
        if options is not None and trace.cache_entry is not None:  # it came from the cache
            from ..core.analysis.cache import analyze_cached

            analyze_cached(trace, options, _PipeProgress(conn, cancel_event, lock, "aprogress"))
            _send(conn, lock, ("analyzed",))
    except Cancelled:
        _send(conn, lock, ("cancelled",))
    except TraceFormatError as exc:
        _send(conn, lock, ("error", exc.path, exc.reason))
    except BaseException as exc:  # report, never hang the parent
        _send(conn, lock, ("crash", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        conn.close()


def _send_trace(trace, conn, lock) -> None:
    """Tell the parent where the trace is: its cache entry, else a handoff folder."""
    from ..core import store

    cached = trace.cache_entry is not None
    handoff = None if cached else store.write_handoff(trace)
    _send(conn, lock, ("done", cached, handoff and str(handoff)))


def _analyse_while_writing(path, trace, entry, options, conn, cancel_event, lock) -> None:
    """Write the trace cache in a forked process while this one analyzes the trace.

    The write overlaps the analysis instead of coming before it (the CLI's
    ``analyze --no-cache`` writes nothing; this keeps the app's cold open close to it).
    A fork, not a thread: with a second thread alive the analysis may not fork its own
    side work (core/analysis/aside.py), so the pattern agreement check (~0.4 s of the
    984k-event trace) ran in line, on the way to the app's panels. The writer sees the
    trace copy-on-write and tells the parent "done" itself; its exit status says whether
    the cache entry was written. The parent gets "analyzed" once the results are stored.
    """
    import dataclasses

    from ..core import store
    from ..core.analysis import cache
    from ..core.analysis.pipeline import analyze

    def write() -> bool:
        trace.cache_entry = store.save_cached(path, trace, entry)
        _send_trace(trace, conn, lock)
        return trace.cache_entry is not None

    writer = _Writer(write)
    try:
        result = analyze(trace, options, _PipeProgress(conn, cancel_event, lock, "aprogress"))
    except BaseException:
        writer.stop()
        raise
    trace.cache_entry = entry if writer.join() else None
    if trace.cache_entry is not None:  # else the parent read the handoff and stopped us
        cache.save(trace.cache_entry, dataclasses.asdict(options), result)
        _send(conn, lock, ("analyzed",))  # stored or not: the parent reads the cache or redoes it


class _Writer:
    """Runs ``write() -> bool`` in a forked child (a thread where fork is unsafe: more
    than one thread, or no fork); :meth:`join` returns its result."""

    def __init__(self, write):
        self._pid = 0
        self._thread = None
        self._ok = False
        if hasattr(os, "fork") and threading.active_count() == 1:
            parent = os.getpid()
            self._pid = os.fork()
            if self._pid == 0:
                _writer_child(write, parent)
            return
        self._thread = threading.Thread(target=self._run, args=(write,),
                                        name="sofa-cache-writer")
        self._thread.start()

    def _run(self, write) -> None:
        self._ok = write()

    def join(self) -> bool:
        if self._thread is not None:
            self._thread.join()
            return self._ok
        _pid, status = os.waitpid(self._pid, 0)
        return os.waitstatus_to_exitcode(status) == 0

    def stop(self) -> None:
        """Cancelled: end the writer now (its temp folder is swept by a later write)."""
        if self._thread is not None:
            self._thread.join()
            return
        try:
            os.kill(self._pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(self._pid, 0)


def _writer_child(write, parent: int) -> None:
    """The forked writer: write, exit 0 when the cache entry was written; never return."""
    code = 2
    try:
        from ..core.importers.chrome.parallel import die_with_parent

        die_with_parent(parent)  # the loader killed (cancel, app exit): stop writing too
        code = 0 if write() else 1
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def decoded_bytes(path: Path, enough: int) -> int:
    """Bytes the importers would read from ``path`` (a file or every file in a folder),
    gzip files counted *decompressed*, counted only up to ``enough``.

    A 200 KB gzip can hold 1 GB; guessing its size from the compressed one would let
    such a file decode inside the app's process. Counting costs at most
    ``enough`` bytes of decompression, in 64 KiB reads.
    """
    total = 0
    try:
        files = [path] if not path.is_dir() else (f for f in path.rglob("*") if f.is_file())
        for f in files:
            try:
                total += _decoded_size(f, enough - total)
            except OSError:
                continue  # unreadable: the importer says so; the others still count
            if total >= enough:
                break
    except OSError:
        pass  # the folder cannot be listed (further): count what was seen
    return total


def _decoded_size(path: Path, budget: int) -> int:
    with open(path, "rb") as raw:
        if raw.read(2) != b"\x1f\x8b":
            return os.fstat(raw.fileno()).st_size
        raw.seek(0)
        n = 0
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as z:
                while n < budget:
                    got = len(z.read(min(1 << 16, budget - n)))
                    if not got:
                        break
                    n += got
        except (OSError, EOFError, zlib.error):
            pass  # corrupt: the importer says so, wherever it runs
        return n


#: What a loader child imports before it is given a path (see :func:`prestart`).
LOADER_MODULES = (
    "sofa_gui.core.store",
    "sofa_gui.core.importers.chrome.trace",
    "sofa_gui.core.analysis.cache",
    "sofa_gui.core.analysis.pipeline",
    "sofa_gui.core.analysis.iterations",
    "sofa_gui.core.analysis.breakdown",
    "sofa_gui.core.analysis.run_facts",
    "sofa_gui.core.analysis.findings",
)


def _standby_main(jobs, conn, cancel_event) -> None:
    """A loader started ahead of time: import what a load needs, then wait for the
    ``(path, options)`` to load; the parent closing ``jobs`` instead ends it."""
    import importlib

    if hasattr(os, "nice"):
        os.nice(BACKGROUND_NICE)
    for name in LOADER_MODULES:
        importlib.import_module(name)
    try:
        path, options, env = jobs.recv()
    except (EOFError, OSError):
        conn.close()
        return
    finally:
        jobs.close()
    _adopt_env(env)
    _child_main(path, conn, cancel_event, options, renice=False)


#: Environment a load depends on (the cache and temp folders): a spare loader started
#: earlier takes the parent's values at the time of the open.
_LOAD_ENV = ("SOFA_GUI_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "TMPDIR", "TEMP", "TMP")


def _load_env() -> dict:
    return {k: os.environ.get(k) for k in _LOAD_ENV}


def _adopt_env(env: dict) -> None:
    import tempfile

    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    tempfile.tempdir = None  # computed again from the adopted TMPDIR


class _Spare:
    """A started :func:`_standby_main` child and the parent's ends of its pipes."""

    def __init__(self):
        ctx = mp.get_context("spawn")
        self.recv, send = ctx.Pipe(duplex=False)
        jobs, self.jobs = ctx.Pipe(duplex=False)
        self.cancel = ctx.Event()
        self.proc = ctx.Process(target=_standby_main, args=(jobs, send, self.cancel),
                                name="sofa-gui-loader", daemon=True)
        self.proc.start()
        send.close()
        jobs.close()


_spare_lock = threading.Lock()
_spare: _Spare | None = None
_keep_spare = False


def prestart() -> None:
    """Start a loader child now, so that the first open (and each open after it) finds
    one with Python started and its modules imported (~0.6 s CPU saved on the path
    to the first panel). The app calls it before it builds its window."""
    global _keep_spare
    if not child_available():
        return
    _keep_spare = True
    _replace_spare()


def _replace_spare() -> None:
    global _spare
    with _spare_lock:
        if _keep_spare and (_spare is None or not _spare.proc.is_alive()):
            _spare = _Spare()


def stop_spares() -> None:
    """No more spare loaders; the waiting one (if any) is told to exit."""
    global _keep_spare
    _keep_spare = False
    spare = _take_spare()
    if spare is not None:
        spare.jobs.close()  # it sees EOF and exits
        spare.recv.close()
        spare.proc.join(5.0)
        if spare.proc.is_alive():
            spare.proc.kill()


def _take_spare() -> _Spare | None:
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    if spare is not None and not spare.proc.is_alive():
        spare.recv.close()
        spare.jobs.close()
        return None
    return spare


class ChildLoad:
    """A child decoding ``path`` into the cache and, with ``options``, analyzing it after.

    :meth:`wait_trace` returns once the trace cache is written; the child then
    goes on with the analysis while the caller maps the trace, and
    :meth:`wait_analysis` waits for its results to be in the analysis cache.
    Always call :meth:`stop`.
    """

    def __init__(self, path: Path, state, options=None):
        self._state = state
        spare = _take_spare()
        if spare is not None:  # started ahead of time: hand it the path
            self._recv, self._cancel, self._proc = spare.recv, spare.cancel, spare.proc
            spare.jobs.send((str(path), options, _load_env()))
            spare.jobs.close()
        else:
            ctx = mp.get_context("spawn")
            self._recv, send = ctx.Pipe(duplex=False)
            self._cancel = ctx.Event()
            self._proc = ctx.Process(target=_child_main,
                                     args=(str(path), send, self._cancel, options),
                                     name="sofa-gui-loader", daemon=True)
            self._proc.start()
            send.close()
        state.on_cancel(self._cancel.set)

    def wait_trace(self, progress=None):
        """Wait for the decode; the child's progress goes to ``progress`` (default: the
        job's state). Returns True when the cache entry was written (the caller then
        reads it), the Trace itself when the cache was not writable and the child
        handed the tables over in a temp folder, False when neither worked. Raises
        TraceFormatError for bad input, Cancelled when cancelled, RuntimeError when
        the child died."""
        msg = _pump(self._proc, self._recv, self._state, progress or self._state, "done")
        return bool(msg[1]) or _take_handoff(msg[2])

    def wait_analysis(self, progress=None) -> bool:
        """True when the child stored the analysis; False if it died or failed doing so."""
        try:
            _pump(self._proc, self._recv, self._state, progress or self._state, "analyzed")
        except (RuntimeError, TraceFormatError):
            log.warning("background analysis failed; analyzing in-process", exc_info=True)
            return False
        return True

    def stop(self) -> None:
        """End the child now (waits up to ~1.3 s: grace, then kill)."""
        _stop(self._proc, self._cancel)
        self._recv.close()
        _replace_spare()

    def finish(self) -> None:
        """The child has sent all we need: let it exit without waiting for it (a big
        child takes a few hundred ms to tear down); a thread reaps or kills it, then
        starts the next spare loader if :func:`prestart` asked for them."""
        self._recv.close()

        def reap():
            _stop(self._proc, self._cancel)
            _replace_spare()

        threading.Thread(target=reap, daemon=True, name="sofa-loader-reaper").start()


def _pump(proc, recv, state, progress, until: str) -> tuple:
    """Forward the child's progress until its ``until`` message, which is returned.
    While waiting for the trace ("done") only load progress is shown; the analysis's
    ("aprogress", which may already run) only while waiting for it."""
    shown = "progress" if until == "done" else "aprogress"
    while True:
        if state.cancelled:
            raise Cancelled()
        if not recv.poll(_POLL_S):
            if not proc.is_alive() and not recv.poll(0):
                raise RuntimeError(f"trace loader process died (exit code {proc.exitcode})")
            continue
        try:
            msg = recv.recv()
        except EOFError:
            raise RuntimeError(
                f"trace loader process died (exit code {proc.exitcode})") from None
        tag = msg[0]
        if tag in ("progress", "aprogress"):
            if tag == shown:
                progress.update(msg[1], msg[2])
        elif tag == until:
            return msg
        elif tag == "cancelled":
            raise Cancelled()
        elif tag == "error":
            raise TraceFormatError(msg[1], msg[2])
        else:
            raise RuntimeError(f"trace loader failed: {msg[1]}\n{msg[2]}")


def _take_handoff(folder: str | None):
    """The trace in the child's handoff folder (then removed; the maps keep it), or False."""
    from ..core import store

    if folder is None:
        return False
    try:
        return store.read_handoff(Path(folder))
    except Exception as exc:  # damaged or vanished: the caller decodes in-process
        log.warning("could not read the loader's handoff (%s)", exc)
        return False


def _stop(proc, cancel_event) -> None:
    """Let the child exit; kill it if a cancel left it stuck in a long C call."""
    if proc.is_alive():
        cancel_event.set()
        proc.join(_GRACE_S)
    if proc.is_alive():
        proc.kill()
        proc.join(1.0)
    if hasattr(proc, "close") and not proc.is_alive():
        proc.close()


def child_available() -> bool:
    """False where spawning would not work (set SOFA_GUI_LOAD_IN_THREAD=1 to force)."""
    return os.environ.get("SOFA_GUI_LOAD_IN_THREAD", "") not in ("1", "true", "yes")
