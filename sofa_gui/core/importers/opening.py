"""Opening a trace file, plain or gzip, with the decompression capped.

Every importer that reads gzip data (Chrome / Kineto JSON, XProf ``.xplane.pb.gz``)
opens it here. Gzip data may not decompress past :func:`decompressed_limit` (the
machine's memory, or ``SOFA_GUI_MAX_DECOMPRESSED_BYTES``): a small file built to
decompress to more than the machine holds fails with one line instead of exhausting
memory.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from pathlib import Path

from ..errors import TraceFormatError

GZIP_MAGIC = b"\x1f\x8b"
#: Decompressed bytes read at a time by :func:`read_whole` (the cap is checked per block).
_BLOCK = 16 << 20


def gzip_reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "truncated gzip file (compressed data ends before its end marker)"
    if isinstance(exc, gzip.BadGzipFile):
        return f"corrupt gzip data ({exc})"
    if isinstance(exc, zlib.error):
        return f"corrupt gzip data (zlib: {exc})"
    return f"cannot read: {exc}"


def decompressed_limit() -> int:
    """Most bytes gzip data may decompress to: the machine's memory, or the env setting."""
    env = os.environ.get("SOFA_GUI_MAX_DECOMPRESSED_BYTES", "")
    try:
        if env:
            return max(1, int(float(env)))
    except ValueError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 64 << 30


class Capped:
    """A gzip stream that refuses to decompress past :func:`decompressed_limit`."""

    def __init__(self, stream, path: Path):
        self._stream, self._path = stream, path
        self._limit = decompressed_limit()
        self._total = 0

    def read(self, n: int = -1) -> bytes:
        want = self._limit + 1 - self._total
        data = self._stream.read(want if n is None or n < 0 else min(n, want))
        self._total += len(data)
        if self._total > self._limit:
            whose = "the SOFA_GUI_MAX_DECOMPRESSED_BYTES limit" \
                if os.environ.get("SOFA_GUI_MAX_DECOMPRESSED_BYTES") else \
                "this machine's memory; set SOFA_GUI_MAX_DECOMPRESSED_BYTES to allow more"
            raise TraceFormatError(self._path, (
                f"gzip data decompresses to more than {self._limit / 2**20:,.0f} MiB "
                f"({whose}; a decompression bomb?)"))
        return data


def open_text(path: Path):
    """(decompressed stream, raw file) for a plain or gzip-compressed file."""
    raw = open(path, "rb")
    if raw.read(2) == GZIP_MAGIC:
        raw.seek(0)
        return Capped(gzip.GzipFile(fileobj=raw, mode="rb"), Path(path)), raw
    raw.seek(0)
    return raw, raw


def sniff_head(path: Path, limit: int = 1 << 16) -> bytes:
    """Up to ``limit`` decompressed bytes from the start of ``path`` (b'' if unreadable)."""
    try:
        stream, raw = open_text(path)
    except OSError:
        return b""
    try:
        return stream.read(limit)
    except (OSError, EOFError, zlib.error):
        return b""
    finally:
        raw.close()


def is_gzip(path: Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes (False if unreadable)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def read_whole(path: Path) -> bytes:
    """All of ``path``, decompressed when it is gzip (capped, as every gzip read is);
    a truncated or corrupt gzip raises a one-line TraceFormatError saying which.  The
    decompressed blocks go into one growing buffer whose bytes are handed back as they
    are (no joined copy): the payload is held once, plus one block."""
    stream, raw = open_text(path)
    try:
        if stream is raw:
            return raw.read()
        out = io.BytesIO()
        while block := stream.read(_BLOCK):
            out.write(block)
        return out.getvalue()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceFormatError(path, gzip_reason(exc)) from None
    finally:
        raw.close()
