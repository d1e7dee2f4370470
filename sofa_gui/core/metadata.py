"""Metadata values checked where they enter: a trace header, a recording manifest or a
SOFA ``misc.txt`` may say anything (``cpu_cores: "many"``, ``1e999``, ``NaN``).

Each importer names the facts it keeps and their kind; a value of the wrong kind is
dropped and a load note says which file said what, so nothing later (run facts, the
findings, ``--json``) meets a value it cannot use.
"""

from __future__ import annotations

import math
from collections.abc import Callable

#: More cores, processes or devices than any machine has: a count past it is not a count.
COUNT_MAX = 1 << 24


def count(value) -> int | None:
    """A whole number from 1 to :data:`COUNT_MAX` (an int, or a float with no fraction)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 1 <= value <= COUNT_MAX else None


def number(value) -> float | int | None:
    """A finite real number, as given (int or float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and abs(value) > 1 << 63:
        return None
    return value


def amount(value) -> float | int | None:
    """A finite number >= 0 (a size, a duration, cores in use)."""
    v = number(value)
    return v if v is not None and v >= 0 else None


def integer(value) -> int | None:
    """A whole number that fits in 64 bits."""
    v = number(value)
    if v is None or (isinstance(v, float) and not v.is_integer()):
        return None
    return int(v)


#: Instruction-set flags (as /proc/cpuinfo names them) a recording keeps: whether the CPU
#: does bf16 math natively (AVX512-BF16, AMX), fp16 (AVX512-FP16), and its vector width.
CPU_ISA_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16", "avx512f", "avx2")


def cpu_isa(value) -> dict[str, bool] | None:
    """``{flag: present}`` over :data:`CPU_ISA_FLAGS`, from a mapping of flags to booleans
    (a recording manifest's ``host.cpu_isa``; flags given no boolean stay unknown) or from
    an x86-64 flags line as /proc/cpuinfo lists it (it names ``sse2``); None otherwise."""
    if isinstance(value, str) and len(value) < 1 << 16:
        have = set(value.split())
        return {f: f in have for f in CPU_ISA_FLAGS} if "sse2" in have else None
    if isinstance(value, dict):
        return {f: value[f] for f in CPU_ISA_FLAGS if isinstance(value.get(f), bool)} or None
    return None


def check(facts: dict, kinds: dict[str, Callable], where: str, notes: list[str]) -> dict:
    """``facts`` with every key of ``kinds`` that is present checked by its kind; one of
    the wrong kind is left out and noted (``where``: the file and place, e.g.
    ``manifest.json host``). Keys not in ``kinds`` pass as they are."""
    out = {}
    for key, value in facts.items():
        kind = kinds.get(key)
        if kind is None or value is None:
            out[key] = value
            continue
        good = kind(value)
        if good is None:
            notes.append(f"{where}: {key} {_shown(value)} is not {_WHAT[kind]}; ignored")
        else:
            out[key] = good
    return out


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_WHAT = {count: f"a count (1 to {COUNT_MAX})", number: "a finite number",
         amount: "a finite number >= 0", integer: "a whole number",
         cpu_isa: "a set of CPU flags"}
