"""``sofa-gui record [-o DIR] [--interval S] [--torch] [--torch-window A:B] [--py-spy] -- CMD``.

Exit code: the child's (128 + N when signal N ended it); 2 when the command
cannot start or the options are wrong (no folder is left behind); 1 when the
recorder itself failed.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from .config import CommandError, RecordConfig, parse_window
from .runner import Recorder
from .summary import summary_text

USAGE = ("sofa-gui record [-o DIR] [--interval SECONDS] [--torch] "
         "[--torch-window START:DURATION] [--py-spy] -- COMMAND [ARGS...]")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sofa-gui record", usage=USAGE,
        description="Run COMMAND and record CPU, memory, disk, network and GPU counters "
                    "around it (plus torch.profiler / py-spy on request) into one folder.")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="recording folder to create (default ./sofa_runs/<time>-<name>/)")
    p.add_argument("--interval", type=float, default=0.1, metavar="SECONDS",
                   help="sampling interval (default 0.1)")
    p.add_argument("--torch", action="store_true",
                   help="run torch.profiler inside a Python child (no code changes)")
    p.add_argument("--torch-window", metavar="START:DURATION",
                   help="profile only DURATION s starting START s after launch")
    p.add_argument("--py-spy", action="store_true", help="sample Python stacks with py-spy")
    p.add_argument("--py-spy-rate", type=int, default=100, metavar="HZ",
                   help="py-spy samples per second (default 100)")
    p.add_argument("-C", "--cwd", metavar="DIR", help="working directory of the command")
    p.add_argument("--calibrate-cores", action="store_true",
                   help="after the command ends, measure (~10 s) how much slower one core "
                        "computes while another is busy and what a DataLoader worker's batch "
                        "costs the main thread (needs PyTorch); the advisor's DataLoader-worker "
                        "estimates use both")
    p.add_argument("--keep-env", action="append", default=[], metavar="NAME",
                   help="keep this environment variable in the manifest for `sofa-gui try` "
                        "(repeatable; the performance-relevant ones are kept anyway)")
    return p


_VALUED = {"-o", "--output", "--interval", "--torch-window", "-C", "--cwd", "--py-spy-rate",
           "--keep-env"}


def split_argv(argv: list[str], valued=frozenset(_VALUED)) -> tuple[list[str], list[str]]:
    """(options, command): split at ``--``, else at the first word that is neither an
    option nor the value of one of the ``valued`` options."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in valued else 1
    return argv[:i], argv[i:]


def parse(argv: list[str]) -> RecordConfig:
    """Options, then the command (after ``--``, or from the first word that is not an option)."""
    opts, command = split_argv(list(argv))
    args = _parser().parse_args(opts)
    if not command:
        _parser().error("no command given (put it after --)")
    window = None
    try:
        if args.torch_window:
            window = parse_window(args.torch_window)
        return RecordConfig(
            command=tuple(command), cwd=Path(args.cwd) if args.cwd else None,
            output=Path(args.output) if args.output else None, interval_s=args.interval,
            torch=args.torch or window is not None, torch_window=window, py_spy=args.py_spy,
            py_spy_rate=args.py_spy_rate, calibrate_cores=args.calibrate_cores,
            keep_env=tuple(args.keep_env))
    except ValueError as exc:
        _parser().error(str(exc))
        raise  # unreachable: error() exits


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        config = parse(argv)
    except SystemExit as exc:  # argparse: usage error (2) or --help (0)
        return int(exc.code or 0)
    recorder = Recorder(config, echo=True, interactive=True)
    previous = _forward_signals(recorder)
    try:
        try:
            folder = recorder.start()
        except CommandError as exc:
            print(f"sofa-gui record: {exc}", file=sys.stderr)
            return 2
        print(f"sofa-gui record: recording into {folder}", file=sys.stderr)
        try:
            result = recorder.wait()
        except Exception as exc:  # noqa: BLE001 - e.g. disk full while finalising
            print(f"sofa-gui record: the recorder failed: {type(exc).__name__}: {exc} "
                  f"(data so far is in {folder})", file=sys.stderr)
            return _child_code(recorder)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"\nsofa-gui record: recording saved in {result.folder}", file=sys.stderr)
    print(summary_text(result), file=sys.stderr)
    print(f"Open it with: sofa-gui {result.folder}", file=sys.stderr)
    return result.exit_code


def _child_code(recorder: Recorder) -> int:
    """The child's exit code (128 + N for signal N) when it ended, else 1 (our failure)."""
    rc = recorder.proc.returncode if recorder.proc is not None else None
    if rc is None:
        return 1
    return 128 - rc if rc < 0 else rc


def _forward_signals(recorder: Recorder) -> dict:
    """SIGINT/SIGTERM/SIGHUP to the recorder go to the child; the recorder keeps going."""
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, lambda s, _f: recorder.forward_signal(s))
        except (ValueError, OSError):  # not the main thread, or unsupported
            continue
    return previous
