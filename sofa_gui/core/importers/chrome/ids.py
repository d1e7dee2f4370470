"""Small interning tables the Chrome reader shares across chunks (and rank files).

* :class:`IdCodes` turns ``pid``/``tid``/flow ``id`` values (int or str) into
  int64 codes: numbers (also numeric strings) stay themselves, other strings
  get reserved negative codes and keep their text as a label.
* :class:`NameTable` maps event names to the builder's name ids and caches the
  per-name facts classification needs (ProfilerStep, collective, copy kind).
* :class:`CategoryTable` maps ``cat`` strings to small codes with their Kind.
"""

from __future__ import annotations

import numpy as np

from ...builder import TraceBuilder
from ...kinds import copy_kind_from_name, is_collective, kind_for
from ...trace import Kind

LO = -(1 << 31)  # codes live in [LO, 2**31) so two of them pack into one int64
HI = 1 << 31
ANN_TID = LO + 1  # lane of a device's GPU-side annotations
GLOBAL_PID = LO + 2  # lane of global-scope instant events
_FIRST_SYNTHETIC = LO + 16
SYNTHETIC_BELOW = -(1 << 30)  # codes below this stand for text, not numbers
#: Every name ``kinds.is_collective`` accepts contains one of these (lower-cased); kernel
#: names run to kilobytes, so this substring test spares most of them the regex.
_COLLECTIVE_HINTS = ("nccl", "rccl", "reduce", "gather", "scatter", "alltoall", "all_to_all",
                     "broadcast", "sendrecv", "c10d", "gloo")


def pack(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 lane key from two codes."""
    return (pid.astype(np.int64) << 32) | (tid.astype(np.int64) & 0xFFFFFFFF)


def pack_one(pid: int, tid: int) -> int:
    """:func:`pack` of one (pid, tid)."""
    return (pid << 32) | (tid & 0xFFFFFFFF)


def unpack(key: int) -> tuple[int, int]:
    pid = key >> 32
    tid = ((key & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000
    return pid, tid


class IdCodes:
    """pid/tid values -> int codes in [LO, HI); strings keep a label."""

    def __init__(self):
        self._map: dict = {}  # every value seen (int or str) -> its code
        self.labels: dict[int, str] = {}  # synthetic code -> original text
        self._all_int = True  # so far every value was a plain int in range

    def code(self, v) -> int:
        c = self._map.get(v)
        if c is None:
            c = self._map[v] = self._new(v)
        return c

    def _new(self, v) -> int:
        if v.__class__ is int and _FIRST_SYNTHETIC < v < HI:
            return v
        self._all_int = False
        if isinstance(v, str):
            s = v.strip()
            if s.lstrip("-").isdigit() and _FIRST_SYNTHETIC < int(s) < HI:
                return int(s)
        c = _FIRST_SYNTHETIC + len(self.labels)
        self.labels[c] = str(v)
        return c

    def codes(self, values: list) -> np.ndarray:
        # plain ints in range are their own codes, converted in C; tried whenever the
        # first value is one (a trace with text tids still has int pids)
        out = _plain_ints(values)
        if out is not None:
            return out
        self._all_int = False
        return self._mapped(values)

    def int_codes(self, values: list) -> np.ndarray | None:
        """The codes if every value so far and here is a plain int in range, else None."""
        return _plain_ints(values) if self._all_int else None

    def _mapped(self, values: list) -> np.ndarray:
        n = len(values)
        get = self._map.__getitem__
        try:
            return np.fromiter(map(get, values), np.int64, n)
        except (KeyError, TypeError):
            for v in dict.fromkeys(values):  # first-seen order: codes do not depend on hashing
                if v not in self._map:
                    self.code(v)
            return np.fromiter(map(get, values), np.int64, n)

    def label(self, c: int) -> str:
        return self.labels.get(c, str(c))

    def synthetic(self) -> dict[int, object]:
        """Code -> the value it was made for, for every text (synthetic) code."""
        return {c: v for v, c in self._map.items() if c < SYNTHETIC_BELOW}

    def number(self, c: int) -> int:
        """The numeric value behind a code, -1 for text (``"stream 7"`` gives 7)."""
        text = self.labels.get(c)
        if text is None:
            return c
        digits = text.split()[-1] if text.split() else ""
        return int(digits) if digits.isdigit() else -1


def _plain_ints(values: list) -> np.ndarray | None:
    """``values`` as int64 if every one is a plain int in the codes' range, else None."""
    n = len(values)
    if n == 0:
        return np.zeros(0, np.int64)
    if values[0].__class__ is not int:
        return None
    try:
        out = np.fromiter(values, np.int64, n)
    except (ValueError, TypeError, OverflowError):
        return None
    return out if out.min() > _FIRST_SYNTHETIC and out.max() < HI else None


class _AutoDict(dict):
    """A dict that fills a missing key with ``make(key)`` (which stores it), so
    ``map(d.__getitem__, keys)`` interns new keys without leaving C."""

    def __init__(self, make):
        super().__init__()
        self._make = make

    def __missing__(self, key):
        return self._make(key)


class NameTable:
    """Event names -> builder name ids, with cached per-name classification."""

    def __init__(self, builder: TraceBuilder):
        self._b = builder
        self._ids: dict[str, int] = _AutoDict(self._add)
        self._names: list[str] = []
        self._step = np.zeros(0, bool)
        self._coll = np.zeros(0, np.int8)  # -1 unknown, 0 no, 1 yes
        self._copy = np.zeros(0, np.int8)  # -1 unknown, else CopyKind

    def ids(self, names: list[str]) -> np.ndarray:
        """Name ids (new names are added)."""
        return np.fromiter(map(self._ids.__getitem__, names), np.int32, len(names))

    def id(self, name: str) -> int:
        return self._ids[name]

    def texts(self) -> list[str]:
        """Every name added, in id order (the table's own builder must be fresh)."""
        names = list(self._ids)
        if [self._ids[n] for n in names] != list(range(len(names))):
            raise ValueError("name ids are not 0..n-1 in insertion order")
        return names

    def _add(self, name: str) -> int:
        i = self._b.intern(name)
        self._ids[name] = i
        if i >= len(self._step):
            grow = max(i + 1, 2 * len(self._step), 1024)
            self._step = np.resize(self._step, grow)
            self._coll = np.resize(self._coll, grow)
            self._copy = np.resize(self._copy, grow)
        self._names.extend([""] * (i + 1 - len(self._names)))
        self._names[i] = name = self._b.name_text(i)  # cut when huge: regexes below
        self._step[i] = kind_for("", name) == Kind.ANNOTATION
        self._coll[i] = -1
        self._copy[i] = -1
        return i

    def step_mask(self, ids: np.ndarray) -> np.ndarray:
        return self._step[ids]

    def collective_mask(self, ids: np.ndarray) -> np.ndarray:
        """Collective kernels (NCCL/RCCL...); classified on first use per name."""
        flags = self._coll[ids]
        for i in np.unique(ids[flags < 0]).tolist():
            name = self._names[i]
            low = name.lower()  # cheap necessary condition before the shared regex
            self._coll[i] = any(w in low for w in _COLLECTIVE_HINTS) and is_collective(name)
        return self._coll[ids] == 1

    def copy_kinds(self, ids: np.ndarray) -> np.ndarray:
        flags = self._copy[ids]
        for i in np.unique(ids[flags < 0]).tolist():
            self._copy[i] = int(copy_kind_from_name(self._names[i]))
        return self._copy[ids]


class CategoryTable:
    """``cat`` strings -> small codes; each code's base Kind."""

    def __init__(self):
        self._codes: dict[str, int] = _AutoDict(self._new)
        self.names: list[str] = []
        self.kind = np.zeros(0, np.int8)

    def codes(self, cats: list[str]) -> np.ndarray:
        return np.fromiter(map(self._codes.__getitem__, cats), np.int32, len(cats))

    def code(self, cat: str) -> int:
        return self._codes[cat]

    def _new(self, cat: str) -> int:
        c = self._codes[cat] = len(self.names)
        self.names.append(cat)
        self.kind = np.append(self.kind, np.int8(int(kind_for(cat, ""))))
        return c

    def codes_lowered(self, lowered: set[str]) -> list[int]:
        """Codes of the categories whose lower-cased name is in ``lowered``."""
        return [c for c, name in enumerate(self.names) if name.lower() in lowered]
