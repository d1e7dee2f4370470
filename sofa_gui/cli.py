"""``sofa-gui`` command line.  Headless commands never import Qt.

Exit codes: 0 ok, 1 internal error, 2 bad input or usage, else the child's
code for ``record``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from . import __version__
from .core.errors import TraceFormatError
from .core.json_out import write as write_json

DESCRIPTION = ("Trace viewer and performance advisor for deep-learning programs. "
               "Without a command, opens the app (on PATH if given).")
EXAMPLES = """examples:
  sofa-gui trace.json.gz                       open the app on a trace
  sofa-gui analyze trace.json.gz               summary, iterations, breakdown, findings
  sofa-gui stats trace.json.gz --kind op       top CPU ops by total time
  sofa-gui report trace.json.gz -o report.html
  sofa-gui diff before.json.gz after.json.gz   did the fix work?
  sofa-gui diff b1.json a1.json b2.json a2.json b3.json a3.json   the same, repeated runs
  sofa-gui sql trace.json.gz "SELECT name, count(*) FROM kernels GROUP BY 1"
  sofa-gui calltree trace.json.gz --iteration 2    call tree of the main thread
  sofa-gui fleet runs/job42/ --json               every rank of a run on a Dask cluster
  sofa-gui record -o run1 --torch -- python train.py
  sofa-gui try --fix loader-workers -- python train.py   apply a fix, measure it
  sofa-gui view trace.json.gz --screenshot out.png   (works without a display)

exit codes: 0 ok, 1 internal error, 2 bad input or usage; `record` returns the command's code.
"""
COMMANDS = ("analyze", "stats", "sql", "calltree", "report", "diff", "fleet", "record", "try",
            "view", "demo")


SIZE_HELP = ("window size WxH (default: the size last used on a screen of this size, else "
             "the screen's available area; 1600x1000 with --screenshot)")

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sofa-gui", description=DESCRIPTION, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"sofa-gui {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    a = sub.add_parser("analyze", help="load a trace and print a summary / JSON")
    a.add_argument("path", help="trace file or folder")
    a.add_argument("--json", action="store_true", help="print one JSON document")
    a.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    _iter_arg(a)
    _fixes_arg(a)

    st = _command(sub, "stats", "top-N table of kernels, CPU ops, copies or collectives",
                  "Group slices of one kind by normalised name (template arguments folded) and "
                  "print count, total, self, mean, median, p95, max and share, longest total "
                  "first. A slice counts in a window when it starts inside it. Times in "
                  "--json/--csv are µs.",
                  ["sofa-gui stats trace.json.gz --kind kernel --top 10",
                   "sofa-gui stats trace.json.gz --kind op --iteration 2 --json",
                   "sofa-gui stats trace.json.gz --kind copy --steady --csv"])
    st.add_argument("path", help="trace file or folder")
    st.add_argument("--kind", choices=("kernel", "op", "copy", "collective"), default="kernel",
                    help="what to tabulate (default: kernel)")
    _window_args(st)
    st.add_argument("--top", type=int, default=20, metavar="K",
                    help="rows to print (default 20; 0 = all)")
    fmt = st.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON document")
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    st.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    _iter_arg(st)

    _sql_parser(sub)
    _calltree_parser(sub)

    r = sub.add_parser("report", help="write an HTML or Markdown performance report")
    r.add_argument("path", help="trace file or folder")
    r.add_argument("-o", "--output", required=True, help="report.html or report.md")
    r.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    _iter_arg(r)
    _fixes_arg(r)

    d = sub.add_parser("diff", help="compare two runs (before / after a fix)")
    d.add_argument("runs", nargs="+", metavar="TRACE",
                   help="BEFORE AFTER: the runs before and after the change; on a noisy "
                        "machine several pairs BEFORE1 AFTER1 BEFORE2 AFTER2 ... (the sides' "
                        "median runs are compared)")
    d.add_argument("--json", action="store_true", help="print one JSON document")
    d.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    _iter_arg(d)
    _fixes_arg(d)

    fl = sub.add_parser("fleet", help="analyze every rank of a run folder on a Dask cluster")
    fl.add_argument("path", metavar="RUN_DIR", help="folder with one trace per rank")
    fl.add_argument("--scheduler", metavar="ADDRESS",
                    help="existing Dask scheduler (tcp://host:8786; default $SOFA_GUI_SCHEDULER, "
                         "else an embedded local cluster)")
    fl.add_argument("--workers", type=int, metavar="N",
                    help="worker processes of the embedded cluster (default: one per core)")
    fl.add_argument("--ranks", metavar="SPEC", help="only these ranks, e.g. 0-7,12,40-")
    fl.add_argument("--json", action="store_true", help="print one JSON document")
    fl.add_argument("--no-cache", action="store_true", help="workers ignore/do not write caches")
    _iter_arg(fl)

    rec = sub.add_parser("record", help="run a command and record a profile around it "
                         "(`sofa-gui record --help` for its options)", add_help=False)
    rec.add_argument("args", nargs=argparse.REMAINDER, help="recorder options, --, the command")
    tr = sub.add_parser("try", help="re-run a command with a suggested fix and measure it "
                        "(`sofa-gui try --help` for its options)", add_help=False)
    tr.add_argument("args", nargs=argparse.REMAINDER, help="try options, --, the command")

    v = sub.add_parser("view", help="open the desktop app on a trace")
    v.add_argument("path", nargs="?", help="trace file or folder to open")
    v.add_argument("--screenshot", metavar="OUT.png", help="save a PNG of the window and exit")
    v.add_argument("--iteration", type=int, help="select this iteration (with --screenshot)")
    v.add_argument("--size", default=None, help=SIZE_HELP)
    _iter_arg(v)
    dm = sub.add_parser("demo", help="open the app on the bundled sample trace")
    dm.add_argument("--screenshot", metavar="OUT.png", help="save a PNG of the window and exit")
    dm.add_argument("--iteration", type=int, help="select this iteration (with --screenshot)")
    dm.add_argument("--size", default=None, help=SIZE_HELP)
    dm.add_argument("--headless", action="store_true",
                    help="no window: print the analysis of the sample instead")
    _iter_arg(dm)
    return p


def _command(sub, name: str, summary: str, description: str, examples: list[str]):
    """A subcommand with a description and an ``examples:`` epilog, laid out as written."""
    return sub.add_parser(name, help=summary, description=description,
                          epilog="examples:\n" + "\n".join(f"  {e}" for e in examples),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _window_args(p: argparse.ArgumentParser) -> None:
    """--iteration N | --steady | --range A:B (``stats`` and ``calltree``)."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--iteration", type=int, metavar="N",
                       help="only iteration N (0-based, as `analyze` numbers them)")
    where.add_argument("--steady", action="store_true",
                       help="all iterations but the first (warm-up)")
    where.add_argument("--range", metavar="START:END",
                       help="a time range from the trace start, as every text output shows "
                            "times: 120ms:250ms (units ns, us, ms, s; bare numbers are µs); "
                            "abs:START:END for the trace's own clock (µs, as in --json)")


def _sql_parser(sub) -> None:
    q = _command(sub, "sql", "run a SQL query over the trace's tables (DuckDB)",
                 "Run one read-only SELECT over the trace's tables: slices, lanes, iterations, "
                 "flows, counters, findings and the views kernels, ops, copies, collectives "
                 "(--schema lists their columns; docs/sql.md). Times are µs on the trace's "
                 "clock. Refused or failing statements print one line and exit 2.",
                 ['sofa-gui sql trace.json.gz "SELECT count(*) FROM slices"',
                  'sofa-gui sql trace.json.gz "SELECT short_name(name), sum(dur_us) FROM kernels '
                  'WHERE iteration = 3 GROUP BY 1 ORDER BY 2 DESC LIMIT 10"',
                  "sofa-gui sql trace.json.gz --schema"])
    q.add_argument("path", help="trace file or folder")
    q.add_argument("query", nargs="?", help="one SELECT statement")
    q.add_argument("--schema", action="store_true", help="print the tables and columns")
    fmt = q.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON document")
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    q.add_argument("--max-rows", type=int, default=1000, metavar="N",
                   help="rows to print at most (default 1000; 0 = all)")
    q.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    _iter_arg(q)


def _calltree_parser(sub) -> None:
    c = _command(sub, "calltree", "call tree (top-down or bottom-up) of a thread",
                 "Nest the slices of a CPU thread (or all threads of a rank) by their parents "
                 "and sum them per call path: total, self, count and share of the scope's "
                 "top-level time. Default: the main thread over the whole trace. See "
                 "docs/calltree.md.",
                 ["sofa-gui calltree trace.json.gz --iteration 2",
                  "sofa-gui calltree trace.json.gz --steady --bottom-up --depth 3",
                  'sofa-gui calltree trace.json.gz --lane "rank 0" --json'])
    c.add_argument("path", help="trace file or folder")
    _window_args(c)
    c.add_argument("--lane", metavar="NAME",
                   help="a CPU lane by name (or part of it), or \"rank N\" for all threads "
                        "of rank N (default: the main thread)")
    c.add_argument("--bottom-up", action="store_true",
                   help="callers of each function instead of callees")
    c.add_argument("--depth", type=int, metavar="D", help="levels to print (default: all)")
    c.add_argument("--json", action="store_true", help="print one JSON document")
    c.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    _iter_arg(c)


def _iter_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--iterations", choices=("auto", "annotations", "pattern"), default="auto",
                   help="how to find iterations (default: annotations if present)")
    p.add_argument("--recompute", action="store_true",
                   help="run the analysis again instead of reading it from the cache")


def _fixes_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all-fixes", action="store_true",
                   help="also list fixes for other frameworks than the one the trace proves")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv = ["view", *argv]  # plain `sofa-gui PATH`
    if argv and argv[0] == "record":  # argparse's REMAINDER drops leading options: route as-is
        from .recorder.cli import main as record_main

        return record_main(argv[1:])
    if argv and argv[0] == "try":
        from .recorder.try_cli import main as try_main

        return try_main(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        args = _parser().parse_args(["view"])
    try:
        return _dispatch(args)
    except TraceFormatError as exc:
        _error(f"{exc.path}: {exc.reason}")
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`analyze --json | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as if SIGPIPE had ended us, the shell's convention


def gui_main() -> int:
    return main(sys.argv[1:] or ["view"])


#: Commands that only read traces and print or write one file (closed before they return):
#: nothing of theirs needs the interpreter's teardown.
QUICK_EXIT = ("analyze", "stats", "sql", "calltree", "report", "diff")


def entry() -> None:
    """The ``sofa-gui`` command (and ``python -m sofa_gui``): :func:`main`, then
    :func:`leave` after the read-only commands, an ordinary exit after the others."""
    argv = sys.argv[1:]
    rc = main(argv)
    if argv and argv[0] in QUICK_EXIT:
        leave(rc)
    sys.exit(rc)


def leave(rc: int) -> None:
    """End the process with ``rc``, skipping the interpreter's teardown when nothing
    needs it: after a headless command read a large trace, freeing its objects one by
    one takes a few hundred ms that the kernel does at once. Only with output flushed
    and no Qt, other thread or child process left; otherwise an ordinary exit."""
    import threading

    mp = sys.modules.get("multiprocessing")
    if ("PySide6" in sys.modules or threading.active_count() > 1
            or (mp is not None and mp.active_children())):
        sys.exit(rc)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: let the ordinary exit report it
        sys.exit(rc)
    logging.shutdown()
    spill = sys.modules.get("sofa_gui.core.importers.spill_dir")
    if spill is not None:  # its atexit hook does not run past os._exit
        spill.cleanup()
    os._exit(rc)


def _dispatch(args) -> int:
    if args.command == "analyze":
        return _cmd_analyze(args)
    if args.command == "stats":
        return _cmd_stats(args)
    if args.command == "sql":
        return _cmd_sql(args)
    if args.command == "calltree":
        return _cmd_calltree(args)
    if args.command == "report":
        return _cmd_report(args)
    if args.command == "diff":
        return _cmd_diff(args)
    if args.command == "fleet":
        return _cmd_fleet(args)
    if args.command == "record":
        from .recorder.cli import main as record_main

        return record_main(args.args)
    if args.command == "demo" and not args.headless and not args.screenshot and no_display():
        print("sofa-gui: no display; printing the text analysis of the sample instead "
              "(run under xvfb-run for the window)", file=sys.stderr)
        args.headless = True
    if args.command == "demo" and args.headless:
        from .core.samples import demo_trace_path

        args.path, args.json, args.no_cache = str(demo_trace_path()), False, False
        return _cmd_analyze(args)
    if not args.screenshot and no_display():
        print("error: no display (DISPLAY/WAYLAND_DISPLAY unset), so no window can open; "
              "use `sofa-gui analyze PATH`, `sofa-gui view PATH --screenshot out.png`, "
              "`sofa-gui demo --headless`, or run under `xvfb-run -a`", file=sys.stderr)
        return 2
    from .qt.app import run_from_args  # only here is Qt loaded

    return run_from_args(args)


def _load_and_analyze(path: str, args):
    from .core.analysis.cache import analyze_cached
    from .core.analysis.pipeline import Options, preload
    from .core.idle_work import while_idle
    from .core.importers import load_trace

    with while_idle(preload):  # imports the analysis while the decode workers finish
        trace = load_trace(path, use_cache=not args.no_cache)
    return trace, analyze_cached(trace, Options(iterations=args.iterations,
                                                all_fixes=getattr(args, "all_fixes", False)),
                                 recompute=getattr(args, "recompute", False))


def _cmd_analyze(args) -> int:
    from .core.summary import trace_dict, trace_text

    trace, analysis = _load_and_analyze(args.path, args)
    if args.json:
        doc = {"trace": trace_dict(trace), **analysis.to_dict(trace)}
        write_json(doc, sys.stdout)
    else:
        from .core.analysis.text import analysis_text, verdict_text

        _print_lines(verdict_text(analysis.verdict) + trace_text(trace) + [""]
                     + analysis_text(trace, analysis))
    return 0


def _cmd_stats(args) -> int:
    from .core.analysis import stats
    from .core.importers import load_trace
    from .core.units import RANGE_SYNTAX

    if args.top < 0:
        return _usage_error(f"--top must be >= 0, not {args.top}")
    if args.range and not _range_shape_ok(args.range):
        return _usage_error(f"--range wants {RANGE_SYNTAX}, not {args.range!r}")
    trace = load_trace(args.path, use_cache=not args.no_cache)
    try:
        scope = _stats_scope(trace, args)
    except (IndexError, ValueError) as exc:
        _error(f"{args.path}: {exc}")
        return 2
    table = stats.compute_table(trace, args.kind, scope, top=args.top or None)
    if args.json:
        write_json(table.to_dict(), sys.stdout)
    elif args.csv:
        stats.table_csv(table, sys.stdout)
    else:
        _print_lines(stats.table_text(table))
    return 0


def _stats_scope(trace, args, iterations=None):
    """Whole trace, a time range, one iteration or the steady state (of ``iterations``,
    the analysis's, else of :func:`_scope_iterations`)."""
    from .core.analysis import stats
    from .core.units import fmt_ns_exact, parse_time_range

    if args.range:
        a, b = parse_time_range(args.range, trace.start_ns, trace.end_ns)
        scope = stats.range_scope(a, b)
        scope.label = (f"range +{fmt_ns_exact(a - trace.start_ns)} .. "
                       f"+{fmt_ns_exact(b - trace.start_ns)} from the trace start")
        return scope
    if args.iteration is None and not args.steady:
        return stats.Scope()
    iters = iterations if iterations is not None else _scope_iterations(trace, args)
    if args.steady:
        return stats.steady_scope(iters)
    return stats.iteration_scope(iters, args.iteration)


def _scope_iterations(trace, args):
    """The iterations ``--steady`` / ``--iteration`` read: for the steady state the
    analysis's (cached), whose warm-up is the advisor's, the one every surface shows;
    for one iteration detection alone (its window needs no warm-up)."""
    if args.steady:
        from .core.analysis.cache import analyze_cached
        from .core.analysis.pipeline import Options

        return analyze_cached(trace, Options(iterations=args.iterations)).iterations
    from .core.analysis.iterations import detect_iterations

    return detect_iterations(trace, mode=args.iterations)


def _range_shape_ok(text: str) -> bool:
    """Whether ``--range`` parses at all (checked before the trace is loaded)."""
    from .core.units import parse_time_range

    try:
        parse_time_range(text, -(2**62), 2**62)
    except ValueError:
        return False
    return True


def _cmd_sql(args) -> int:
    from .core.query import output
    from .core.query.db import QueryError, TraceDB, refuse_early
    from .core.query.schema import schema_lines

    if args.schema:
        _print_lines(schema_lines())
        return 0
    if args.query is None:
        return _usage_error("sql needs a QUERY (or --schema)")
    if args.max_rows < 0:
        return _usage_error(f"--max-rows must be >= 0, not {args.max_rows}")
    try:
        refuse_early(args.query)  # a refused statement is refused before the trace loads
    except QueryError as exc:
        _error(f"{exc}")
        return 2
    import threading

    from .core.query.db import preload

    warm = threading.Thread(target=preload, daemon=True)  # imports while the trace loads
    warm.start()
    trace, analysis = _load_and_analyze(args.path, args)
    warm.join()
    try:
        res = TraceDB(trace, analysis).run(args.query, max_rows=args.max_rows or None)
    except QueryError as exc:
        _error(f"{exc}")
        return 2
    if args.json:
        output.write_json(res, sys.stdout)
    elif args.csv:
        output.write_csv(res, sys.stdout)
    else:
        _print_lines(output.result_text(res))
    return 0


def _cmd_calltree(args) -> int:
    from .core.analysis import calltree
    from .core.units import RANGE_SYNTAX

    if args.range and not _range_shape_ok(args.range):
        return _usage_error(f"--range wants {RANGE_SYNTAX}, not {args.range!r}")
    if args.depth is not None and args.depth < 1:
        return _usage_error(f"--depth must be >= 1, not {args.depth}")
    trace, analysis = _load_and_analyze(args.path, args)
    try:
        scope = _stats_scope(trace, args, analysis.iterations)  # the windows of `stats`
        lanes, lane_label = calltree.pick_lanes(trace, args.lane)
    except (IndexError, ValueError) as exc:
        _error(f"{args.path}: {exc}")
        return 2
    tree = calltree.build(trace, lanes, scope, bottom_up=args.bottom_up, lane_label=lane_label)
    if args.json:
        write_json(tree.to_dict(args.depth), sys.stdout)
    else:
        _print_lines(calltree.tree_text(tree, args.depth))
    return 0


def _usage_error(msg: str) -> int:
    _error(f"{msg}")
    return 2


def _cmd_report(args) -> int:
    from .core.analysis.report import report_format, write_report

    try:
        report_format(args.output)  # refuse a bad suffix before loading the trace
    except ValueError as exc:
        _error(f"{args.output}: {exc}")
        return 2
    trace, analysis = _load_and_analyze(args.path, args)
    try:
        write_report(trace, analysis, args.output)
    except OSError as exc:
        _error(f"{args.output}: cannot write: {exc.strerror or exc}")
        return 2
    print(f"wrote {terminal_safe(args.output, one_line=True)}")
    return 0


def _cmd_diff(args) -> int:
    from .core.analysis.diff import diff_analyses, diff_text
    from .core.analysis.diff_repeated import diff_repeated, repeated_text

    if len(args.runs) % 2:
        _error(f"diff takes traces in pairs (BEFORE AFTER [BEFORE AFTER ...]); got "
               f"{len(args.runs)}: {terminal_safe(args.runs[-1], one_line=True)} has no AFTER")
        return 2
    runs = [_load_and_analyze(p, args) for p in args.runs]
    pairs = list(zip(runs[::2], runs[1::2]))
    if len(pairs) == 1:
        result, text = diff_analyses(*pairs[0]), diff_text
    else:
        result, text = diff_repeated(pairs), repeated_text
    if args.json:
        write_json(result, sys.stdout)
    else:
        _print_lines(text(result))
    return 0


def _cmd_fleet(args) -> int:
    from .core.fleet.bar import RankBar
    from .core.fleet.engine import EngineError
    from .core.fleet.run import fleet
    from .core.fleet.text import fleet_text

    if args.workers is not None and args.workers < 1:
        _error(f"--workers {args.workers}: must be at least 1")
        return 2
    bar: list[RankBar] = []
    try:
        res = fleet(args.path, scheduler=args.scheduler, workers=args.workers, ranks=args.ranks,
                    mode=args.iterations, use_cache=not args.no_cache,
                    on_start=lambda files: bar.append(RankBar([f.rank for f in files])),
                    on_done=lambda s: bar[0].update(s))
    except ValueError as exc:
        _error(f"{args.path}: {exc}")
        return 2
    except EngineError as exc:
        _error(f"{exc}")
        return 2
    finally:
        if bar:
            bar[0].close()
    if args.json:
        write_json(res.to_dict(), sys.stdout)
    else:
        _print_lines(fleet_text(res))
    return 0


#: Qt platforms that need no window system (QT_QPA_PLATFORM).
_WINDOWLESS = ("offscreen", "minimal", "vnc", "eglfs", "linuxfb", "vkkhrdisplay")


def no_display() -> bool:
    """True on Linux with no X11/Wayland display and no windowless Qt platform chosen,
    where Qt would abort (exit 134) with a misleading missing-library message."""
    import os

    if not sys.platform.startswith("linux"):
        return False
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return False
    platform = os.environ.get("QT_QPA_PLATFORM", "").split(":")[0]
    return platform not in _WINDOWLESS


def _error(message: str) -> None:
    """The one ``error:`` line on stderr (untrusted text in it escaped, never two lines)."""
    print("error: " + terminal_safe(message, one_line=True), file=sys.stderr)


def terminal_safe(text: str, one_line: bool = False) -> str:
    """Trace names and paths are untrusted: control characters (ANSI escapes, C1, CR),
    bidi overrides and undecodable bytes are shown escaped (``one_line``: ``\\n`` too)."""
    from .core.names import visible

    return visible(text, one_line)


def _print_lines(lines: list[str]) -> None:
    """Each line on its own: a line break inside one came from a name, and is escaped
    (a ``\\n`` in a thread name must not start a line of its own, e.g. ``error: ...``)."""
    print("\n".join(terminal_safe(line, one_line=True) for line in lines))


if __name__ == "__main__":
    sys.exit(main())
