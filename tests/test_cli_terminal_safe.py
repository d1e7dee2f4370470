"""Trace names reach the terminal: escape sequences in them must not."""

from __future__ import annotations

import json

from sofa_gui.cli import main


def test_analyze_text_escapes_control_characters(tmp_path, capsys):
    evil = "\x1b[2J\x1b]0;pwned\x07kernel"
    events = [{"ph": "X", "cat": "kernel", "name": evil, "pid": 0, "tid": 7,
               "ts": 10.0 * i, "dur": 5.0, "args": {"device": 0, "stream": 7}}
              for i in range(4)]
    path = tmp_path / "evil.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["analyze", str(path), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out
