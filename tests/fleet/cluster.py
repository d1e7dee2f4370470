"""A real Dask cluster on 127.0.0.1 for tests: scheduler + workers as processes.

Every process started here (and its children) carries a marker in its environment;
:func:`leftovers` finds any that outlive the test, so no test leaves a process behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
MARK = "SOFA_GUI_TEST_MARK"


def marked_env(mark: str, cache: Path) -> dict:
    env = dict(os.environ)
    env[MARK] = mark
    env["SOFA_GUI_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def leftovers(mark: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARK) == mark:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def stop(procs: list[subprocess.Popen], mark: str) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    for p in leftovers(mark):  # spawned children of a killed parent
        try:
            p.kill()
            p.wait(timeout=10)
        except psutil.Error:
            pass


class Cluster:
    """``dask scheduler`` and ``n`` ``dask worker --no-nanny`` processes (killable for real)."""

    def __init__(self, tmp: Path, n_workers: int = 2):
        self.mark = uuid.uuid4().hex
        self.env = marked_env(self.mark, tmp / "worker-cache")
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        sched_file = tmp / "scheduler.json"
        self.procs.append(self._start("distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                      "--port", "0", "--dashboard-address", "127.0.0.1:0",
                                      "--scheduler-file", str(sched_file),
                                      "--idle-timeout", "600", log=tmp / "scheduler.log"))
        self.address = self._wait_address(sched_file)
        for k in range(n_workers):
            w = self._start("distributed.cli.dask_worker", self.address, "--nthreads", "1",
                            "--no-nanny", "--host", "127.0.0.1", "--name", f"w{k}",
                            "--dashboard-address", "127.0.0.1:0", "--death-timeout", "60",
                            log=tmp / f"worker{k}.log")
            self.workers.append(w)
            self.procs.append(w)
        self._wait_workers(n_workers)

    def _start(self, module: str, *args: str, log: Path) -> subprocess.Popen:
        fh = open(log, "wb")  # noqa: SIM115 (kept open for the process's life)
        return subprocess.Popen([sys.executable, "-m", module, *args], env=self.env,
                                stdout=fh, stderr=subprocess.STDOUT)

    def _wait_address(self, f: Path, timeout: float = 60) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if f.exists():
                try:
                    return json.loads(f.read_text())["address"]
                except (ValueError, KeyError):
                    pass
            time.sleep(0.1)
        raise RuntimeError("dask scheduler did not start")

    def _wait_workers(self, n: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=30) as c:
            c.wait_for_workers(n, timeout=90)

    def close(self) -> None:
        stop(self.procs, self.mark)
