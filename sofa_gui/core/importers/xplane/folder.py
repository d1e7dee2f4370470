"""TensorBoard profile folders: ``logdir/plugins/profile/<run>/<host>.xplane.pb``.

``tf.profiler.experimental.start(logdir)``, ``jax.profiler.trace(logdir)`` and the
Keras TensorBoard callback write one run folder per capture (named by its start
time, ``2026_12_01_10_12_35``) holding one ``<host>.xplane.pb`` per host; a capture
shared gzip-compressed holds ``<host>.xplane.pb.gz`` instead, read the same. Any folder
on the way down opens: the logdir, ``plugins``, ``plugins/profile``, a run folder,
or any folder with ``.xplane.pb`` / ``.xplane.pb.gz`` files. Several hosts of one run
load as ranks (in host-name order); of several runs the newest opens and the others are
listed in the load report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: How deep below the opened folder run folders are looked for (logdir/train/plugins/
#: profile/run is 4 levels) and how many folders are looked at, at most.
MAX_DEPTH = 5
MAX_FOLDERS = 2000
SUFFIX = ".xplane.pb"
#: A host's file, plain or gzip-compressed (``gzip`` leaves ``<host>.xplane.pb.gz``).
SUFFIXES = (SUFFIX, SUFFIX + ".gz")
_RUN_STAMP = re.compile(r"^\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d")


@dataclass
class Run:
    folder: Path
    files: list[Path]  # one per host, in host-name order

    @property
    def hosts(self) -> list[str]:
        return [host_of(f) for f in self.files]

    def sort_key(self) -> tuple:
        """Newest last: TensorBoard's time-stamped run names, else file times."""
        stamp = _RUN_STAMP.match(self.folder.name)
        mtime = max(f.stat().st_mtime_ns for f in self.files)
        return (stamp.group(0) if stamp else "", mtime, str(self.folder))


def host_of(file: Path) -> str:
    """``vm`` of ``vm.xplane.pb`` and of ``vm.xplane.pb.gz``."""
    name = file.name
    return name[: -len(SUFFIX) - (3 if name.endswith(".gz") else 0)]


def xplane_files(folder: Path) -> list[Path]:
    """The folder's ``*.xplane.pb`` / ``*.xplane.pb.gz`` files (direct children), one per
    host in host-name order: where ``gzip -k`` left both, the plain file."""
    try:
        files = sorted((p for p in folder.iterdir() if p.name.endswith(SUFFIXES)
                        and p.is_file()), key=lambda p: (host_of(p), p.name))
    except OSError:
        return []
    chosen: dict[str, Path] = {}
    for p in files:
        chosen.setdefault(host_of(p), p)  # a plain name sorts before its .gz
    return list(chosen.values())


def find_runs(folder: Path) -> list[Run]:
    """Run folders at or below ``folder`` (breadth-first, bounded), oldest first."""
    runs, level, seen = [], [Path(folder)], 0
    for _ in range(MAX_DEPTH + 1):
        nxt = []
        for d in level:
            seen += 1
            if seen > MAX_FOLDERS:
                break
            files = xplane_files(d)
            if files:
                runs.append(Run(d, files))
                continue
            try:
                nxt.extend(sorted(p for p in d.iterdir() if p.is_dir() and not p.is_symlink()))
            except OSError:
                continue
        level = nxt
        if not level:
            break
    return sorted(runs, key=Run.sort_key)


def describe_others(chosen: Run, runs: list[Run], root: Path) -> str:
    """One load-report note naming the runs that were not opened."""
    others = [r for r in runs if r is not chosen]
    names = ", ".join(_rel(r.folder, root) for r in others[-8:])
    more = f" and {len(others) - 8} more" if len(others) > 8 else ""
    return (f"{len(runs)} profile runs found; opened the newest, {_rel(chosen.folder, root)}; "
            f"others (open their folder to see them): {names}{more}")


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root)) or "."
    except ValueError:
        return str(p)
