"""A large gzip trace decompressed by a child process while the caller decodes it.

Inflating a Kineto trace's gzip costs ~1 s of CPU per 1 GB of JSON, all of it on the
decode's path when one process does both. A child process (fork in the CLI, spawn in
the app: :func:`.workers.start_context`) reads the file and sends the decompressed text
through a pipe; the caller reads it straight into its blocks, as it would read the gzip
stream (``read(n)`` returns ``n`` bytes until the end), so the decode and its pieces are
the same. After the text the child sends the outcome on a second pipe: empty when the
gzip data was whole, else the kind and text of the error the caller raises in its
place (a truncated or corrupt file says the same as when read in one process).

The caller still caps the decompressed size (:class:`..opening.Capped` wraps this
stream), and closing the stream (cancel, an error) stops the child.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from ..opening import Capped
from .cores import usable_cpus
from .workers import die_with_parent, exit_text, start_context

#: Gzip files at least ``SOFA_GUI_PIPE_GZIP_MIN_BYTES`` large (compressed) are inflated by
#: a child process; unset, none is: on an idle 2-core machine the child made the open
#: 1.10-1.50x slower than inflating in the decoding process (best of 2 on five layouts of a
#: 984k-event trace), the pipe's copies costing more than the inflating it takes over.
#: ``SOFA_GUI_DECODE_PARTS=1`` or a single usable core keeps every read in-process.
PIPE_GZIP_ENV = "SOFA_GUI_PIPE_GZIP_MIN_BYTES"
_MESSAGE = 1 << 20
_ERRORS = {"EOFError": EOFError, "BadGzipFile": gzip.BadGzipFile, "zlib.error": zlib.error}
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux fcntl: a pipe's buffer size (fewer wake-ups per message)


def _env_int(name: str, default: int) -> int:
    try:
        return int(float(os.environ[name]))
    except (KeyError, ValueError):
        return default


def _one_process() -> bool:
    """Whether the read must stay in one process: ``SOFA_GUI_DECODE_PARTS=1`` (as for a
    plain file) or one usable core, where the child would only compete with its parent."""
    return _env_int("SOFA_GUI_DECODE_PARTS", 2) <= 1 or usable_cpus() < 2


def piped(path: Path):
    """(stream, raw, size) for :class:`.decode.EventStream` when ``path`` is a gzip file
    worth a child process, else None (the caller decompresses itself)."""
    import multiprocessing as mp

    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError:
        return None
    least = _env_int(PIPE_GZIP_ENV, -1)
    if (magic != b"\x1f\x8b" or least < 0 or size < least or mp.current_process().daemon
            or _one_process()):
        return None
    try:
        stream = PipedGzip(Path(path), size)
    except OSError:
        return None
    return Capped(stream, Path(path)), stream, size


class PipedGzip:
    """The decompressed text of a gzip file, inflated by a child process."""

    def __init__(self, path: Path, size: int):
        ctx = start_context()
        self._data, data_end = ctx.Pipe(duplex=False)  # raw bytes (its fd is read as is)
        self._outcome, outcome_end = ctx.Pipe(duplex=False)
        _widen(self._data)
        self._done = ctx.RawValue("q", 0)  # compressed bytes the child has read
        self.process = ctx.Process(target=inflate, args=(str(path), data_end, outcome_end,
                                                       self._done, os.getpid()), daemon=True)
        self.process.start()
        data_end.close()
        outcome_end.close()
        self._ended = False

    def read(self, n: int = -1) -> bytes:
        """``n`` bytes (fewer only at the end), read straight into one buffer."""
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(_MESSAGE), b""))
        out = bytearray(n)
        view, got, fd = memoryview(out), 0, self._data.fileno()
        while got < n and not self._ended:
            k = os.readv(fd, [view[got:]])
            if k == 0:
                self._end()
            got += k
        del view
        if got < n:
            del out[got:]
        return out

    def _end(self) -> None:
        self._ended = True
        try:
            outcome = self._outcome.recv_bytes()
        except (EOFError, OSError):
            self.process.join(1)
            raise OSError(f"the process decompressing the file ended early "
                          f"({_how(self.process.exitcode)}); nothing was loaded") from None
        if outcome:
            kind, _, text = outcome.decode("utf-8", "replace").partition("\0")
            raise _ERRORS.get(kind, OSError)(text)

    def tell(self) -> int:
        """Compressed bytes read so far (the stream's progress through the file)."""
        return self._done.value

    def close(self) -> None:
        self._data.close()  # a child still writing gets a broken pipe and ends
        self._outcome.close()
        if self.process.is_alive():
            self.process.join(0.5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


def _how(exitcode) -> str:
    return "still running" if exitcode is None else exit_text(exitcode)


def _widen(conn) -> None:
    """A 1 MiB pipe buffer where the system allows it (Linux); else the default."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, OSError, ValueError):
        pass


def inflate(path: str, data, outcome_conn, done, parent: int) -> None:
    """The child: the file's decompressed text into pipe ``data``, then the outcome."""
    die_with_parent(parent)
    outcome = b""
    fd = data.fileno()
    try:
        with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as text:
            while chunk := text.read(_MESSAGE):
                done.value = raw.tell()
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
    except (BrokenPipeError, ConnectionResetError):
        return  # the reader closed its end: nothing more is wanted
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
        kind = "zlib.error" if isinstance(exc, zlib.error) else type(exc).__name__
        outcome = f"{kind}\0{exc}".encode("utf-8", "replace")
    finally:
        data.close()
    try:
        outcome_conn.send_bytes(outcome)
    except OSError:
        pass
    finally:
        outcome_conn.close()
