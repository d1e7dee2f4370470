"""Try it: apply one fix to the recorded program, measure it, and say if the prediction held.

:class:`TryButtons` puts a **Try it** button on every fix of a recording's finding cards
that ``sofa-gui try`` can apply from outside (:mod:`sofa_gui.core.analysis.tryable`), a
"needs a code change" note on those it cannot, and the latest tried result
("tried: 1.48x measured (predicted 1.52x)") on the fixes tried before (``REC/tries/``).
The button opens :class:`TryDialog`: the command it will run (from the recording's
manifest), rounds and steps, a progress bar over the runs and Cancel. The try runs on a
Python thread (:class:`~sofa_gui.recorder.trial.Trial`); its progress, result and error
cross to the GUI thread as queued signals. The result opens in the Compare dock's
Verdict tab.
"""

from __future__ import annotations

import shlex
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from ..core.analysis.try_result import tried_label
from ..core.analysis.tryable import Tryable, tryables_for
from ..recorder import trial as trials
from ..recorder.config import CommandError
from ..view.tooltip import literal_html
from .panels.common import plain_label, set_muted


class _Bridge(QObject):
    """Signals the try thread emits; Qt queues them to the GUI thread."""

    progress = Signal(int, int, str)
    done = Signal(object)
    failed = Signal(str)


class TryDialog(QDialog):
    """Rounds and steps, then the runs with progress and Cancel; ``tried(result)`` at the
    end (``result`` is ``try.json``'s dict with ``folder`` added)."""

    tried = Signal(object)

    def __init__(self, recording: Path, fix: Tryable, parent=None):
        super().__init__(parent)
        self.recording = Path(recording)
        self.fix = fix
        self.trial: trials.Trial | None = None
        self.thread: threading.Thread | None = None
        self.result: dict | None = None
        self._outcome_due = False  # started, and its outcome not yet shown
        self.setWindowTitle(f"Try {fix.id}")
        self.command, self.cwd, self.env = trials.from_recording(self.recording)
        lay = QVBoxLayout(self)
        lay.addWidget(plain_label(f"{fix.id}: {fix.summary}", self, wrap=True, bold=True))
        lay.addWidget(plain_label(
            "Runs the recorded command as it is and with this fix, in turns, each under the "
            "profiler for the same steps; the program's files are not changed.", self,
            wrap=True))
        form = QFormLayout()
        self.command_label = plain_label(shlex.join(self.command), self, wrap=True,
                                         selectable=True)
        form.addRow("Command:", self.command_label)
        form.addRow("In:", plain_label(str(self.cwd), self, wrap=True, selectable=True))
        self.rounds = _spin(1, 20, 3)
        self.steps = _spin(1, 1000, 10)
        form.addRow("Rounds (BEFORE + AFTER each):", self.rounds)
        form.addRow("Steps timed, then profiled:", self.steps)
        lay.addLayout(form)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        lay.addWidget(self.progress)
        self.status = plain_label("", self, wrap=True, selectable=True)
        set_muted(self.status)
        lay.addWidget(self.status)
        row = QHBoxLayout()
        row.addStretch(1)
        self.start_button = QPushButton("Start", self)
        self.cancel_button = QPushButton("Cancel", self)
        row.addWidget(self.start_button)
        row.addWidget(self.cancel_button)
        lay.addLayout(row)
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.bridge = _Bridge(self)
        self.bridge.progress.connect(self._on_progress)
        self.bridge.done.connect(self._on_done)
        self.bridge.failed.connect(self._on_failed)

    def start(self) -> None:
        folder = trials.default_folder(self.recording, self.fix.id, self.command)
        config = trials.TryConfig(fix=self.fix, command=tuple(self.command), folder=folder,
                           cwd=self.cwd, env=self.env, rounds=self.rounds.value(),
                           steps=self.steps.value(), recording=self.recording)
        self.trial = trials.Trial(config, on_progress=self.bridge.progress.emit)
        self.progress.setRange(0, 2 * config.rounds + 1)
        self.start_button.setEnabled(False)
        self.rounds.setEnabled(False)
        self.steps.setEnabled(False)
        self.status.setText("Starting…")
        self._outcome_due = True
        self.thread = threading.Thread(target=self._run, args=(folder,), daemon=True,
                                       name="sofa-try")
        self.thread.start()

    def _run(self, folder: Path) -> None:
        try:
            result = self.trial.run()
        except trials.TryCancelled:
            self.bridge.failed.emit("Cancelled; the runs so far are in " + str(folder))
        except (trials.TryError, CommandError, OSError, ValueError) as exc:
            self.bridge.failed.emit(str(exc))
        except Exception as exc:  # noqa: BLE001 - shown, never a silent thread death
            self.bridge.failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.bridge.done.emit({**result, "folder": str(folder)})

    def cancel(self) -> None:
        if self.trial is not None and self.thread is not None and self.thread.is_alive():
            self.status.setText("Cancelling…")
            self.trial.cancel()
        else:
            self.reject()

    def running(self) -> bool:
        """Until the try's outcome is shown: its thread ends before the outcome it sends
        reaches the window's thread."""
        return self._outcome_due

    def _on_progress(self, done: int, total: int, what: str) -> None:
        self.progress.setRange(0, total + 1)
        self.progress.setValue(done)
        self.status.setText(what + "…")

    def _on_done(self, result: dict) -> None:
        self._outcome_due = False
        self.result = result
        self.progress.setValue(self.progress.maximum())
        self.status.setText(result["verdict"])
        self.cancel_button.setText("Close")
        self.tried.emit(result)

    def _on_failed(self, text: str) -> None:
        self._outcome_due = False
        self.status.setText(text)
        self.cancel_button.setText("Close")


def _history_text(fix_id: str, tries: list[dict]) -> str:
    """Every try of ``fix_id`` kept beside the recording, oldest first."""
    rows = [f"{Path(t['folder']).name}: {t.get('verdict')}" for t in tries
            if t.get("fix") == fix_id]
    return "\n".join(["Tried before (in the recording's tries/ folder):", *rows]) if rows \
        else "Not tried yet"


def _spin(lo: int, hi: int, value: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setValue(value)
    return box


class TryButtons(QObject):
    """The Try-it buttons of the Bottlenecks cards of an open recording (see module doc)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.dialog: TryDialog | None = None
        self.labels: dict[str, list[QLabel]] = {}  # fix id -> its "tried" labels shown
        window.panels["findings"].add_fix_action_hook(self.decorate)

    def recording(self) -> Path | None:
        """The open trace's folder when it is a recording whose command can run again."""
        trace = self.window.session.trace
        source = Path(trace.meta.source) if trace is not None and trace.meta.source else None
        if source is None or not (source / "manifest.json").is_file():
            return None
        try:
            trials.from_recording(source)
        except (ValueError, OSError):
            return None
        return source

    def decorate(self, card, fix_id: str, fix) -> None:
        """The card hook: a Try-it button (or a code-change note) per tryable fix."""
        rec = self.recording()
        if rec is None:
            return
        tries = trials.list_tries(rec)
        history = {t.get("fix"): t for t in tries}  # the latest of each fix
        for t in tryables_for(card.finding.id, fix):
            if not t.from_outside:
                note = QLabel("needs a code change")
                note.setToolTip(literal_html(t.change))
                set_muted(note)
                card.add_fix_action(fix_id, note)
                continue
            button = QPushButton(f"Try it ({t.id})")
            button.setObjectName(f"try-{t.id}")
            button.setToolTip(literal_html(f"Re-run the recorded command with: {t.summary}"))
            button.clicked.connect(lambda _=False, t=t: self.open_dialog(t))
            card.add_fix_action(fix_id, button)
            label = QLabel(tried_label(history[t.id]) if t.id in history else "")
            label.setObjectName(f"tried-{t.id}")
            label.setToolTip(literal_html(_history_text(t.id, tries)))
            label.setTextFormat(Qt.TextFormat.PlainText)
            card.add_fix_action(fix_id, label)
            self.labels.setdefault(t.id, []).append(label)

    def open_dialog(self, fix: Tryable) -> TryDialog | None:
        rec = self.recording()
        if rec is None:
            return None
        try:
            dlg = TryDialog(rec, fix, self.window)
        except (ValueError, OSError) as exc:
            QMessageBox.warning(self.window, "Try it", str(exc))
            return None
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.tried.connect(self.show_result)
        dlg.show()
        self.dialog = dlg
        return dlg

    def show_result(self, result: dict) -> None:
        """The Compare dock's Verdict tab, and "tried: ..." on the fix's cards."""
        rec = self.recording()
        tries = trials.list_tries(rec) if rec is not None else [result]
        alive = []
        for label in self.labels.get(result["fix"], []):
            try:
                label.setText(tried_label(result))
                label.setToolTip(literal_html(_history_text(result["fix"], tries)))
            except RuntimeError:  # the card was rebuilt meanwhile
                continue
            alive.append(label)
        self.labels[result["fix"]] = alive
        self.window.docks["compare"].show()
        self.window.docks["compare"].raise_()
        self.window.panels["compare"].show_try(result)
