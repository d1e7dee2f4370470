"""Run one fuzz case the way the CLI would, and judge how it ended.

A case may end only as a loaded, well-formed trace (whose JSON summary and analysis
serialise, and whose cached copy reads back the same) or as a ``TraceFormatError`` with
the path and a one-line reason. Anything else -- another exception, a broken invariant,
running past the deadline -- is a failure, described by a one-line ``detail`` and a
``where`` (innermost sofa_gui frame) so a tally can group equal bugs.
"""

from __future__ import annotations

import json
import signal
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np

GOOD = ("loaded", "loaded-with-skips", "format-error")


class CaseTimeout(BaseException):
    """Raised by the deadline timer; a BaseException so ``except Exception`` cannot eat it."""


class CaseResult(NamedTuple):
    outcome: str  # one of GOOD, or "crash", "analysis-crash", "invalid-trace", "hang"
    detail: str = ""
    where: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome in GOOD


@contextmanager
def deadline(seconds: float):
    """Raise CaseTimeout in the main thread after ``seconds`` (wall clock)."""

    def _fire(signum, frame):
        raise CaseTimeout()

    old = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _where(exc: BaseException) -> str:
    """Innermost frame inside sofa_gui (else the innermost frame) as ``file:line``."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "sofa_gui" in f.filename] or frames
    if not ours:
        return "?"
    f = ours[-1]
    rel = f.filename.split("sofa_gui/", 1)[-1]
    return f"{rel}:{f.lineno} ({f.name})"


def _fail(outcome: str, exc: BaseException) -> CaseResult:
    msg = str(exc).splitlines()[0][:160] if str(exc) else ""
    return CaseResult(outcome, f"{type(exc).__name__}: {msg}", _where(exc))


def check_trace(trace) -> str | None:
    """The first broken invariant of a loaded trace, or None."""
    from sofa_gui.core.trace import Kind

    s, lanes = trace.slices, trace.lanes
    try:
        s.validate()
    except ValueError as exc:
        return str(exc)
    n, n_lanes, n_names = len(s), len(lanes), len(trace.names)
    checks = [
        (bool(np.all(s.dur >= 0)), "negative duration"),
        (bool(np.all(s.end >= s.start)), "start + duration wraps around int64"),
        (bool(np.all(s.start[1:] >= s.start[:-1])), "slices not sorted by start"),
        (bool(np.all((s.lane >= 0) & (s.lane < n_lanes))), "slice lane out of range"),
        (bool(np.all((s.name >= 0) & (s.name < n_names))), "slice name out of range"),
        (bool(np.all((s.kind >= 0) & (s.kind < len(Kind)))), "unknown slice kind"),
        (bool(np.all((s.args >= -1) & (s.args < max(len(trace.args), 0)))),
         "args index out of range"),
        (bool(np.all(s.depth >= 0)), "negative depth"),
        (n == 0 or bool(np.all(s.depth < lanes.depth[s.lane])), "depth beyond lane rows"),
        (all(isinstance(x, str) for x in trace.names), "a name is not text"),
        (all(isinstance(x, str) for x in lanes.name + lanes.group), "a lane label is not text"),
        (bool(np.all((trace.flows.src >= 0) & (trace.flows.src < n)
                     & (trace.flows.dst >= 0) & (trace.flows.dst < n))), "flow out of range"),
        (len(trace.counters) == 0 or bool(np.all(
            (trace.counters.series >= 0)
            & (trace.counters.series < len(trace.counters.table.name)))),
         "counter series out of range"),
    ]
    for ok, what in checks:
        if not ok:
            return what
    rep = trace.meta.load_stats
    if min(rep.read, rep.loaded, *rep.skipped.values(), 0) < 0:
        return "negative count in load report"
    # Either convention of the load report holds: loaded counts the trace's events
    # (the builder's default) or the source events used (read = loaded + skipped).
    if rep.loaded != trace.events and rep.loaded + rep.skipped_total != rep.read:
        return (f"load report does not add up: read {rep.read}, loaded {rep.loaded}, "
                f"skipped {rep.skipped_total}, events {trace.events}")
    return None


def _same(a, b) -> str | None:
    """Why the cached reopen ``b`` differs from the freshly loaded ``a`` (None: equal)."""
    for col in ("start", "dur", "lane", "name", "kind", "depth", "args"):
        if not np.array_equal(getattr(a.slices, col), getattr(b.slices, col)):
            return f"cached slices.{col} differs"
    if a.names != b.names:
        return "cached names differ"
    if list(a.lanes.name) != list(b.lanes.name):
        return "cached lane names differ"
    if len(a.counters) != len(b.counters) or not np.array_equal(
            a.counters.value, b.counters.value, equal_nan=True):
        return "cached counters differ"
    if a.meta.load_stats.to_dict() != b.meta.load_stats.to_dict():
        return "cached load report differs"
    for i in range(0, len(a.args), max(1, len(a.args) // 20)):
        if a.args.raw(i) != b.args.raw(i):
            return "cached args differ"
    return None


def _cli_outputs(trace, analyze_too: bool) -> None:
    """What ``sofa-gui analyze [--json]`` computes after loading; raises on any failure."""
    from sofa_gui.core.summary import trace_dict, trace_text

    doc = {"trace": trace_dict(trace)}
    lines = trace_text(trace)
    if analyze_too:
        from sofa_gui.core.analysis.pipeline import analyze

        analysis = analyze(trace)
        doc.update(analysis.to_dict())
        try:
            from sofa_gui.core.analysis.text import analysis_text
        except ModuleNotFoundError:
            pass
        else:
            lines += analysis_text(trace, analysis)
    json.dumps(doc, allow_nan=False)
    "\n".join(lines).encode("utf-8")


def run_case(path: Path, timeout_s: float = 10.0, analyze_too: bool = True) -> CaseResult:
    """Load ``path`` through the registry and the cache, then produce the CLI's outputs."""
    from sofa_gui.core.errors import TraceFormatError
    from sofa_gui.core.importers import load_trace

    try:
        with deadline(timeout_s):
            try:
                trace = load_trace(path, use_cache=True)
            except TraceFormatError as exc:
                return _judge_error(exc, path)
            except Exception as exc:
                return _fail("crash", exc)
            problem = check_trace(trace)
            if problem:
                return CaseResult("invalid-trace", problem, "check_trace")
            try:
                again = load_trace(path, use_cache=True)
            except Exception as exc:
                return _fail("crash", exc)
            problem = _same(trace, again)
            if problem:
                return CaseResult("invalid-trace", problem, "cache round trip")
            try:
                _cli_outputs(trace, analyze_too)
            except Exception as exc:
                return _fail("analysis-crash", exc)
    except CaseTimeout:
        return CaseResult("hang", f"no result within {timeout_s:g} s", "")
    skipped = trace.meta.load_stats.skipped_total
    return CaseResult("loaded-with-skips" if skipped else "loaded", "")


def _judge_error(exc, path: Path) -> CaseResult:
    reason = exc.reason
    if not isinstance(reason, str) or not reason.strip() or "\n" in reason:
        return CaseResult("crash", f"TraceFormatError reason not one line: {reason!r}"[:200],
                          "TraceFormatError")
    if not exc.path or not exc.path.startswith(str(path)):
        return CaseResult("crash", f"TraceFormatError path {exc.path!r} is not under the input",
                          "TraceFormatError")
    return CaseResult("format-error", reason[:160])
