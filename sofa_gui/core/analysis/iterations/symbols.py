"""Event names -> small integer symbols that are equal for the same work in every iteration.

Normalisation removes what changes between iterations but not the work itself:
template and argument lists, addresses, byte sizes and step counters. Copies
become one symbol per direction. Kernel ids that are plain numbers (old SOFA
traces) and module-instance numbers (``Linear_3``) are identities, so they stay.
Symbols seen only once in the stream are folded into one "other" id, and runs of
one symbol are collapsed, so a variable-length loop of the same kernel does not
change an iteration's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...names import strip_brackets
from ...trace import CopyKind, Kind

OTHER = 0  # the folded id of symbols that occur once

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_SIZE = re.compile(r"\b\d+(\.\d+)?\s*(bytes?|[kKmMgG]i?[bB]|B)\b")
_COUNTER = re.compile(r"#\d+\b")
_STEP_WORD = re.compile(r"\b(step|iter|iteration|epoch|batch|microbatch)([\s_:#-]*)\d+\b", re.I)
_SPACES = re.compile(r"\s+")



def normalize_name(name: str) -> str:
    """The part of an event name that identifies its work across iterations."""
    s = name.strip()
    if "operator<" not in s and "<" in s and ">" in s:
        s = strip_brackets(s, "<", ">")
    if "(" in s and not s.startswith("("):
        head = strip_brackets(s, "(", ")")
        if head.strip():
            s = head
    s = _ADDRESS.sub("0x", s)
    s = _SIZE.sub("<size>", s)
    s = _COUNTER.sub("#", s)
    s = _STEP_WORD.sub(lambda m: m.group(1) + m.group(2), s)
    s = _SPACES.sub(" ", s).strip()
    return s or name.strip()


@dataclass
class Symbols:
    """The reduced symbol sequence and where each symbol came from.

    ``seq[i]`` is the symbol of stream event ``first[i]`` (the first of a run of
    equal symbols); ``alphabet`` is the number of distinct ids (0 = other).
    """

    seq: np.ndarray  # int32 dense ids, OTHER for folded singletons
    first: np.ndarray  # int64 stream positions of each symbol (run starts)
    alphabet: int
    labels: list[str]  # id -> normalised name ("" for OTHER)


def stream_keys(names: list[str], name_ids: np.ndarray, kinds: np.ndarray,
                copy_kinds: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per-event key ids (before folding) and their labels."""
    table: dict[str, int] = {}
    labels: list[str] = []

    def key(text: str) -> int:
        k = table.get(text)
        if k is None:
            k = table[text] = len(labels)
            labels.append(text)
        return k

    name_ids = np.asarray(name_ids, np.int64)
    used = np.flatnonzero(np.bincount(name_ids, minlength=len(names))) if len(name_ids) else []
    by_name = np.full(len(names), -1, np.int64)
    for i in used:
        by_name[i] = key(normalize_name(names[int(i)]))
    keys = by_name[name_ids]
    kinds = np.asarray(kinds)
    memcpy = kinds == int(Kind.MEMCPY)
    if memcpy.any():
        ck = np.asarray(copy_kinds)[memcpy]
        per_kind = np.array([key(f"memcpy {CopyKind(c).name}") for c in range(len(CopyKind))])
        keys[memcpy] = per_kind[np.clip(ck, 0, len(CopyKind) - 1)]
    memset = kinds == int(Kind.MEMSET)
    if memset.any():
        keys[memset] = key("memset")
    return keys, labels


def reduce_symbols(keys: np.ndarray, labels: list[str] | None = None) -> Symbols:
    """Fold singletons into OTHER, collapse runs, remap to dense ids 1..k."""
    keys = np.asarray(keys, np.int64)
    n = len(keys)
    if n == 0:
        return Symbols(np.zeros(0, np.int32), np.zeros(0, np.int64), 1, [""])
    counts = np.bincount(keys)
    repeated = counts > 1
    new_id = np.where(repeated, np.cumsum(repeated), OTHER)
    dense = new_id[keys]
    keep = np.ones(n, bool)
    keep[1:] = dense[1:] != dense[:-1]
    first = np.flatnonzero(keep).astype(np.int64)
    out_labels = [""]
    if labels is not None:
        out_labels += [labels[int(k)] for k in np.flatnonzero(repeated)]
    return Symbols(dense[keep].astype(np.int32), first, int(repeated.sum()) + 1, out_labels)
