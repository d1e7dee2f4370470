"""``sofa-gui`` command line.  Headless commands never import Qt.

Exit codes: 0 ok, 1 internal error, 2 bad input or usage, else the child's
code for ``record``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from . import __version__
from .core.errors import TraceFormatError

COMMANDS = ("analyze", "report", "diff", "fleet", "record", "view", "demo")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sofa-gui", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"sofa-gui {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    a = sub.add_parser("analyze", help="load a trace and print a summary / JSON")
    a.add_argument("path")
    a.add_argument("--json", action="store_true", help="print one JSON document")
    a.add_argument("--no-cache", action="store_true", help="ignore and do not write the cache")
    _iter_arg(a)

    r = sub.add_parser("report", help="write an HTML or Markdown performance report")
    r.add_argument("path")
    r.add_argument("-o", "--output", required=True, help="report.html or report.md")
    r.add_argument("--no-cache", action="store_true")
    _iter_arg(r)

    d = sub.add_parser("diff", help="compare two runs (before / after a fix)")
    d.add_argument("before")
    d.add_argument("after")
    d.add_argument("--json", action="store_true")
    d.add_argument("--no-cache", action="store_true")
    _iter_arg(d)

    fl = sub.add_parser("fleet", help="analyse every rank of a run folder on a Dask cluster")
    fl.add_argument("path", metavar="RUN_DIR")
    fl.add_argument("--scheduler", metavar="ADDRESS",
                    help="existing Dask scheduler (tcp://host:8786; default $SOFA_GUI_SCHEDULER, "
                         "else an embedded local cluster)")
    fl.add_argument("--workers", type=int, metavar="N",
                    help="worker processes of the embedded cluster (default: one per core)")
    fl.add_argument("--ranks", metavar="SPEC", help="only these ranks, e.g. 0-7,12,40-")
    fl.add_argument("--json", action="store_true", help="print one JSON document")
    fl.add_argument("--no-cache", action="store_true", help="workers ignore/do not write caches")
    _iter_arg(fl)

    rec = sub.add_parser("record", help="run a command and record a profile around it",
                         add_help=False)
    rec.add_argument("args", nargs=argparse.REMAINDER)

    v = sub.add_parser("view", help="open the desktop app on a trace")
    v.add_argument("path", nargs="?")
    v.add_argument("--screenshot", metavar="OUT.png", help="save a PNG of the window and exit")
    v.add_argument("--iteration", type=int, help="select this iteration (with --screenshot)")
    v.add_argument("--size", default="1600x1000", help="window size WxH")
    _iter_arg(v)
    dm = sub.add_parser("demo", help="open the app on the bundled sample trace")
    dm.add_argument("--screenshot", metavar="OUT.png")
    dm.add_argument("--iteration", type=int)
    dm.add_argument("--size", default="1600x1000")
    dm.add_argument("--headless", action="store_true",
                    help="no window: print the analysis of the sample instead")
    _iter_arg(dm)
    return p


def _iter_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--iterations", choices=("auto", "annotations", "pattern"), default="auto",
                   help="how to find iterations (default: annotations if present)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv = ["view", *argv]  # plain `sofa-gui PATH`
    if argv and argv[0] == "record":  # argparse's REMAINDER drops leading options: route as-is
        from .recorder.cli import main as record_main

        return record_main(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        args = _parser().parse_args(["view"])
    try:
        return _dispatch(args)
    except TraceFormatError as exc:
        print(terminal_safe(f"error: {exc.path}: {exc.reason}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def gui_main() -> int:
    return main(sys.argv[1:] or ["view"])


def _dispatch(args) -> int:
    if args.command == "analyze":
        return _cmd_analyze(args)
    if args.command == "report":
        return _cmd_report(args)
    if args.command == "diff":
        return _cmd_diff(args)
    if args.command == "fleet":
        return _cmd_fleet(args)
    if args.command == "record":
        from .recorder.cli import main as record_main

        return record_main(args.args)
    if args.command == "demo" and args.headless:
        from .core.samples import demo_trace_path

        args.path, args.json, args.no_cache = str(demo_trace_path()), False, False
        return _cmd_analyze(args)
    from .qt.app import run_from_args  # only here is Qt loaded

    return run_from_args(args)


def _load_and_analyze(path: str, args):
    from .core.analysis.pipeline import Options, analyze
    from .core.importers import load_trace

    trace = load_trace(path, use_cache=not args.no_cache)
    return trace, analyze(trace, Options(iterations=args.iterations))


def _cmd_analyze(args) -> int:
    from .core.analysis.text import analysis_text
    from .core.summary import trace_dict, trace_text

    trace, analysis = _load_and_analyze(args.path, args)
    if args.json:
        doc = {"trace": trace_dict(trace), **analysis.to_dict(trace)}
        json.dump(doc, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        _print_lines(trace_text(trace) + [""] + analysis_text(trace, analysis))
    return 0


def _cmd_report(args) -> int:
    from .core.analysis.report import report_format, write_report

    try:
        report_format(args.output)  # refuse a bad suffix before loading the trace
    except ValueError as exc:
        print(f"error: {args.output}: {exc}", file=sys.stderr)
        return 2
    trace, analysis = _load_and_analyze(args.path, args)
    try:
        write_report(trace, analysis, args.output)
    except OSError as exc:
        print(f"error: {args.output}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


def _cmd_diff(args) -> int:
    from .core.analysis.diff import diff_analyses, diff_text

    before = _load_and_analyze(args.before, args)
    after = _load_and_analyze(args.after, args)
    result = diff_analyses(before, after)
    if args.json:
        json.dump(result, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        _print_lines(diff_text(result))
    return 0


def _cmd_fleet(args) -> int:
    from .core.fleet.bar import RankBar
    from .core.fleet.engine import EngineError
    from .core.fleet.run import fleet
    from .core.fleet.text import fleet_text

    if args.workers is not None and args.workers < 1:
        print(f"error: --workers {args.workers}: must be at least 1", file=sys.stderr)
        return 2
    bar: list[RankBar] = []
    try:
        res = fleet(args.path, scheduler=args.scheduler, workers=args.workers, ranks=args.ranks,
                    mode=args.iterations, use_cache=not args.no_cache,
                    on_start=lambda files: bar.append(RankBar([f.rank for f in files])),
                    on_done=lambda s: bar[0].update(s))
    except ValueError as exc:
        print(f"error: {args.path}: {exc}", file=sys.stderr)
        return 2
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if bar:
            bar[0].close()
    if args.json:
        json.dump(res.to_dict(), sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        _print_lines(fleet_text(res))
    return 0


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F) if c not in (0x09, 0x0A)}


def terminal_safe(text: str) -> str:
    """Trace names are untrusted: show control characters (ANSI escapes) as ``\\xNN``."""
    return text.translate(_CONTROL)


def _print_lines(lines: list[str]) -> None:
    print(terminal_safe("\n".join(lines)))


if __name__ == "__main__":
    sys.exit(main())
