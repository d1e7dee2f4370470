"""A folder of Kineto traces, one per rank (as distributed jobs write them) -> one Trace.

Each file's lanes are grouped under its rank: from ``distributedInfo.rank``, else
a ``rank N`` / ``rank-N`` / ``rank_N`` in the file name, else the file's place in
name order (whichever source gives every file a distinct rank). Every file keeps
its own clock: ranks of one job write epoch-based timestamps (or the same
``baseTimeNanoseconds``), so they line up as they are. The load report is the
sum over the files.

A folder qualifies only with at least two Kineto files and neither SOFA CSVs
nor a recording manifest (those folders belong to their own importers).
"""

from __future__ import annotations

import re
from pathlib import Path

from ...names import visible
from ...progress import Progress
from ...trace import Trace
from ..confidence import Confidence
from .file_data import FileData
from .trace import RankedFile, has_json_suffix, header_rank, load_files, rank_from_header, sniff

_RANK_IN_NAME = re.compile(r"rank[-_ ]?(\d+)", re.IGNORECASE)
#: Files that make a folder a SOFA logdir (see sofa_logdir) or a recording.
_OTHER_FORMATS = {"sofa_time.txt", "gputrace.csv", "cputrace.csv", "cuda_api_trace.csv",
                  "strace.csv", "pystacks.csv", "nettrace.csv", "mpstat.csv", "vmstat.csv",
                  "nvsmi_trace.csv", "netstat.csv", "diskstat.csv", "manifest.json"}


def _natural_key(name: str) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def kineto_files(folder: Path) -> list[Path]:
    """The folder's Chrome/Kineto trace files (direct children), in natural name order."""
    files = [p for p in folder.iterdir() if p.is_file() and has_json_suffix(p)]
    files.sort(key=lambda p: _natural_key(p.name))
    return [p for p in files if sniff(p) >= 0.9]


def left_out(folder: Path, used: list[Path]) -> list[str]:
    """A load-report note per file in ``folder`` that is not one of the loaded traces."""
    used_names = {p.name for p in used}
    notes = []
    for p in sorted(folder.iterdir(), key=lambda p: _natural_key(p.name)):
        if p.name in used_names or p.name.startswith("."):
            continue
        # file names need not be UTF-8: notes go to JSON output, so escape odd bytes
        notes.append(f"{visible(p.name)}: left out ({_why_left_out(p)})")
    return notes


def _why_left_out(p: Path) -> str:
    if p.is_dir():
        return "a folder"
    if not p.is_file():
        return "not a regular file"
    if not has_json_suffix(p):
        return "not a .json or .json.gz file"
    try:
        with open(p, "rb") as f:
            f.read(1)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    return "not a Chrome/Kineto trace"


def rank_in_name(name: str) -> int | None:
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def assign_ranks(datas: list[FileData]) -> list[RankedFile]:
    """Ranks from distributedInfo, else file names, else file order (first that is distinct)."""
    sources = [
        ("distributedInfo", [header_rank(d.header) for d in datas]),
        ("file name", [rank_in_name(d.path.name) for d in datas]),
    ]
    for label, ranks in sources:
        if all(r is not None for r in ranks) and len(set(ranks)) == len(ranks):
            return [RankedFile(d.path, r, label) for d, r in zip(datas, ranks)]
    return [RankedFile(d.path, i, "file order") for i, d in enumerate(datas)]


class RankFolderImporter:
    name = "kineto-ranks"
    suffixes = ()  # a folder

    def can_open(self, path: Path) -> Confidence:
        path = Path(path)
        if not path.is_dir():
            return Confidence.NO
        names = {p.name.lower() for p in path.iterdir()}
        if names & _OTHER_FORMATS:
            return Confidence.NO
        n = len(kineto_files(path))
        # one trace in a folder (a TensorBoard plugin run folder): open it, but let any
        # folder format that recognises more (a SOFA logdir, a profile run) go first
        return Confidence.CONTENT if n >= 2 else Confidence.OWN_NAMES if n == 1 else Confidence.NO

    def load(self, path: Path, progress: Progress) -> Trace:
        path = Path(path)
        files = kineto_files(path)
        if len(files) == 1:  # one trace: its ranks as the file itself says, as when opened
            trace = load_files(path, files, progress, rank_of=rank_from_header)
            trace.meta.load_stats.notes.extend(left_out(path, files))
            return trace
        trace = load_files(path, files, progress, rank_of=assign_ranks)
        trace.meta.load_stats.notes.extend(left_out(path, files))
        trace.meta.format = "kineto-ranks"
        if trace.meta.world_size is None:
            trace.meta.world_size = len(files)
        return trace


IMPORTER = RankFolderImporter()
