"""Helpers for the hostile-environment tests: run the CLI in a child under limits.

Tests run as root in CI, so an unwritable directory is no real obstacle; a file-size
limit (``RLIMIT_FSIZE``) makes every write past it fail with ``EFBIG`` -- as a full
disk would -- for root too.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _limits(fsize: int | None, address_space: int | None):
    def apply():
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return apply


def as_from_a_terminal() -> None:
    """A ``preexec_fn``: the child starts with SIGINT's default action, as a shell's
    foreground command does, so Python turns a Ctrl-C into KeyboardInterrupt. Tests
    started in the background (``&``, nohup) run with SIGINT ignored, and a child
    inherits that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(args: list[str], *, env: dict | None = None, fsize: int | None = None,
            address_space: int | None = None, timeout: float = 120,
            stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    """``python -m sofa_gui ARGS`` in a child with optional write/memory limits."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "sofa_gui", *args], env=full_env,
                          capture_output=True, text=True, timeout=timeout, stdin=stdin,
                          preexec_fn=_limits(fsize, address_space))


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The run ended with ``code`` and at most one stderr line, no traceback."""
    err = proc.stderr.strip()
    assert proc.returncode == code, (proc.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert len(err.splitlines()) <= 1, err
    return err
