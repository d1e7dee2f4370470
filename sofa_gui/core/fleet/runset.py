"""Which files of a run folder are ranks, and which of them the user asked for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import TraceFormatError
from ..importers.chrome.rank_folder import kineto_files, rank_in_name


@dataclass(frozen=True)
class RankFile:
    rank: int
    path: Path
    rank_from: str  # "file name" | "file order"


def rank_files(run_dir) -> list[RankFile]:
    """The folder's Kineto rank files with their rank: the number in the file name
    (``rank-N``...) when every file has a distinct one, else the place in name order.

    Only file names and the first bytes of each file are read (the sniff), so this is
    cheap on the client even for thousands of 1 GB ranks.  A worker later reports
    ``distributedInfo.rank``; :func:`~.cross.final_ranks` prefers it when distinct.
    """
    folder = Path(run_dir).expanduser()
    if not folder.is_dir():
        raise TraceFormatError(folder, "not a folder (fleet needs a folder of rank traces)")
    try:
        files = kineto_files(folder)
    except OSError as exc:
        raise TraceFormatError(folder, f"cannot read: {exc.strerror or exc}") from None
    if not files:
        raise TraceFormatError(folder, "no Kineto/Chrome trace files in this folder")
    named = [rank_in_name(p.name) for p in files]
    if all(r is not None for r in named) and len(set(named)) == len(named):
        return sorted((RankFile(r, p, "file name") for r, p in zip(named, files)),
                      key=lambda f: f.rank)
    return [RankFile(i, p, "file order") for i, p in enumerate(files)]


def parse_ranks(spec: str) -> set[int]:
    """``"0-7,12,40-"``-style selection (an open end means "and above")."""
    out: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            if not dash:
                out.add(int(lo))
            elif not hi:
                out.add(-int(lo) - 1)  # marker: open range from lo
            else:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                out.update(range(a, b + 1))
        except ValueError:
            raise ValueError(f"bad rank selection {part!r} (use e.g. 0-7,12,40-)") from None
    return out


def select(files: list[RankFile], spec: str | None) -> list[RankFile]:
    """The files whose rank is in ``spec`` (all when None)."""
    if not spec:
        return files
    wanted = parse_ranks(spec)
    open_from = min((-m - 1 for m in wanted if m < 0), default=None)
    return [f for f in files
            if f.rank in wanted or (open_from is not None and f.rank >= open_from)]
