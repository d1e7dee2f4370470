"""With no display, the window commands say so in one line (exit 2) instead of Qt's abort."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sofa_gui.cli import main
from sofa_gui.core.samples import demo_trace_path


@pytest.fixture
def headless(monkeypatch):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")


@pytest.mark.parametrize("argv", [[], [str(demo_trace_path())], ["view"],
                                  ["view", str(demo_trace_path())]])
def test_window_commands_explain_and_exit_2(headless, capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: no display")
    assert "--screenshot" in err and "xvfb-run" in err and "analyze" in err


def test_no_qt_is_imported_when_there_is_no_display():
    code = ("import os, sys; [os.environ.pop(v, None) for v in "
            "('DISPLAY', 'WAYLAND_DISPLAY', 'QT_QPA_PLATFORM')];"
            "from sofa_gui.cli import main; rc = main(['view']);"
            "print(rc, any(m.startswith('PySide6') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["2", "False"]
    assert "libxcb" not in out.stderr and "Traceback" not in out.stderr


def test_demo_falls_back_to_the_text_analysis(headless, capsys):
    assert main(["demo"]) == 0
    cap = capsys.readouterr()
    assert "no display" in cap.err and "xvfb-run" in cap.err
    assert "Input pipeline bound" in cap.out


def test_offscreen_platform_counts_as_a_display(monkeypatch):
    from sofa_gui.cli import no_display

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert not no_display()
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    assert no_display()
    monkeypatch.setenv("DISPLAY", ":0")
    assert not no_display()


def test_help_is_plain_text_and_every_option_is_explained(capsys):
    from sofa_gui.cli import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    missing = [f"{name} {a.dest}" for name, p in sub.choices.items() for a in p._actions
               if not a.help and a.dest != "help"]
    assert missing == []
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "never import Qt" not in out
    assert "examples:" in out and "sofa-gui stats" in out
