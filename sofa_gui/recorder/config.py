"""What to record and where: one immutable :class:`RecordConfig` per run."""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ROOT = "sofa_runs"
MIN_INTERVAL_S = 0.01


class CommandError(Exception):
    """The command cannot be started (missing, not executable); exit code 2."""


@dataclass(frozen=True)
class RecordConfig:
    """Options of one recording.

    ``output`` is the recording folder itself; ``None`` picks
    ``./sofa_runs/<timestamp>-<command name>/`` (relative to the recorder's cwd).
    ``torch_window`` is (start, duration) in seconds after the child starts.
    """

    command: tuple[str, ...]
    cwd: Path | None = None
    output: Path | None = None
    interval_s: float = 0.1
    flush_interval_s: float = 2.0
    torch: bool = False
    torch_window: tuple[float, float] | None = None
    py_spy: bool = False
    py_spy_rate: int = 100
    env: dict[str, str] = field(default_factory=dict)  # extra variables for the child
    stop_grace_s: float = 10.0  # Stop: SIGINT, then SIGTERM after this, then SIGKILL
    calibrate_cores: bool = False  # after the run: how much a busy core slows another
    # a calibration measured once for several runs (``sofa-gui try``): written into the
    # manifest's host section as if measured after this run
    calibration: dict = field(default_factory=dict)
    keep_env: tuple[str, ...] = ()  # variables kept for ``sofa-gui try`` besides the usual

    def __post_init__(self):
        if not self.command:
            raise ValueError("no command given")
        if not self.interval_s >= MIN_INTERVAL_S:
            raise ValueError(f"--interval must be at least {MIN_INTERVAL_S} s")
        if self.torch_window is not None and not self.torch:
            raise ValueError("--torch-window needs --torch")
        if not 1 <= self.py_spy_rate <= 10000:
            raise ValueError("--py-spy-rate must be between 1 and 10000 samples per second")


def parse_window(text: str) -> tuple[float, float]:
    """``"START:DURATION"`` in seconds (``"5:10"``, ``"0.5:2"``) -> (start, duration)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*:\s*([0-9]*\.?[0-9]+)\s*", text or "")
    if not m:
        raise ValueError(f"bad --torch-window {text!r}: expected START:DURATION in seconds")
    start, dur = float(m.group(1)), float(m.group(2))
    if dur <= 0:
        raise ValueError("--torch-window DURATION must be > 0")
    return start, dur


def resolve_executable(command: tuple[str, ...] | list[str], cwd: Path | None) -> str:
    """Absolute path of the program to run, or :class:`CommandError` saying why not."""
    prog = command[0]
    if os.sep in prog or (os.altsep and os.altsep in prog):
        path = Path(prog)
        if not path.is_absolute():
            path = Path(cwd or os.getcwd()) / path
        if not path.exists():
            raise CommandError(f"command not found: {prog}")
        if path.is_dir():
            raise CommandError(f"not a program (it is a folder): {prog}")
        if not os.access(path, os.X_OK):
            raise CommandError(f"permission denied: {prog} is not executable")
        return str(path)
    found = shutil.which(prog)
    if found is None:
        raise CommandError(f"command not found: {prog}")
    return found


def command_label(command: tuple[str, ...] | list[str]) -> str:
    """Short file-name-safe name for the run: the script for ``python x.py``, else the program."""
    prog = Path(command[0]).name
    label = prog
    if re.match(r"python[0-9.]*$", prog):
        args = list(command[1:])
        for i, arg in enumerate(args):
            if arg == "-m" and i + 1 < len(args):
                label = args[i + 1]
                break
            if arg == "-c":
                break
            if not arg.startswith("-"):
                label = Path(arg).stem or prog
                break
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._") or "run"
    return label[:40]


def default_output(command, root: Path | None = None, now: float | None = None) -> Path:
    """A fresh ``<root>/<YYYYmmdd-HHMMSS>-<label>`` that does not exist yet."""
    root = Path(root) if root is not None else Path.cwd() / DEFAULT_ROOT
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = root / f"{stamp}-{command_label(command)}"
    cand, n = base, 2
    while cand.exists():
        cand = base.with_name(f"{base.name}-{n}")
        n += 1
    return cand
