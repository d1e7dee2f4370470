"""``sofa-gui try``: run a program as it is and with one fix, interleaved, and measure.

Each round records BEFORE then AFTER (``b1 a1 b2 a2 ...`` in the try's folder) with
``record --torch`` and the same profiler window: the shim counts steps as the batches
the program takes from its DataLoaders, times ``steps`` of them without the profiler,
profiles the next ``steps`` and ends the run (``sofa_try``). The program's files are
never touched: the fix reaches it through its environment (:mod:`..core.analysis.tryable`).
Each run's stdout, stderr and exit code are kept in its folder; a run that fails stops
the try with its error. The result (:func:`..core.analysis.try_result.summarize`) goes
to ``try.json`` in the folder.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.analysis.tryable import SHIM_PREFIX, Tryable, env_for
from .calibrate import calibrate_cores
from .config import RecordConfig, command_label
from .runner import Recorder

TRY_FILE = "try.json"
TRIES_DIR = "tries"
STEPS_FILE = "try-steps.json"
APPLIED_FILE = "try-applied.json"
SIDES = ("before", "after")


class TryError(Exception):
    """A run of the try failed or could not start; the message says which and why."""


class TryCancelled(Exception):
    """The user cancelled the try."""


@dataclass
class TryConfig:
    """What to try: ``fix`` on ``command`` run in ``cwd`` with ``env`` added."""

    fix: Tryable
    command: tuple[str, ...]
    folder: Path
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    rounds: int = 3
    steps: int = 10
    warmup: int = 3
    recording: Path | None = None  # the recording the try belongs to, if any

    def __post_init__(self):
        if self.rounds < 1:
            raise ValueError("--rounds must be at least 1")
        if self.steps < 1:
            raise ValueError("--steps must be at least 1")
        if not self.fix.from_outside:
            raise ValueError(needs_code_text(self.fix))


def needs_code_text(fix: Tryable) -> str:
    return (f"{fix.id} needs a change to the program; it cannot be applied from outside. "
            f"The change ({fix.summary}):\n{fix.change}")


def default_folder(base: Path, fix_id: str, command) -> Path:
    """``<base>/tries/<YYYYmmdd-HHMMSS>-<fix>-<program>`` that does not exist yet."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = Path(base) / TRIES_DIR
    cand = root / f"{stamp}-{fix_id}-{command_label(command)}"
    n = 2
    while cand.exists():
        cand = cand.with_name(f"{stamp}-{fix_id}-{command_label(command)}-{n}")
        n += 1
    return cand


def free_cores(sample_s: float = 0.5) -> int:
    """Cores left idle by other processes now (rounded down, at least 1)."""
    import psutil

    busy = psutil.cpu_percent(interval=sample_s, percpu=True)
    return max(1, int(sum(max(0.0, 100.0 - b) for b in busy) / 100.0))


Progress = Callable[[int, int, str], None]


class Trial:
    """One try: :meth:`run` records the rounds; :meth:`cancel` from any thread stops it."""

    def __init__(self, config: TryConfig, on_progress: Progress | None = None,
                 cores_free: int | None = None):
        self.config = config
        self.on_progress = on_progress
        self.cores_free = cores_free
        self.calibration: dict = {}  # measured once, written into every run's manifest
        self._cancel = threading.Event()
        self._recorder: Recorder | None = None
        self._lock = threading.Lock()

    def cancel(self) -> None:
        self._cancel.set()
        with self._lock:
            if self._recorder is not None and self._recorder.proc is not None:
                self._recorder.request_stop()

    def run(self) -> dict:
        """Record the rounds, then analyze them; the result dict (also in ``try.json``)."""
        from ..core.analysis.try_result import summarize

        cfg = self.config
        cfg.folder.mkdir(parents=True, exist_ok=True)
        cores = self.cores_free if self.cores_free is not None else free_cores()
        total = 2 * cfg.rounds
        if cfg.fix.planned:
            self._progress(0, total, "measuring how the cores share work (about 10 s)")
            self.calibration = calibrate_cores([])
        runs: list[dict] = []
        after_env, plan = None, None
        for i in range(cfg.rounds):
            for side in SIDES:
                if side == "after" and after_env is None:
                    plan = self._plan(runs[0]) if cfg.fix.planned else None
                    after_env = env_for(cfg.fix, {**os.environ, **cfg.env}, cores, plan)
                self._progress(len(runs), total, f"{side.upper()} run {i + 1} of {cfg.rounds}")
                env = dict(cfg.env, **(after_env if side == "after" else {}))
                runs.append(self._record(side, i + 1, env))
        self._progress(total, total, "analyzing the runs")
        result = summarize(cfg.fix, cfg.folder, runs, after_env, cores, plan)
        write_json(cfg.folder / TRY_FILE, result)
        return result

    def _plan(self, before: dict) -> dict | None:
        """The settings the first BEFORE run's advisor gives the fix (its worker count and
        main threads for this machine and this loop); None when it has none."""
        from ..core.analysis.try_result import planned_settings

        self._progress(1, 2 * self.config.rounds, "planning the fix from BEFORE run 1")
        return planned_settings(self.config.fix, self.config.folder / before["folder"])

    def _progress(self, done: int, total: int, what: str) -> None:
        if self._cancel.is_set():
            raise TryCancelled("cancelled")
        if self.on_progress is not None:
            self.on_progress(done, total, what)

    def _record(self, side: str, round_no: int, env: dict[str, str]) -> dict:
        cfg = self.config
        folder = cfg.folder / f"{side[0]}{round_no}"
        env = dict(env, **{f"{SHIM_PREFIX}STEPS": f"{cfg.warmup}:{cfg.steps}",
                           f"{SHIM_PREFIX}FIX": cfg.fix.id if side == "after" else "none"})
        rec_cfg = RecordConfig(command=cfg.command, cwd=cfg.cwd, output=folder, torch=True,
                               env=env, calibration=self.calibration)
        logs = {name: open(folder.parent / f".{folder.name}-{name}.tmp", "wb")
                for name in ("stdout", "stderr")}
        recorder = Recorder(rec_cfg, on_output=lambda name, chunk: logs[name].write(chunk))
        with self._lock:
            self._recorder = recorder
        try:
            recorder.start()
            with self._lock:
                if self._cancel.is_set():  # cancelled while the child was starting
                    recorder.request_stop()
            result = recorder.wait()
        finally:
            with self._lock:
                self._recorder = None
            for f in logs.values():
                f.close()
        for name in logs:
            os.replace(folder.parent / f".{folder.name}-{name}.tmp", folder / f"{name}.txt")
        run = run_record(side, round_no, folder, result.exit_code, result.duration_s,
                         cfg.warmup, cfg.steps)
        if self._cancel.is_set():
            raise TryCancelled("cancelled")
        if result.exit_code != 0:
            raise TryError(failure_text(run, cfg.folder))
        return run


def run_record(side: str, round_no: int, folder: Path, exit_code: int, duration_s: float,
               warmup: int, steps: int) -> dict:
    """What the result keeps of one run: where, how it ended, its steps without profiler."""
    doc = read_json(folder / STEPS_FILE) or {}
    starts = doc.get("step_starts_ns") or []
    durs = [(b - a) / 1e6 for a, b in zip(starts, starts[1:])]
    unprofiled = durs[warmup:warmup + steps]
    applied = (read_json(folder / APPLIED_FILE) or {}).get("applied") or {}
    return {"side": side, "round": round_no, "folder": folder.name, "exit_code": exit_code,
            "duration_s": duration_s, "steps_taken": len(starts),
            "unprofiled_step_ms": [round(d, 3) for d in unprofiled],
            "applied": applied if side == "after" else {},
            "stdout": f"{folder.name}/stdout.txt", "stderr": f"{folder.name}/stderr.txt"}


def failure_text(run: dict, folder: Path | None = None, lines: int = 5) -> str:
    """"AFTER run 1 failed (exit code 1): <last lines of its stderr>"."""
    tail = ""
    path = folder / run["stderr"] if folder is not None else None
    if path is not None and path.is_file():
        tail = "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return (f"{run['side'].upper()} run {run['round']} failed (exit code {run['exit_code']})"
            + (f":\n{tail}" if tail else f"; its output is in {run['stderr']}"))


def read_json(path: Path) -> dict | None:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False, default=str) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)


def from_recording(folder: Path) -> tuple[list[str], Path, dict[str, str]]:
    """(command, working directory, variables) kept in a recording's manifest for a re-run;
    ValueError naming the recording and the problem. Only a recording made by the same
    user is re-run: the manifest chooses the command."""
    path = Path(folder) / "manifest.json"
    doc = read_json(path)
    if doc is None:
        raise ValueError(f"{folder}: not a recording (no readable manifest.json)")
    if hasattr(os, "getuid") and path.stat().st_uid != os.getuid():
        raise ValueError(f"{folder}: recorded by another user; its command is not run")
    rerun = doc.get("rerun") or {"command": doc.get("command"), "cwd": doc.get("cwd"),
                                 "env": {}}
    command, cwd, env = rerun.get("command"), rerun.get("cwd"), rerun.get("env") or {}
    if not (isinstance(command, list) and command and all(isinstance(c, str) for c in command)
            and isinstance(cwd, str) and isinstance(env, dict)):
        raise ValueError(f"{folder}: its manifest does not say which command ran")
    return command, Path(cwd), {str(k): str(v) for k, v in env.items()}


def list_tries(path: Path) -> list[dict]:
    """The tries kept under ``path/tries/`` (or ``path`` itself when it is that folder),
    oldest first, each its ``try.json`` with ``folder`` added."""
    path = Path(path)
    root = path if path.name == TRIES_DIR else path / TRIES_DIR
    out = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        doc = read_json(folder / TRY_FILE)
        if doc is not None:
            out.append({**doc, "folder": str(folder)})
    return out
