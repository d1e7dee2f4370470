"""Memory-bound copies on the host: the main thread re-lays out or duplicates large
tensors every step (``permute(...).contiguous()``, ``clone()``, ``torch.cat``,
``stack``, ``repeat``), and the step waits for the memory traffic.

A copy op is counted when the trace proves it moves a lot of memory: its recorded input
shapes and types add up to at least :data:`LARGE_BYTES`.  Such a copy takes ~100 µs or
more at the ~10 GB/s one core copies, ten times an op's fixed dispatch cost, so its time
is the memory traffic, not the framework.  Copies are taken where the program asks for
them: outside every other op, or inside another copy or layout op (``reshape`` that has
to copy).  A dtype conversion the program calls (``w.float()``, ``x.to(torch.float64)``:
``aten::to``) is a copy into a new buffer of another type, counted as one; autocast's
casts run inside the op they feed (``aten::linear``) and are that op's, and copies
inside the input pipeline are input.  Runs with a device leave
this to ``host_device_copy_bound``.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace import Kind
from ...units import fmt_ns
from ...units import fmt_pct as pct
from ..host_side import window_of
from ..intervals import measure_in, union
from ..results import Evidence, Finding
from .causes import causes_by_name, self_times
from .context import MAX_EVIDENCE, Ctx, make_finding
from .host_estimate import (
    COLD_AFTER_COPIES,
    COLD_AFTER_NS,
    MATH_OP,
    HostFix,
    rest_math,
)
from .registry import Rule, rule
from .work import outermost, starts_inside

#: Ops that copy memory (the output is a new buffer holding the input's values).
COPY_OP = re.compile(r"^aten::(contiguous|clone|copy_|cat|_cat|concat|concatenate|stack|"
                     r"hstack|vstack|repeat|tile|narrow_copy|to|_to_copy)$")
#: Ops that only re-shape or re-lay out: a copy inside one is still the program's copy.
LAYOUT_OP = re.compile(r"^aten::(reshape|flatten|unflatten|view_as|movedim|permute|"
                       r"transpose|expand_as|squeeze|unsqueeze)$")
#: The fix of the copies inside a compiled program (:mod:`.program_copies`), shown there only.
DONATE_FIX = "donate the updated arrays"
#: A copy of at least this many bytes is memory-bound (1 MiB).
LARGE_BYTES = 1 << 20
#: A copy this short cannot have moved LARGE_BYTES (100 GB/s): its shapes are not read.
MIN_COPY_NS = 10_000
#: Bytes per element by the profiler's recorded type; 4 where the type is not recorded.
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "int": 4,
                 "long int": 8, "short int": 2, "signed char": 1, "unsigned char": 1,
                 "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16}


def copy_bytes(args: dict | None) -> int:
    """Bytes of the tensors an op's recorded inputs hold (lists of tensors included): what a
    copy reads, and for ``copy_(dst, src)`` the buffer it writes too."""
    if not isinstance(args, dict):
        return 0
    dims, types = args.get("Input Dims"), args.get("Input type") or []
    if not isinstance(dims, list):
        return 0
    total = 0
    for k, d in enumerate(dims):
        size = ELEMENT_BYTES.get(types[k] if k < len(types) else "", 4)
        for shape in (d if d and isinstance(d[0], list) else [d]):
            if isinstance(shape, list) and shape and all(isinstance(x, int) for x in shape):
                total += int(np.prod(shape, dtype=np.int64)) * size
    return total


def host_copies(ctx: Ctx) -> tuple[np.ndarray, np.ndarray]:
    """(large copy ops of the main thread in steady state, the bytes each copies), read
    once per analysis (the copies' finding and the small-batch reading both ask)."""
    return ctx.once("host_copies", lambda: _host_copies(ctx))


def _host_copies(ctx: Ctx) -> tuple[np.ndarray, np.ndarray]:
    host = ctx.bd.host
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if host is None:
        return empty
    s = ctx.trace.slices
    mine = ctx.trace.lane_slices(host.lane)
    ops = mine[s.kind[mine] == int(Kind.CPU_OP)]
    copies = ops[np.isin(s.name[ops], ctx.trace.name_ids(COPY_OP.match))
                 & (s.dur[ops] >= MIN_COPY_NS)]
    if not len(copies):
        return empty
    wrap = ops[~np.isin(s.name[ops], ctx.trace.name_ids(
        lambda n: bool(COPY_OP.match(n) or LAYOUT_OP.match(n))))]
    copies = copies[~starts_inside(ctx, wrap, copies)]  # inside a conversion: not a copy
    copies = outermost(s.start, s.end, copies)
    copies = copies[ctx.in_steady(s.start[copies], host.starts, host.ends)]
    copies = copies[~starts_inside(ctx, host.role_slices.get("data_loading", copies[:0]),
                                   copies)]
    size = np.array([copy_bytes(ctx.trace.args.get(int(s.args[j])) if s.args[j] >= 0
                                else None) for j in copies.tolist()], np.int64)
    big = size >= LARGE_BYTES
    return copies[big], size[big]


@rule("memory_copy_bound", "Memory-bound copies on the host", 0.05, 0.20,
      f"same grading as host-device copies; a copy op of >= {LARGE_BYTES >> 20} MiB "
      f"(recorded shapes) is memory-bound")
def memory_copy_bound(ctx: Ctx, spec: Rule) -> Finding | None:
    host = ctx.bd.host
    if host is None or ctx.bd.device is not None:
        return None
    copies, size = host_copies(ctx)
    r = ctx.rows
    if not len(copies) or not len(r):
        return None
    s = ctx.trace.slices
    cs, ce = union(s.start[copies], s.end[copies])
    wall = float((host.ends[r] - host.starts[r]).sum()) or 1.0
    share = min(float(measure_in(cs, ce, host.starts[r], host.ends[r]).sum()) / wall, 1.0)
    causes = causes_by_name(ctx, copies, s.dur[copies].astype(np.float64),
                            float(s.dur[copies].sum()) or 1.0)
    evidence = [Evidence(f"{ctx.trace.name_of(j)} of {b / 1e6:.1f} MB in "
                         f"{fmt_ns(int(s.dur[j]))} ({b / max(int(s.dur[j]), 1):.2f} GB/s)",
                         int(s.start[j]), int(s.end[j]), ctx.it(_row(ctx, j)), [host.lane])
                for j, b in sorted(zip(copies.tolist(), size.tolist()),
                                   key=lambda t: -int(s.dur[t[0]]))[:MAX_EVIDENCE]]
    per = len(copies) / max(ctx.ph.n_steady, 1)
    mb = float(size.sum()) / max(ctx.ph.n_steady, 1) / 1e6
    seen = cooling_seen(ctx, cs, ce)
    fix = HostFix(share, rest_math(ctx, host, host.starts[r], host.ends[r], cs, ce) / wall,
                  what="the copies", step_ns=ctx.call_ns(wall, len(r)), cold=COLD_AFTER_COPIES)
    if seen is not None:
        fix.cold = fix.cold_math = seen
        fix.cooling = "as this capture's steps with short copies and with long ones show"
    summary = (f"{per:,.1f} large copy ops per steady-state iteration on the main thread "
               f"({mb:,.1f} MB copied per iteration: re-layouts, clones, concatenations) take "
               f"{pct(share)} of its time; their time is memory traffic, not math. Keeping "
               f"the data in the layout its consumer reads (views instead of copies, one "
               f"buffer written in place) removes them, and the caches they flush stay "
               f"warm for the work that stays.{fix.basis()} A copy that stays (a smaller "
               f"one, one into a buffer kept across steps) is not counted.")
    return make_finding(ctx, spec, share, summary, evidence, causes=causes,
                        speedup=fix.speedup(), unseen=lambda f: (
                            "no copy inside a compiled program" if f.name == DONATE_FIX else ""))


def _row(ctx: Ctx, j: int) -> int:
    s = ctx.trace.slices
    host = ctx.bd.host
    return int(window_of(s.start[j:j + 1], host.starts, host.ends)[0])


#: Steps of each kind (with short copies, with long ones) that measure the cooling.
COOLING_STEPS = 3


def cooling_seen(ctx: Ctx, cs: np.ndarray, ce: np.ndarray) -> float | None:
    """How many times slower the step's math ops (their own time) run once large copies keep
    them away :data:`COLD_AFTER_NS` or more, read off the capture's own steps where it holds
    at least :data:`COOLING_STEPS` steps whose copies take under a third of that and as
    many whose copies take that or more (copies that differ from step to step: a tensor
    grown by ``torch.cat`` every step of a pass).  The short steps' copies cool them a
    little too (:func:`.cooled`, at the short steps' median time away): the ratio of the
    two medians is read back through that curve.  None where the capture cannot tell
    (every step copies alike) and the measured cooling is assumed.  ``cs``/``ce``: the
    copies' merged intervals."""
    host, r = ctx.bd.host, ctx.rows
    s = ctx.trace.slices
    away = measure_in(cs, ce, host.starts[r], host.ends[r])
    short, long_ = away < COLD_AFTER_NS / 3, away >= COLD_AFTER_NS
    if short.sum() < COOLING_STEPS or long_.sum() < COOLING_STEPS:
        return None
    mine = ctx.trace.lane_slices(host.lane)
    ops = mine[(s.kind[mine] == int(Kind.CPU_OP))
               & np.isin(s.name[mine], ctx.trace.name_ids(MATH_OP.match))]
    row = window_of(s.start[ops], host.starts, host.ends)
    own = self_times(ctx, ops).astype(np.float64)
    math = np.bincount(row[row >= 0], own[row >= 0], minlength=len(host.starts))[r]
    base = float(np.median(math[short]))
    if not base > 0:
        return None
    ratio = float(np.median(math[long_])) / base
    part = float(np.median(away[short])) / COLD_AFTER_NS  # of the way to cold
    if ratio * part >= 1.0:
        return COLD_AFTER_COPIES
    return float(np.clip(ratio * (1.0 - part) / (1.0 - ratio * part), 1.0, COLD_AFTER_COPIES))
