"""``sofa-gui record --torch``: run torch.profiler inside the child, no code changes.

Python imports ``sitecustomize`` at start-up; the recorder puts this folder
first on ``PYTHONPATH``. This module must stand alone (the child may run
another interpreter or virtualenv): it only uses the standard library until the
program itself imports torch.

* An import hook waits for ``import torch``; once torch has loaded, the profiler
  starts (CPU activities, plus CUDA when torch sees a GPU).
* ``SOFA_GUI_TORCH_WINDOW="START:DURATION"``: start START seconds after the child
  started (``SOFA_GUI_T0_NS``), or when torch is imported if that is later, and
  stop DURATION seconds after the profiler actually started. torch.profiler must be
  started and stopped on the thread that owns it, so a timer thread asks the
  main thread with a real-time signal, whose Python handler runs there.
* At the window's end, at exit, or on SIGTERM (when the program has no SIGTERM
  handler of its own) the trace is exported as
  ``$SOFA_GUI_TORCH_DIR/kineto-<pid>.json`` (temporary name, then renamed),
  beside ``kineto-<pid>.status.json`` describing what happened.
* Multiprocessing helpers (spawned DataLoader workers) are not profiled.
* ``SOFA_GUI_TRY_*`` variables (``sofa-gui try``): ``sofa_try`` beside this module
  applies a fix's settings and, with ``SOFA_GUI_TRY_STEPS``, starts and stops the
  profiler at step boundaries instead.
* Another ``sitecustomize`` later on ``sys.path`` is still run.
"""

import atexit
import json
import os
import signal
import sys
import threading
import time

_ENV_DIR = "SOFA_GUI_TORCH_DIR"
_ENV_WINDOW = "SOFA_GUI_TORCH_WINDOW"
_ENV_T0 = "SOFA_GUI_T0_NS"
_HERE = os.path.dirname(os.path.abspath(__file__))


def _is_multiprocessing_helper():
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if "--multiprocessing-fork" in argv:
        return True
    return any("multiprocessing" in a and ("spawn_main" in a or "forkserver" in a)
               for a in argv)


def _write_json(path, doc):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


class _Session:
    """The profiler of this process: start, stop, export, status file."""

    def __init__(self, out_dir, window, t0_ns):
        self.out_dir = out_dir
        self.window = window
        self.t0_ns = t0_ns
        self.prof = None
        self.state = "waiting for torch"
        self.started = threading.Event()
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.status = {"pid": self.pid, "argv": list(sys.argv), "rank": os.environ.get("RANK"),
                       "window_s": list(window) if window else None}
        self.ctl_signal = None
        self.by_steps = False  # ``sofa-gui try`` starts and stops it at step boundaries

    # -- called on the main thread ------------------------------------------------------
    def start(self):
        with self.lock:
            if self.state != "waiting for torch" and self.state != "armed":
                return
            self.state = "starting"
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile, supported_activities

            acts = [ProfilerActivity.CPU]
            if ProfilerActivity.CUDA in supported_activities() and torch.cuda.is_available():
                acts.append(ProfilerActivity.CUDA)
            prof = profile(activities=acts)
            prof.start()
        except Exception as exc:  # noqa: BLE001 - never break the user's program
            self.state = "failed"
            self.status["error"] = f"could not start torch.profiler: {type(exc).__name__}: {exc}"
            self._save_status()
            self.started.set()
            return
        self.prof = prof
        self.state = "running"
        self.status.update(torch_version=torch.__version__,
                           activities=[str(a).split(".")[-1] for a in acts],
                           started_epoch_ns=time.time_ns())
        self._save_status()
        self.started.set()

    def finish(self, reason):
        with self.lock:
            if self.state == "armed":
                self.state = "not started"
                self.status["note"] = f"the window had not started at {reason}"
                self._save_status()
            if self.state != "running":
                return
            self.state = "exporting"
        self.status["stopped_epoch_ns"] = time.time_ns()
        self.status["stop_reason"] = reason
        try:
            self.prof.stop()
            base = os.path.join(self.out_dir, f"kineto-{self.pid}.json")
            tmp = os.path.join(self.out_dir, f".kineto-{self.pid}.json.tmp")
            self.prof.export_chrome_trace(tmp)
            os.replace(tmp, base)
            self.status["trace"] = os.path.basename(base)
            try:
                self.status["trace_start_ns"] = int(self.prof.profiler.kineto_results
                                                    .trace_start_ns())
            except Exception:  # noqa: BLE001 - optional fact
                pass
        except Exception as exc:  # noqa: BLE001
            self.status["error"] = f"could not export the trace: {type(exc).__name__}: {exc}"
        self.state = "done"
        self.status["exported_epoch_ns"] = time.time_ns()
        self._save_status()

    def _save_status(self):
        self.status["state"] = self.state
        try:
            _write_json(os.path.join(self.out_dir, f"kineto-{self.pid}.status.json"),
                        self.status)
        except OSError:
            pass

    # -- wiring -------------------------------------------------------------------------
    def on_torch_loaded(self):
        """Runs right after ``import torch`` finished, on the importing thread."""
        if threading.current_thread() is not threading.main_thread():
            self.state = "failed"
            self.status["error"] = ("torch was first imported off the main thread; "
                                    "torch.profiler must start on the main thread")
            self._save_status()
            return
        self._own_sigterm()
        atexit.register(self.finish, "exit")
        if self.by_steps:
            self.state = "armed"
            self._save_status()
        elif self.window is None:
            self.start()
        elif not self._install_control_signal():
            self.status["note"] = "no free real-time signal for the window: profiling it all"
            self.start()
        else:
            self.state = "armed"
            self._save_status()
            threading.Thread(target=self._control, name="sofa-torch-window", daemon=True).start()

    def _install_control_signal(self):
        for sig in range(signal.SIGRTMAX - 2, signal.SIGRTMIN + 2, -1):
            try:
                if signal.getsignal(sig) in (signal.SIG_DFL, None):
                    signal.signal(sig, self._on_control)
                    self.ctl_signal = sig
                    return True
            except (OSError, ValueError):
                continue
        return False

    def _on_control(self, signum, frame):
        if self.state == "armed":
            self.start()
        elif self.state == "running":
            self.finish("window end")

    def _control(self):
        """Start at ``t0 + START`` (or at once if torch came later); stop DURATION s after."""
        start, dur = self.window
        main = threading.main_thread().ident
        if self.t0_ns + int(start * 1e9) - time.time_ns() > 1e9:  # time to spare: warm up
            threading.Thread(target=_warm_up_profiler, daemon=True).start()
        self._sleep_until(self.t0_ns + int(start * 1e9))
        signal.pthread_kill(main, self.ctl_signal)
        self.started.wait()
        if self.state != "running":
            return
        late = (self.status["started_epoch_ns"] - self.t0_ns) / 1e9 - start
        if late > 0.05:
            self.status["note"] = (f"started {late:.2f} s after the window's start (torch was "
                                   "imported then); profiled DURATION seconds from there")
            self._save_status()
        self._sleep_until(self.status["started_epoch_ns"] + int(dur * 1e9))
        if self.state == "running":
            signal.pthread_kill(main, self.ctl_signal)

    @staticmethod
    def _sleep_until(epoch_ns):
        while True:
            left = (epoch_ns - time.time_ns()) / 1e9
            if left <= 0:
                return
            time.sleep(min(left, 0.5))

    def _own_sigterm(self):
        try:
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, self._on_sigterm)
        except (OSError, ValueError):
            pass

    def _on_sigterm(self, signum, frame):
        self.finish("SIGTERM")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _warm_up_profiler():
    """Import what ``profile.start()`` imports lazily (seconds), so the window starts on time."""
    try:
        import torch

        getattr(torch, "_inductor", None)
    except Exception:  # noqa: BLE001 - only a warm-up
        pass


class _ImportWatcher:
    """``sys.meta_path`` finder that wraps a module's loader to call back after it ran."""

    def __init__(self, name, callbacks):
        self.name = name
        self.callbacks = callbacks
        self.busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self.busy:
            return None
        self.busy = True
        try:
            import importlib.util

            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _NotifyingLoader(spec.loader, self)
        return spec

    def loaded(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for callback in self.callbacks:
            callback()


class _NotifyingLoader:
    def __init__(self, loader, watcher):
        self.loader = loader
        self.watcher = watcher

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.watcher.loaded()

    def __getattr__(self, name):
        return getattr(self.loader, name)


def _watch(name, callbacks):
    """Call ``callbacks`` once module ``name`` is imported (now, if it already is)."""
    if not callbacks:
        return
    if name in sys.modules:
        for callback in callbacks:
            callback()
    else:
        sys.meta_path.insert(0, _ImportWatcher(name, callbacks))


def _parse_window(text):
    if not text:
        return None
    try:
        start, dur = (float(x) for x in text.split(":"))
    except ValueError:
        return None
    return (start, dur) if dur > 0 and start >= 0 else None


def _trial(session):
    """``sofa-gui try``'s settings for this process (``sofa_try``), if any."""
    if not any(k.startswith("SOFA_GUI_TRY_") for k in os.environ):
        return None
    try:
        import atexit as _atexit

        import sofa_try
    except ImportError:
        return None
    trial = sofa_try.Trial(sofa_try.settings(), session)
    _atexit.register(trial.save)
    if session is not None and trial.steps:
        session.by_steps = True
    return trial


def _profiler_session():
    out_dir = os.environ.get(_ENV_DIR)
    if not out_dir:
        return None
    try:
        os.makedirs(out_dir, exist_ok=True)
        t0 = int(os.environ.get(_ENV_T0) or time.time_ns())
    except (OSError, ValueError):
        return None
    return _Session(out_dir, _parse_window(os.environ.get(_ENV_WINDOW, "")), t0)


def _install():
    if _is_multiprocessing_helper():
        return
    session = _profiler_session()
    trial = _trial(session)
    on_torch = [trial.on_torch] if trial is not None else []
    if session is not None:
        on_torch.append(session.on_torch_loaded)
    _watch("torch", on_torch)
    _watch("tensorflow", [trial.on_tensorflow] if trial is not None else [])


def _chain_next_sitecustomize():
    """Run the ``sitecustomize`` this module shadows, if any."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - same as Python: report, carry on
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{exc!r}",
              file=sys.stderr)


_install()
_chain_next_sitecustomize()
