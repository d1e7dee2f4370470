"""Headless screenshots: open a trace, wait for the analysis, save the window as PNG.

Used by ``sofa-gui view PATH --screenshot OUT.png`` (README pictures, tests). The
window never restores saved state, so pictures are reproducible.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

#: Longest wait for loading + analysis before giving up.
TIMEOUT_S = 600
#: Time given to the timeline to paint after the last change.
SETTLE_MS = 400


def take_screenshot(path: str | None, out: str, size=(1600, 1000), iteration: int | None = None,
                    mode: str = "auto", settings=None) -> int:
    """Exit code: 0 saved, 2 bad input (trace, iteration, output path), 1 internal error."""
    from . import collector
    from .application import make_app

    if not Path(out).expanduser().parent.is_dir():
        print(f"error: {Path(out).expanduser().parent}: no such folder", file=sys.stderr)
        return 2
    gc_on_gui = collector.start(make_app())  # job threads never run a collection
    try:
        return _shoot(path, out, size, iteration, mode, settings)
    finally:
        _free_window()
        gc_on_gui.stop()


def _free_window() -> None:
    """Delete the closed window and collect its wrappers here, on the GUI thread, before
    automatic collection is back on: a collection that starts later, wherever an
    allocation triggers it, would free those wrappers at an arbitrary point of a process
    that goes on running (the CLI called in-process) and can block in
    ``QObject::~QObject`` (see :mod:`.collector`)."""
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent

    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()


def _shoot(path: str | None, out: str, size, iteration: int | None, mode: str,
           settings) -> int:
    """:func:`take_screenshot` once the app runs."""
    from PySide6.QtCore import QSettings

    from . import sliced
    from .main_window import MainWindow

    if settings is None:
        tmp = tempfile.mkdtemp(prefix="sofa-gui-shot-")
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore_state=False)
    win.set_iteration_mode(mode)
    win.resize(*size)
    win.show()
    try:
        if path:
            err = _open_and_wait(win, path)
            if err:
                print(f"error: {err}", file=sys.stderr)
                return 2 if not err.startswith("internal") else 1
        if iteration is not None:
            err = _select(win, iteration)
            if err:
                print(f"error: {err}", file=sys.stderr)
                return 2
        _settle(SETTLE_MS)
        sliced.drain()  # panels still being built a few widgets per turn
        _settle(SETTLE_MS // 4)
        return _save(win, out)
    finally:
        win.session.shutdown()
        win.close()
        win.deleteLater()


def _open_and_wait(win, path: str) -> str:
    """Open ``path`` and run the event loop until the analysis ends; '' or an error."""
    from PySide6.QtCore import QEventLoop, QTimer

    s = win.session
    loop = QEventLoop()
    outcome: list[str] = []
    s.analysis_finished.connect(lambda: (outcome.append(""), loop.quit()))
    s.load_failed.connect(lambda p, r: (outcome.append(f"{p}: {r}"), loop.quit()))
    s.job_crashed.connect(lambda m: (outcome.append(f"internal error: {m}"), loop.quit()))
    s.job_cancelled.connect(lambda: (outcome.append("cancelled"), loop.quit()))
    QTimer.singleShot(TIMEOUT_S * 1000, lambda: (outcome.append(
        f"internal error: no result after {TIMEOUT_S} s"), loop.quit()))
    win.open_path(path)
    loop.exec()
    for box in win.findChildren(_message_box_type()):
        box.close()  # the error is printed instead
    return outcome[0] if outcome else "internal error: event loop ended early"


def _message_box_type():
    from PySide6.QtWidgets import QMessageBox

    return QMessageBox


def _select(win, iteration: int) -> str:
    s = win.session
    n = len(s.iterations) if s.iterations is not None else 0
    i = iteration + n if iteration < 0 else iteration
    if n == 0:
        return f"--iteration {iteration}: no iterations were found in this trace"
    if not 0 <= i < n:
        return f"--iteration {iteration}: the trace has {n} iterations (0..{n - 1})"
    s.select_iteration(i, zoom=True)
    return ""


def _settle(ms: int) -> None:
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def _save(win, out: str) -> int:
    """Grab the whole window; write to a temp file then rename (never half-written)."""
    out_path = Path(out).expanduser()
    if not out_path.parent.is_dir():
        print(f"error: {out_path.parent}: no such folder", file=sys.stderr)
        return 2
    pix = win.grab()
    fd, tmp = tempfile.mkstemp(prefix=".shot-", suffix=".png", dir=out_path.parent)
    os.close(fd)
    try:
        if not pix.save(tmp, "PNG"):
            print(f"error: {out_path}: could not write PNG", file=sys.stderr)
            return 2
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it private; a picture is not
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"wrote {out_path} ({pix.width()}x{pix.height()})")
    return 0
