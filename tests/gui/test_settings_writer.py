"""Settings are saved off the GUI thread (sofa_gui/qt/settings_writer.py): QSettings
saves with fdatasync, which right after a first open waits for the trace cache the
loader wrote (~200 ms of the GUI thread in the kernel). The window-level check (no save
on the GUI thread while a trace opens) is in test_app_window.py."""

from __future__ import annotations

from PySide6.QtCore import QSettings, QThread

from sofa_gui.qt.settings_writer import SettingsWriter


def _settings(path) -> QSettings:
    return QSettings(str(path), QSettings.Format.IniFormat)


def test_writes_reach_the_file_from_the_saver_thread(qtbot, tmp_path):
    path = tmp_path / "s.ini"
    first = _settings(path)
    first.setValue("kept", "0")
    first.sync()
    prefs = SettingsWriter(first)
    assert prefs.value("kept") == "0"  # read at start-up
    prefs.set_value("a", "1")
    prefs.set_value("b", ["x", "y"])
    prefs.set_value("a", "2")
    prefs.remove("b")
    assert prefs.value("a") == "2" and prefs.value("b", "gone") == "gone"  # at once
    # saved with no flush: Qt's own deferred save, on the saver's thread
    qtbot.waitUntil(lambda: "a=2" in path.read_text().split())
    assert prefs._saver.own.thread() is not QThread.currentThread()
    assert "b=" not in path.read_text() and "kept=0" in path.read_text().split()
    prefs.set_value("c", "3")
    assert prefs.flush()
    assert "c=3" in path.read_text().split()


def test_recent_clear_reaches_the_file(qtbot, tmp_path):
    from sofa_gui.app.recent import RecentFiles
    from sofa_gui.core.samples import demo_trace_path

    demo_path = demo_trace_path()
    prefs = SettingsWriter(_settings(tmp_path / "s.ini"))
    recent = RecentFiles(prefs)
    recent.add(str(demo_path))
    assert recent.paths() == [str(demo_path.resolve())]
    assert prefs.flush() and "[recent]" in (tmp_path / "s.ini").read_text()
    recent.clear()
    assert recent.paths() == []
    assert prefs.flush() and "[recent]" not in (tmp_path / "s.ini").read_text()
