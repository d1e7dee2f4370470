"""One folder per process for the decode workers' part files (``sofa-*-part-*``).

A parallel decode writes each worker's args and columns to files the parent maps back.
They live in ``<cache root>/spill/<pid>-<start>/``, made 0700 on first use and removed
when the process exits; a process killed with SIGKILL cannot remove its own, so every
new one sweeps the folders whose owner is gone (no such pid, or a pid reused by a
process that started at another time).
"""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path

from .. import store

_mine: Path | None = None


def part_dir() -> str | None:
    """This process's spill folder (made, and old ones swept, on first call); None when
    the cache root cannot hold one (the caller then uses the default temp dir)."""
    global _mine
    if _mine is not None and _mine.is_dir():
        return str(_mine)
    root = store.cache_root() / "spill"
    try:
        root.mkdir(parents=True, exist_ok=True)
        sweep(root)
        mine = root / _tag(os.getpid())
        mine.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    atexit.unregister(_remove)
    atexit.register(_remove, os.getpid())
    _mine = mine
    return str(mine)


def sweep(root: Path) -> list[Path]:
    """Remove the spill folders under ``root`` whose owner process is gone; returns them."""
    gone = []
    for d in root.iterdir() if root.is_dir() else []:
        pid = d.name.partition("-")[0]
        if pid.isdigit() and not (_alive(int(pid)) and _tag(int(pid)) == d.name):  # owner
            # gone, or its pid reused by a process that started at another time
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def _remove(owner: int) -> None:
    if os.getpid() == owner:  # not in a forked child
        cleanup()


def cleanup() -> None:
    """Remove this process's spill folder now (a quick exit skips ``atexit``)."""
    global _mine
    if _mine is not None:
        shutil.rmtree(_mine, ignore_errors=True)
        _mine = None


def _tag(pid: int) -> str:
    """``pid-start``: the start time (clock ticks since boot, Linux) tells a reused pid
    from the owner; ``pid-`` where it is unknown or the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return f"{pid}-{stat.rsplit(')', 1)[1].split()[19]}"
    except (OSError, IndexError):
        return f"{pid}-?" if _alive(pid) else f"{pid}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
