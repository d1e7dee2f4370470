"""What one Chrome file holds once read: its lanes, chunks of columns, counters and flows.

Filled by :class:`~.reader.FileReader` (or merged from the parts of a parallel decode,
:mod:`.parallel`), then put into the builder by :mod:`.lanes` and :mod:`.trace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..source_args import SourceFile
from .ids import IdCodes


class KeyIndex:
    """Packed (pid, tid) lane keys -> local lane ids; a file has few, so a sorted
    array and ``searchsorted`` beat hashing every event.

    Keys added since the last lookup are merged in once, at the next lookup: a
    file with 100k threads must not rebuild the arrays per new thread.
    """

    def __init__(self):
        self._keys = np.zeros(0, np.int64)
        self._vals = np.zeros(0, np.int32)
        self._new_keys: list[int] = []
        self._new_vals: list[int] = []

    def add(self, key: int, value: int) -> None:
        self._new_keys.append(key)
        self._new_vals.append(value)

    def _merge(self) -> None:
        keys = np.concatenate([self._keys, np.array(self._new_keys, np.int64)])
        vals = np.concatenate([self._vals, np.array(self._new_vals, np.int32)])
        self._new_keys, self._new_vals = [], []
        # a key added again wins (as a dict assignment would): keep its last value
        order = np.argsort(keys, kind="stable")
        keys, vals = keys[order], vals[order]
        last = np.append(keys[1:] != keys[:-1], True)
        self._keys, self._vals = keys[last], vals[last]

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Lane id per key, -1 where the key has no lane."""
        if self._new_keys:
            self._merge()
        if not len(self._keys):
            return np.full(len(keys), -1, np.int32)
        pos = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return np.where(self._keys[pos] == keys, self._vals[pos], -1).astype(np.int32)


@dataclass
class LaneInfo:
    """A lane as the file describes it: (pid, tid) codes and what ran on it."""

    pid: int
    tid: int
    klass: str  # "thread" | "annotation" | "global"
    device: int = -1
    stream: int = -1
    device_slices: int = 0


@dataclass
class FileData:
    """Everything read from one file, before it is put into the builder."""

    path: Path
    header: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    chunks: list[dict] = field(default_factory=list)
    lanes: list[LaneInfo] = field(default_factory=list)
    lane_index: KeyIndex = field(default_factory=lambda: KeyIndex())
    process_names: dict[int, str] = field(default_factory=dict)
    process_labels: dict[int, str] = field(default_factory=dict)
    process_sort: dict[int, float] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    thread_sort: dict[tuple[int, int], float] = field(default_factory=dict)
    counters: dict[tuple[int, str], list] = field(default_factory=dict)
    memory: list[tuple] = field(default_factory=list)
    flows: list[dict] = field(default_factory=list)
    bound_flows: list[tuple] = field(default_factory=list)  # (chunk, row, id, in, out)
    begin_end: list[tuple] = field(default_factory=list)
    category_names: list[str] = field(default_factory=list)
    ids: IdCodes = field(default_factory=IdCodes)
    flow_ids: IdCodes = field(default_factory=IdCodes)
    #: the file chunks with ``args_span`` read their args from on demand (else None)
    args_source: SourceFile | None = None
