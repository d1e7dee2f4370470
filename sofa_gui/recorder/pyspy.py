"""Python stack samples of the child with ``py-spy record --pid`` (chrometrace output).

py-spy attaches to the child's tree (``--subprocesses``) right after it starts;
it stops by itself when the tree exits and then writes its file, which we
rename into place. Its ``ts`` are µs since py-spy started; the launch epoch
recorded here maps them onto the recording's clock (within a few ms, measured
against a known wall-clock transition in the child). When py-spy cannot attach
(no ptrace permission, not a Python program) the manifest says why.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

PYSPY_DIR = "pyspy"
PYSPY_FILE = "pyspy.json"
PYSPY_LOG = "pyspy.log"


def find_pyspy() -> str | None:
    """The py-spy binary: on PATH, or beside this interpreter (a venv's bin/)."""
    found = shutil.which("py-spy")
    if found:
        return found
    cand = Path(sys.executable).with_name("py-spy")
    return str(cand) if cand.is_file() and os.access(cand, os.X_OK) else None


def _ptrace_hint() -> str:
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return ""
    if scope != "0":
        return (f" (kernel.yama.ptrace_scope={scope}: run as root, give py-spy CAP_SYS_PTRACE, "
                "or set ptrace_scope to 0)")
    return ""


class PySpy:
    """One py-spy process sampling the child's tree."""

    def __init__(self, folder: Path, rate: int = 100):
        self.dir = Path(folder) / PYSPY_DIR
        self.rate = rate
        self.binary = find_pyspy()
        self.proc: subprocess.Popen | None = None
        self.launch_epoch_ns: int | None = None
        self.reason = "" if self.binary else \
            "py-spy is not installed (pip install 'sofa-gui[profile]')"
        self._log = None

    @property
    def final_path(self) -> Path:
        return self.dir / PYSPY_FILE

    @property
    def _tmp_path(self) -> Path:
        return self.dir / f".{PYSPY_FILE}.tmp"

    def start(self, pid: int) -> bool:
        """Attach to ``pid`` (and its children); False with :attr:`reason` when it cannot."""
        if not self.binary:
            return False
        self.dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.dir / PYSPY_LOG, "wb")
        cmd = [self.binary, "record", "--pid", str(pid), "--subprocesses", "--threads", "--rate",
               str(self.rate), "--format", "chrometrace", "--output", str(self._tmp_path)]
        self.launch_epoch_ns = time.time_ns()
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            self.reason = f"py-spy could not start: {exc}"
            self._log.close()
            return False
        return True

    def stop(self, timeout_s: float = 15.0) -> None:
        """Wait for py-spy to finish writing (it stops when the child exits); SIGINT, then kill."""
        if self.proc is None:
            return
        for sig in (None, signal.SIGINT, signal.SIGKILL):
            if sig is not None and self.proc.poll() is None:
                try:
                    self.proc.send_signal(sig)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(timeout_s if sig is None else 10.0)
                break
            except subprocess.TimeoutExpired:
                continue
        if self._log is not None:
            self._log.close()
        if self._tmp_path.is_file() and self._tmp_path.stat().st_size > 0:
            os.replace(self._tmp_path, self.final_path)
        elif self.proc.returncode not in (0, None) or not self.final_path.exists():
            self.reason = self._failure_reason()

    def _failure_reason(self) -> str:
        try:
            text = (self.dir / PYSPY_LOG).read_text(errors="replace")
        except OSError:
            text = ""
        err = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("Error")),
                   "")
        rc = self.proc.returncode if self.proc is not None else None
        why = err or f"py-spy exited with code {rc} and wrote no samples"
        if re.search(r"permission|ptrace|not permitted", text, re.I):
            why += _ptrace_hint()
        return f"py-spy could not sample the child: {why}"

    def describe(self) -> dict:
        if self.final_path.exists():
            out = {"recorded": True, "file": f"{PYSPY_DIR}/{PYSPY_FILE}", "rate_hz": self.rate,
                   "binary": self.binary, "launch_epoch_ns": self.launch_epoch_ns,
                   "clock": "ts = µs since py-spy started; epoch = launch_epoch_ns + ts*1000"}
            m = re.search(r"Samples: (\d+) Errors: (\d+)", self._log_text())
            if m:
                out.update(samples=int(m.group(1)), sampling_errors=int(m.group(2)))
            return out
        return {"recorded": False, "reason": self.reason or "py-spy wrote no file"}

    def _log_text(self) -> str:
        try:
            return (self.dir / PYSPY_LOG).read_text(errors="replace")
        except OSError:
            return ""
