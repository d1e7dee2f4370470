"""Run one command under the recorder: launch, supervise, forward signals, finalise.

Order of events: check the command (exit 2 before any folder exists), create
the folder and a ``running`` manifest, start the samplers (so the baseline
before the child is recorded), start the child in its own process group,
attach py-spy, wait. Signals the user sends to the recorder are forwarded to
the child's group; a Stop request sends SIGINT, then SIGTERM and SIGKILL after
``stop_grace_s`` each. Whatever way the child ends, the folder is finalised:
last samples flushed, parts compacted, py-spy and torch traces collected, the
manifest rewritten with the exit status and what was recorded.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.importers.recording import contract
from ..core.importers.recording.contract import (
    COUNTERS_FILE,
    COUNTERS_PARTS,
    OUTPUT_LOG,
    PROCESSES_FILE,
    PROCESSES_PARTS,
    TORCH_DIR,
)
from .childio import OutputPump
from .clock import EpochClock
from .config import CommandError, RecordConfig, default_output, resolve_executable
from .manifest import environment_summary, new_manifest, rerun_doc, time_doc, write_manifest
from .nvml import GpuSampler, Nvml
from .parts import PartWriter, compact
from .pyspy import PySpy
from .sampler import HostSampler, host_info
from .torch_shim import SHIM_DIR
from .torchinfo import collect_torch

log = logging.getLogger(__name__)

#: The child leads its own process group, so signals reach its whole tree and the
#: terminal's Ctrl-C reaches only the recorder (which forwards it once).
_OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}


def _default_sigint() -> None:
    """In the forked child, before exec: SIGINT back to its default action.

    A recorder started in the background (``&`` in a script, some CI shells) inherits
    SIGINT ignored, and exec passes that on; the recorded program would then ignore the
    stop the recorder sends it. Only used when SIGINT is ignored here.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_restorer():
    return _default_sigint if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else None


@dataclass
class RecordResult:
    """What the CLI summary and the dialog need once a recording is complete."""

    folder: Path
    exit_code: int  # the recorder's: the child's code, or 128 + signal number
    returncode: int  # Popen's: negative when a signal ended the child
    signal: str | None
    duration_s: float
    mean_cpu: float | None
    busiest_core: tuple[int, float] | None
    mean_tree_cpu: float | None
    peak_rss: int
    gpu_mean: dict[int, float] | None
    gpu_reason: str
    sources: dict = field(default_factory=dict)
    stopped_by: str | None = None


class Recorder:
    """One recording: ``start()`` then ``wait()`` (or ``run()``); stop from any thread."""

    def __init__(self, config: RecordConfig, *, echo: bool = False, interactive: bool = False,
                 on_output=None, on_sample=None):
        self.config = config
        self.echo = echo
        self.interactive = interactive
        self.on_output = on_output
        self.on_sample = on_sample
        self.folder: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.stopped_by: str | None = None
        self._signals_forwarded = 0
        self._stop_at: float | None = None
        self._stop_stage = 0
        self._lock = threading.RLock()  # signal handlers run on the thread that may hold it
        self._pending: list[int] = []  # signals that arrived before the child existed
        self._start_ns = 0
        self._leftover_signals: list[str] = []  # sent to the group after the child ended

    # -- public ---------------------------------------------------------------------
    def run(self) -> RecordResult:
        self.start()
        return self.wait()

    def start(self) -> Path:
        """Validate, create the folder, start sampling and the child; CommandError on bad input."""
        cfg = self.config
        cwd = Path(cfg.cwd).expanduser().resolve() if cfg.cwd else Path.cwd()
        if not cwd.is_dir():
            raise CommandError(f"working directory not found: {cwd}")
        executable = resolve_executable(cfg.command, cwd)
        folder = Path(cfg.output).expanduser() if cfg.output else default_output(cfg.command)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise CommandError(f"output folder already exists and is not empty: {folder}")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(
                f"cannot create output folder {folder}: {exc.strerror or exc}") from None
        self.folder = folder.resolve()
        try:
            self._start_in(self.folder, executable, cwd)
        except OSError as exc:  # e.g. a read-only or full file system
            self._abandon()
            raise CommandError(f"cannot write into {folder}: {exc.strerror or exc}") from None
        except BaseException:
            self._abandon()
            raise
        return self.folder

    def request_stop(self) -> None:
        """Ask the child to stop: SIGINT now, SIGTERM and SIGKILL if it lingers."""
        with self._lock:
            if self._stop_at is None:
                self._stop_at = time.monotonic()
                self.stopped_by = self.stopped_by or "stop requested (SIGINT)"
                self._send(signal.SIGINT)

    def forward_signal(self, signum: int) -> None:
        """Pass a signal the recorder received to the child's group (3rd time: SIGKILL).

        Before the child exists the signal is kept and delivered as soon as it does.
        """
        with self._lock:
            if self.proc is None:
                self._pending.append(signum)
                return
            self._signals_forwarded += 1
            name = signal.Signals(signum).name
            self.stopped_by = self.stopped_by or f"{name} forwarded to the child"
            self._send(signal.SIGKILL if self._signals_forwarded >= 3 else signum)

    def wait(self) -> RecordResult:
        """Wait for the child (escalating a Stop), then finalise the folder."""
        grace = self.config.stop_grace_s
        while True:
            try:
                self.proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            with self._lock:
                if self._stop_at is None:
                    continue
                waited = time.monotonic() - self._stop_at
                if waited > grace * (self._stop_stage + 1) and self._stop_stage < 2:
                    self._stop_stage += 1
                    self._send(signal.SIGTERM if self._stop_stage == 1 else signal.SIGKILL)
        end_ns = self.clock.now()
        self._stop_leftovers()
        return self._finalise(end_ns)

    def _stop_leftovers(self) -> None:
        """Stop what the child left running in its process group (SIGINT, SIGTERM, SIGKILL).

        A grandchild that ignores SIGINT would otherwise outlive the recording,
        holding the output pipes and the GPU. What it took is noted in the manifest.
        """
        pgid = self.proc.pid
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if not _group_alive(pgid):
                return
            try:
                os.killpg(pgid, signum)
            except (ProcessLookupError, PermissionError):
                return
            self._leftover_signals.append(signal.Signals(signum).name)
            deadline = time.monotonic() + min(self.config.stop_grace_s, _LEFTOVER_GRACE_S)
            while time.monotonic() < deadline and _group_alive(pgid):
                time.sleep(0.02)

    # -- start ----------------------------------------------------------------------
    def _start_in(self, folder: Path, executable: str, cwd: Path) -> None:
        cfg = self.config
        self.clock = EpochClock()
        self.counters = PartWriter(folder / COUNTERS_PARTS, contract.COUNTERS)
        self.processes = PartWriter(folder / PROCESSES_PARTS, contract.PROCESSES)
        self.nvml = Nvml()
        host = host_info()
        host["gpus"] = self.nvml.gpus
        env, added = self._child_env(folder)
        self.manifest = new_manifest(
            cfg.command, executable, str(cwd), environment_summary(env, added), host,
            self.clock.describe(),
            {"interval_s": cfg.interval_s, "flush_interval_s": cfg.flush_interval_s,
             "torch": cfg.torch, "torch_window_s": list(cfg.torch_window or []) or None,
             "py_spy": cfg.py_spy})
        self.manifest["rerun"] = rerun_doc(cfg.command, str(cwd), {**os.environ, **cfg.env},
                                           cfg.keep_env)
        write_manifest(folder, self.manifest)
        self.host = HostSampler(self.clock, self.counters, self.processes, cfg.interval_s,
                                cfg.flush_interval_s, on_sample=self._on_host_sample)
        self.gpu = GpuSampler(self.nvml, self.clock, self.counters, cfg.interval_s) \
            if self.nvml.ok else None
        self.host.start()
        if self.gpu is not None:
            self.gpu.start()
        self._start_ns = self.clock.now()
        if cfg.torch:
            env["SOFA_GUI_T0_NS"] = str(self._start_ns)  # --torch-window counts from here
        stdin = None if self.interactive and not _stdin_is_tty() else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                [executable, *cfg.command[1:]], cwd=str(cwd), env=env, stdin=stdin,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                preexec_fn=_sigint_restorer(), **_OWN_GROUP)
        except OSError as exc:
            raise CommandError(f"cannot run {cfg.command[0]}: {exc.strerror or exc}") from None
        for signum in self._pending:
            self.forward_signal(signum)
        self.host.watch(self.proc.pid)
        echo = {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer} if self.echo else None
        self.pump = OutputPump(folder / OUTPUT_LOG, echo, self.on_output)
        self.pump.start(self.proc.stdout, self.proc.stderr)
        self.pyspy = PySpy(folder, cfg.py_spy_rate) if cfg.py_spy else None
        if self.pyspy is not None:
            self.pyspy.start(self.proc.pid)
        self.manifest["start"] = time_doc(self._start_ns)
        self.manifest["child_pid"] = self.proc.pid
        self.manifest["stdin"] = "inherited" if stdin is None else "/dev/null"
        write_manifest(folder, self.manifest)

    def _child_env(self, folder: Path) -> tuple[dict[str, str], dict[str, str]]:
        cfg = self.config
        env = dict(os.environ)
        added = {"SOFA_GUI_RECORDING": str(folder)}
        if "PYTHONUNBUFFERED" not in env:
            added["PYTHONUNBUFFERED"] = "1"  # output shows up live in the log
        added.update(cfg.env)
        if cfg.torch:
            old = env.get("PYTHONPATH", "")
            added["PYTHONPATH"] = str(SHIM_DIR) + (os.pathsep + old if old else "")
            added["SOFA_GUI_TORCH_DIR"] = str(folder / TORCH_DIR)
            if cfg.torch_window:
                added["SOFA_GUI_TORCH_WINDOW"] = "{:g}:{:g}".format(*cfg.torch_window)
        env.update(added)
        return env, added

    def _abandon(self) -> None:
        """Starting failed: stop what started, child included, and leave no folder behind."""
        if self.proc is not None and self.proc.poll() is None:
            self._send(signal.SIGKILL)
            self.proc.wait()
        for sampler in (getattr(self, "host", None), getattr(self, "gpu", None)):
            if sampler is not None and sampler.is_alive():
                sampler.stop()
        nvml = getattr(self, "nvml", None)
        if nvml is not None:
            nvml.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _on_host_sample(self, live: dict) -> None:
        if self.gpu is not None:
            live.update(self.gpu.latest)
        if self._start_ns:
            live["elapsed_s"] = (live["t"] - self._start_ns) / 1e9
        if self.on_sample is not None:
            self.on_sample(live)

    def _send(self, signum: int) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            try:
                self.proc.send_signal(signum)
            except ProcessLookupError:
                pass

    # -- finish ---------------------------------------------------------------------
    def _finalise(self, end_ns: int) -> RecordResult:
        m, folder = self.manifest, self.folder
        notes = m["notes"]
        steps = [("stop the samplers", self.host.stop),
                 ("stop the GPU sampler", self.gpu.stop if self.gpu is not None else None),
                 ("close NVML", self.nvml.close), ("collect the output", self.pump.close),
                 ("collect py-spy", self.pyspy.stop if self.pyspy is not None else None),
                 ("flush the last samples", self.host.flush)]
        for what, step in steps:
            if step is None:
                continue
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the folder must still be finalised
                log.warning("could not %s: %s", what, exc)
                log.debug("could not %s", what, exc_info=True)
                notes.append(f"could not {what}: {type(exc).__name__}: {exc}")
        rows = {}
        for parts, target, sch in ((COUNTERS_PARTS, COUNTERS_FILE, contract.COUNTERS),
                                   (PROCESSES_PARTS, PROCESSES_FILE, contract.PROCESSES)):
            try:
                rows[target] = compact(folder / parts, folder / target, sch)
            except Exception as exc:  # noqa: BLE001 - keep the parts, say so
                notes.append(f"could not compact {parts}/ into {target}: {exc}")
        rc = self.proc.returncode
        sig = signal.Signals(-rc).name if rc < 0 and -rc in signal.valid_signals() else None
        exit_code = 128 - rc if rc < 0 else rc
        m["status"] = "complete"
        m["end"] = time_doc(end_ns)
        m["duration_s"] = round((end_ns - self._start_ns) / 1e9, 6)
        m["exit"] = {"code": rc if rc >= 0 else None, "signal": sig, "recorder_exit_code":
                     exit_code, "stopped_by": self.stopped_by}
        if self._leftover_signals:
            m["exit"]["leftover_processes_stopped_with"] = self._leftover_signals
            notes.append("processes the command left running in its group were stopped ("
                         + ", ".join(self._leftover_signals) + ")")
        if self.pump.error is not None:
            notes.append(f"{OUTPUT_LOG} is incomplete: {self.pump.dropped} bytes of output "
                         f"could not be written ({self.pump.error})")
        m["processes"] = self.host.process_list()
        m["sources"] = self._sources(rows)
        m["host"].update(self.config.calibration)
        if self.config.calibrate_cores:  # after the run: the program is not slowed by it
            self._calibrate(m["host"], notes)
        m["files"] = sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                            if p.is_file() and not p.name.startswith("."))
        try:
            write_manifest(folder, m)
        except OSError as exc:  # full disk: the child's exit code still counts
            log.warning("could not finish %s/manifest.json: %s", folder, exc.strerror or exc)
        st = self.host.stats
        return RecordResult(
            folder=folder, exit_code=exit_code, returncode=rc, signal=sig,
            duration_s=m["duration_s"], mean_cpu=st.mean_cpu(), busiest_core=st.busiest_core(),
            mean_tree_cpu=st.mean_tree_cpu(), peak_rss=st.peak_rss,
            gpu_mean=self.gpu.mean_utilization() if self.gpu is not None else None,
            gpu_reason=self.nvml.reason, sources=m["sources"], stopped_by=self.stopped_by)


    @staticmethod
    def _calibrate(host: dict, notes: list) -> None:
        """``--calibrate-cores``: how much a busy core slows another, and what a DataLoader
        worker's batch costs the main thread (the advisor's loader-workers estimate)."""
        from .calibrate import calibrate_cores
        host.update(calibrate_cores(notes))
    def _sources(self, rows: dict) -> dict:
        cfg, st = self.config, self.host.stats
        out = {
            "host": {"recorded": True, "samples": self.host.ticks,
                     "late_samples": self.host.late_ticks, "errors": dict(self.host.errors),
                     "what": ["per-core CPU %", "CPU user/system/iowait %", "memory",
                              "disk read/write B/s", "network tx/rx B/s per interface",
                              "context switches/s"],
                     "counter_rows": rows.get(COUNTERS_FILE)},
            "processes": {"recorded": True, "processes_seen": len(self.host.process_list()),
                          "peak_processes": st.peak_processes, "rows": rows.get(PROCESSES_FILE),
                          "what": ["CPU %", "RSS", "threads", "context switches/s"]},
            "gpu": self.gpu.describe() if self.gpu is not None
            else {"recorded": False, "reason": self.nvml.reason},
            "output": {"recorded": True, "file": OUTPUT_LOG, "bytes": self.pump.bytes,
                       "dropped_bytes": self.pump.dropped, "error": self.pump.error},
        }
        if cfg.torch:
            out["torch"] = collect_torch(self.folder / TORCH_DIR, self.proc.returncode)
        else:
            out["torch"] = {"recorded": False, "reason": "not requested (--torch)"}
        if self.pyspy is not None:
            out["py_spy"] = self.pyspy.describe()
        else:
            out["py_spy"] = {"recorded": False, "reason": "not requested (--py-spy)"}
        return out


#: Longest wait for leftover group members after each of SIGINT and SIGTERM.
_LEFTOVER_GRACE_S = 2.0


def _group_alive(pgid: int) -> bool:
    """Whether any process is left in group ``pgid`` (zombies excluded)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return _group_has_live_member(pgid)


def _group_has_live_member(pgid: int) -> bool:
    """killpg(0) also counts zombies (a reparented grandchild not yet reaped by init)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _stdin_is_tty() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, ValueError, OSError):
        return False
