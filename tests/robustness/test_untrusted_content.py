"""Names and args from a trace are untrusted text: escaped in reports, never executed,
and the cache writes only complete entries, only under its own folder."""

from __future__ import annotations

import ast
import gzip
import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sofa_gui.core import store
from sofa_gui.core.importers import load_trace
from sofa_gui.core.samples import demo_trace_path

ROOT = Path(__file__).resolve().parents[2]
PAYLOADS = ['<script>alert("x")</script>', '<img src=x onerror=alert(1)>',
            '"><svg onload=alert(2)>', "</td></tr></table><iframe src=//evil>",
            "<b>bold</b> & | *em* `code` [link](javascript:alert(3))"]


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory) -> Path:
    """A real trace (the bundled sample, cut) with every op/kernel/thread name hostile.

    The file name carries markup too, since reports show the source path.
    """
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_seeds import cut_events

    doc = cut_events(json.loads(gzip.decompress(demo_trace_path().read_bytes())), 6000)
    for k, e in enumerate(doc["traceEvents"]):
        p = PAYLOADS[k % len(PAYLOADS)]
        if e.get("ph") == "M" and isinstance(e.get("args"), dict) and "name" in e["args"]:
            e["args"]["name"] = f"{p} thread"
        elif e.get("ph") == "X" and not str(e.get("name", "")).startswith("ProfilerStep"):
            e["name"] = f"{p} {k % 7}"
            e.setdefault("args", {})["note"] = p
    out = tmp_path_factory.mktemp("hostile") / 'run <i>1 & "q".pt.trace.json'
    out.write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def analyzed(hostile_trace):
    from sofa_gui.core.analysis.pipeline import analyze

    trace = load_trace(hostile_trace, use_cache=False)
    assert any(p in n for n in trace.names for p in PAYLOADS)  # the payload got in
    return trace, analyze(trace)


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.update(name for name, _ in attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_html_report_escapes_every_trace_string(analyzed, tmp_path):
    from sofa_gui.core.analysis.report import write_report

    trace, analysis = analyzed
    out = write_report(trace, analysis, tmp_path / "report.html")
    html = out.read_text()
    parser = _Tags()
    parser.feed(html)
    assert not parser.tags & {"script", "img", "iframe"}, parser.tags
    assert not [a for a in parser.attrs if a.startswith("on")], parser.attrs
    assert "<b>bold</b>" not in html and "<i>1" not in html
    text = "".join(parser.text)
    # The names are there, as text a reader sees (escaped in the source).
    assert any(p in text for p in PAYLOADS), "no trace name reached the report"
    assert 'run <i>1 & "q".pt.trace.json' in text


def test_markdown_report_escapes_markup(analyzed, tmp_path):
    from sofa_gui.core.analysis.report import write_report

    trace, analysis = analyzed
    md = write_report(trace, analysis, tmp_path / "report.md").read_text()
    outside_fences = []
    fenced = False
    for line in md.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            outside_fences.append(line)
    body = "\n".join(outside_fences)
    for raw in ("<script", "<img", "<svg", "<iframe", "<b>", "<i>"):
        assert raw not in body, raw
    assert "&lt;" in md  # names were escaped, not dropped


def test_cli_text_output_of_hostile_names_is_plain(hostile_trace, tmp_path):
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(hostile_trace)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Trace:" in res.stdout


# -- nothing from a trace is ever executed or unpickled --------------------------------------

_FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
_FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "marshal", "shelve", "cloudpickle", "joblib"}


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else ""
            builtin = isinstance(f, ast.Name) or (
                isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "builtins")
            if name in _FORBIDDEN_CALLS and builtin:  # re.compile is fine
                out.append(f"{path.name}:{node.lineno} calls {name}()")
            if name in ("read_pickle", "load") and any(
                    k.arg == "allow_pickle" and getattr(k.value, "value", None) is True
                    for k in node.keywords):
                out.append(f"{path.name}:{node.lineno} loads pickles")
            if name == "read_pickle":
                out.append(f"{path.name}:{node.lineno} reads a pickle")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            bad = [m for m in mods if m.split(".")[0] in _FORBIDDEN_MODULES]
            if bad:
                out.append(f"{path.name}:{node.lineno} imports {bad}")
    return out


def test_no_pickle_or_eval_anywhere_in_the_program():
    found = [v for py in sorted((ROOT / "sofa_gui").rglob("*.py")) for v in _violations(py)]
    assert not found, found


def test_the_scan_would_catch_them(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import pickle\nimport numpy as np\nx = eval('1')\n"
                   "np.load('f', allow_pickle=True)\n")
    assert len(_violations(bad)) == 3


# -- the cache ---------------------------------------------------------------------------

def _all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def test_cache_writes_only_under_its_folder(hostile_trace, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(cache))
    before = _all_files(hostile_trace.parent)
    load_trace(hostile_trace, use_cache=True)
    assert _all_files(hostile_trace.parent) == before  # nothing beside the source
    (entry,) = cache.iterdir()
    assert entry == store.entry_dir(hostile_trace)
    assert (entry / "manifest.json").is_file()
    cached = load_trace(hostile_trace, use_cache=True)
    assert any(p in n for n in cached.names for p in PAYLOADS)  # text survives as text


@pytest.mark.parametrize("name", ["../escape.json", "..", "a/../../b.json", ".hidden",
                                  "x\nmanifest.json", "-rf"])
def test_cache_entry_of_any_path_stays_in_the_cache(tmp_path, monkeypatch, name):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "c" / "cache"))
    src = (tmp_path / "c" / "d" / "e" / name)
    src.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "c" / "d" / "e" / "a").mkdir(exist_ok=True)
    if not src.exists():
        src.write_text("{}")
    d = store.entry_dir(src)
    assert d.parent == tmp_path / "c" / "cache" and len(d.name) == 32


def test_failed_cache_write_leaves_no_entry(analyzed, tmp_path, monkeypatch):
    trace, _ = analyzed
    cache = tmp_path / "cache"
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(cache))
    src = tmp_path / "src.json"
    src.write_text("{}")
    real_write = store.write_trace

    def half_then_fail(d, t):
        real_write(d, t)
        (d / "manifest.json").unlink()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "write_trace", half_then_fail)
    assert store.save_cached(src, trace) is None
    assert not cache.exists() or list(cache.iterdir()) == []


def test_damaged_cache_entry_is_dropped_and_rebuilt(hostile_trace, tmp_path, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    first = load_trace(hostile_trace, use_cache=True)
    entry = store.entry_dir(hostile_trace)
    for part in entry.iterdir():  # every column file, whatever the cache format
        if part.name != "manifest.json":
            part.write_bytes(os.urandom(500))
    assert store.load_cached(hostile_trace) is None
    assert not entry.exists()
    again = load_trace(hostile_trace, use_cache=True)
    assert again.events == first.events and entry.is_dir()


# -- the desktop app shows trace text as text --------------------------------------------------

_RAW = ("<script", "<img", "<svg", "<iframe", "<b>bold</b>", "<i>1")


def _rich_risks(win) -> list[str]:
    """Labels and tooltips showing a raw payload in a way Qt would render as HTML."""
    from PySide6.QtCore import Qt as QtCoreQt
    from PySide6.QtGui import Qt
    from PySide6.QtWidgets import QAbstractItemView, QLabel, QWidget

    def risky(text) -> bool:
        return isinstance(text, str) and any(r in text for r in _RAW) and Qt.mightBeRichText(text)

    out = []
    for w in win.findChildren(QWidget):
        if risky(w.toolTip()):
            out.append(f"{type(w).__name__} tooltip {w.toolTip()[:60]!r}")
        if isinstance(w, QLabel) and w.textFormat() != QtCoreQt.TextFormat.PlainText \
                and risky(w.text()):
            out.append(f"QLabel text {w.text()[:60]!r}")
        if isinstance(w, QAbstractItemView) and w.model() is not None:
            out += _model_risks(w.model(), risky)
    return out


def _model_risks(model, risky, parent=None, depth=0) -> list[str]:
    from PySide6.QtCore import QModelIndex, Qt

    parent = parent or QModelIndex()
    out = []
    for r in range(min(model.rowCount(parent), 300)):
        for c in range(min(model.columnCount(parent), 12)):
            idx = model.index(r, c, parent)
            tip = model.data(idx, Qt.ItemDataRole.ToolTipRole)
            if risky(tip):
                out.append(f"{type(model).__name__} item tooltip {tip[:60]!r}")
            if depth < 3 and c == 0 and model.rowCount(idx) > 0:
                out += _model_risks(model, risky, idx, depth + 1)
    return out


def test_app_never_renders_trace_text_as_html(hostile_trace, qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings

    from sofa_gui.qt.main_window import MainWindow

    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    win = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat),
                     restore_state=False)
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    with qtbot.waitSignal(win.session.analysis_finished, timeout=180_000):
        win.open_path(str(hostile_trace))
    trace = win.session.trace
    hostile = [i for i in range(len(trace.slices))
               if any(p in trace.name_of(i) for p in PAYLOADS) and trace.slices.args[i] >= 0]
    assert hostile
    risks = _rich_risks(win)
    for i in hostile[:: max(1, len(hostile) // 8)]:
        win.session.select_slice(i)
        qtbot.wait(20)
        risks += _rich_risks(win)
    win.session.shutdown()
    assert not sorted(set(risks)), sorted(set(risks))
