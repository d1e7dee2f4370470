"""``sofa-gui try --fix ID [--rounds N] [--steps S] [-o DIR] [--json] -- CMD ...``.

Also ``sofa-gui try --fix ID --recording REC`` (the command, working directory and
allowed variables from REC's manifest; the try is kept in ``REC/tries/``),
``sofa-gui try --list PATH`` (the tries kept under ``PATH/tries/``) and
``sofa-gui try`` alone (the fixes it knows). Exit code: 0 when the runs completed
(whatever the verdict), 1 when a run failed, 2 for bad options or a fix that needs a
code change, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core.analysis.try_result import try_text
from ..core.analysis.tryable import TRYABLE, catalog_lines
from ..core.names import visible as terminal_safe
from .cli import split_argv
from .config import CommandError, resolve_executable
from .trial import (
    Trial,
    TryCancelled,
    TryConfig,
    TryError,
    default_folder,
    from_recording,
    list_tries,
)

USAGE = ("sofa-gui try --fix ID [--rounds N] [--steps S] [--warmup W] [-o DIR] [--json] "
         "(-- COMMAND [ARGS...] | --recording REC)\n       sofa-gui try --list PATH")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sofa-gui try", usage=USAGE,
        description="Run COMMAND as it is (BEFORE) and with one fix applied from outside "
                    "(AFTER), interleaved for N rounds under the same profiler window, and "
                    "say whether the advisor's predicted speed-up held. The program's files "
                    "are not changed. Without --fix: the fixes it knows.")
    p.add_argument("--fix", metavar="ID", help="the fix to apply (see `sofa-gui try`)")
    p.add_argument("--rounds", type=int, default=3, metavar="N",
                   help="BEFORE/AFTER pairs (default 3)")
    p.add_argument("--steps", type=int, default=10, metavar="S",
                   help="steps timed without the profiler, then the same number profiled, "
                        "per run (default 10); steps are the batches taken from DataLoaders")
    p.add_argument("--warmup", type=int, default=3, metavar="W",
                   help="steps left out at the start of each run (default 3)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="folder of the try (default ./sofa_runs/tries/<time>-<fix>-<name>/, "
                        "or REC/tries/... with --recording)")
    p.add_argument("--recording", metavar="REC",
                   help="run the command of this recording (its manifest's command, working "
                        "directory and kept variables)")
    p.add_argument("-C", "--cwd", metavar="DIR", help="working directory of the command")
    p.add_argument("--json", action="store_true", help="print the result as one JSON document")
    p.add_argument("--list", metavar="PATH",
                   help="list the tries kept under PATH/tries/ (a recording or a folder)")
    return p


_VALUED = {"--fix", "--rounds", "--steps", "--warmup", "-o", "--output", "--recording",
           "-C", "--cwd", "--list"}


def main(argv: list[str] | None = None) -> int:
    opts, command = split_argv(list(sys.argv[1:] if argv is None else argv), _VALUED)
    try:
        args = parser().parse_args(opts)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.list:
        print(terminal_safe("\n".join(list_text(Path(args.list)))))
        return 0
    if not args.fix:
        print("Fixes sofa-gui try applies (id, framework, how, what):")
        print("\n".join(catalog_lines()))
        return 0
    if args.fix not in TRYABLE:
        return _fail(f"unknown fix {args.fix!r}; known: {', '.join(TRYABLE)}")
    try:
        config = config_from(args, command)
    except (ValueError, CommandError) as exc:
        return _fail(str(exc))
    return run(config, args.json)


def run(config, as_json: bool) -> int:
    print(f"sofa-gui try: {config.fix.id} on {' '.join(config.command)}; runs in "
          f"{config.folder}", file=sys.stderr)
    trial = Trial(config, on_progress=progress_printer(sys.stderr))
    try:
        result = trial.run()
    except TryError as exc:  # the run's stderr tail: untrusted text
        print(terminal_safe(f"sofa-gui try: {exc}"), file=sys.stderr)
        return 1
    except CommandError as exc:
        print(f"sofa-gui try: {exc}", file=sys.stderr)
        return 2
    except (TryCancelled, KeyboardInterrupt):
        trial.cancel()
        print("sofa-gui try: interrupted", file=sys.stderr)
        return 130
    if as_json:
        json.dump(result, sys.stdout, indent=1, allow_nan=False, default=str)
        sys.stdout.write("\n")
    else:
        lines = try_text(result)
        if result.get("repeated_diff"):  # what else changed, pair by pair
            from ..core.analysis.diff_repeated import repeated_text
            lines = repeated_text(result["repeated_diff"]) + [""] + lines
        print(terminal_safe("\n".join(lines)))
        print(f"Runs, their output and try.json: {config.folder}")
    return 0


def _fail(message: str) -> int:
    first, *rest = message.splitlines()
    print(f"sofa-gui try: {first}", file=sys.stderr)
    for line in rest:
        print(line, file=sys.stderr)
    return 2


def config_from(args, command: list[str]) -> TryConfig:
    """The try the options describe; ValueError / CommandError saying what is wrong."""
    fix = TRYABLE[args.fix]
    env: dict[str, str] = {}
    cwd = Path(args.cwd) if args.cwd else None
    recording = None
    if args.recording:
        if command:
            raise ValueError("give either --recording or a command after --, not both")
        recording = Path(args.recording)
        command, rec_cwd, env = from_recording(recording)
        cwd = cwd or rec_cwd
    if not command:
        raise ValueError("no command given (put it after --, or give --recording REC)")
    resolve_executable(command, cwd)  # CommandError before any run or folder
    base = recording if recording is not None else Path.cwd() / "sofa_runs"
    folder = Path(args.output) if args.output else default_folder(base, fix.id, command)
    if folder.exists() and any(folder.iterdir()):
        raise ValueError(f"output folder already exists and is not empty: {folder}")
    return TryConfig(fix=fix, command=tuple(command), folder=folder, cwd=cwd, env=env,
                     rounds=args.rounds, steps=args.steps, warmup=args.warmup,
                     recording=recording)


def list_text(path: Path) -> list[str]:
    """One line per try kept under ``path``: when, fix, verdict."""
    tries = list_tries(path)
    if not tries:
        return [f"no tries under {path}"]
    return [f"{Path(t['folder']).name}  {t.get('fix')}: {t.get('verdict')}" for t in tries]


def progress_printer(stream):
    def show(done: int, total: int, what: str) -> None:
        print(f"sofa-gui try: [{done}/{total}] {what}", file=stream, flush=True)
    return show
