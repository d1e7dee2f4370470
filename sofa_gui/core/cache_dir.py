"""The cache belongs to the user: a root and entries nobody else wrote or can write.

The cache root is created private (0700). A root that is not a folder the user owns,
that others may write to (a shared 1777 directory, a group-writable one) or that the
user cannot read and write (mode 000) is not used at all: the program opens traces
without a cache and says so in one warning line (once per root and reason). An entry
(a trace's folder, its files, an analysis file) must be owned by the user and writable
by nobody else; entries are written with mode 0600 in a 0700 folder, whatever the umask.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

_warned: set[tuple[str, str]] = set()


def warn_once(where: Path, problem: str) -> None:
    """One warning line per cache root and reason for the life of the process."""
    key = (str(where), problem)
    if key not in _warned:
        _warned.add(key)
        log.warning("not using the cache in %s: %s; opening without a cache", where, problem)


def ownership_problem(st: os.stat_result) -> str | None:
    """Why a file or folder with this status is not the user's alone, or None."""
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by this user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):03o})"
    return None


def root_problem(root: Path) -> str | None:
    """Create ``root`` (0700) if absent; why it cannot be used as the cache, or None."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(root)
    except OSError as exc:
        return f"cannot create it ({exc.strerror or type(exc).__name__})"
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    problem = ownership_problem(st)
    if problem is not None:
        return problem
    if stat.S_IMODE(st.st_mode) & 0o700 != 0o700 or not os.access(root, os.R_OK | os.W_OK
                                                                  | os.X_OK):
        return f"not accessible (mode {stat.S_IMODE(st.st_mode):03o})"
    return None


def usable(root: Path) -> bool:
    """Whether ``root`` may be used as the cache (else one warning line, once)."""
    problem = root_problem(root)
    if problem is not None:
        warn_once(root, problem)
    return problem is None


def private_file_problem(path: Path) -> str | None:
    """Why ``path`` (not followed if a link) is not a file of the user's alone, or None.
    Raises OSError (FileNotFoundError: absent)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return f"{path.name} is not a regular file"
    problem = ownership_problem(st)
    return None if problem is None else f"{path.name} is {problem}"


def entry_problem(entry: Path) -> str | None:
    """Why the cache entry folder ``entry`` (and every file in it) is not the user's
    alone, or None. Raises OSError (FileNotFoundError: absent)."""
    st = os.lstat(entry)
    if not stat.S_ISDIR(st.st_mode):
        return "the entry is not a folder"
    problem = ownership_problem(st)
    if problem is not None:
        return f"the entry is {problem}"
    for child in os.scandir(entry):
        problem = private_file_problem(Path(child.path))
        if problem is not None:
            return problem
    return None


def make_private(folder: Path) -> None:
    """Make every file directly in ``folder`` 0600 and the folder 0700."""
    for child in os.scandir(folder):
        if child.is_file(follow_symlinks=False):
            os.chmod(child.path, 0o600)
    os.chmod(folder, 0o700)
