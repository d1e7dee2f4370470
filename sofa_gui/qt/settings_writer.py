"""Settings saved on a thread of their own, never on the GUI thread.

QSettings saves through QSaveFile and QLockFile, which call ``fdatasync``. On ext4
that waits for the journal to commit, and right after a first open the journal waits
for the hundreds of MB the loader child has just written to the trace cache: saving
the recent-files list when the trace reached the timeline held the GUI thread in
``fdatasync`` for ~200 ms, the one long stall of a cold open. Two more traps shape
this module (both measured):

* a QSettings saving holds a mutex on its file's contents, which every QSettings on
  that file shares: the GUI thread must not read or write them while a save runs;
* ``QSettings.sync()`` called from Python on a thread of ours kept the GIL for the
  whole ``fdatasync`` (0.4-0.9 s); Qt's own deferred save, run by the event loop of
  the thread the QSettings lives in, does not.

So a :class:`SettingsWriter` keeps the values in memory (read once, at start-up) and
hands each write to a :class:`_Saver` living on one ``QThread``; it applies it to its
own QSettings on the same file, and Qt saves there, without the GIL.
"""

from __future__ import annotations

import atexit
import threading

from PySide6.QtCore import QObject, QSettings, QThread, Signal, Slot

_REMOVED = object()
_MISSING = object()


class _Saver(QObject):
    """On the saver thread: applies writes to its QSettings; Qt then saves it there."""

    def __init__(self, path: str, fmt: QSettings.Format):
        super().__init__()
        self.own = QSettings(path, fmt, self)  # moves with its parent

    @Slot(str, object)
    def apply(self, key: str, value) -> None:
        if value is _REMOVED:
            self.own.remove(key)
        else:
            self.own.setValue(key, value)

    @Slot(object)
    def save_now(self, done: threading.Event) -> None:
        self.own.sync()
        done.set()


class SettingsWriter(QObject):
    """The settings of ``settings``' file as the app changes them while it runs."""

    _write = Signal(str, object)
    _save = Signal(object)

    def __init__(self, settings: QSettings, parent: QObject | None = None):
        super().__init__(parent)
        self.settings = settings
        self._values = {k: settings.value(k) for k in settings.allKeys()}
        self._saver = _saver_for(settings)
        self._write.connect(self._saver.apply)
        self._save.connect(self._saver.save_now)

    def value(self, key: str, default=None):
        got = self._values.get(key, _MISSING)
        return default if got is _MISSING or got is _REMOVED else got

    def set_value(self, key: str, value) -> None:
        self._values[key] = value
        self._write.emit(key, value)

    def remove(self, key: str) -> None:
        self._values[key] = _REMOVED
        self._write.emit(key, _REMOVED)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every write so far is on disk (closing, tests); False on timeout."""
        done = threading.Event()
        self._save.emit(done)
        return done.wait(timeout)


_thread: QThread | None = None
_savers: dict[str, _Saver] = {}  # one per file, for the life of the process


def _saver_for(settings: QSettings) -> _Saver:
    global _thread
    if _thread is None:
        _thread = QThread()
        _thread.setObjectName("sofa-settings-writer")
        _thread.start()
        atexit.register(_stop)
    path = settings.fileName()
    saver = _savers.get(path)
    if saver is None:
        saver = _savers[path] = _Saver(path, settings.format())
        saver.moveToThread(_thread)
    return saver


def _stop() -> None:
    """At exit: let the saver thread finish what it has, then end it."""
    if _thread is not None:
        _thread.quit()
        _thread.wait(5000)
