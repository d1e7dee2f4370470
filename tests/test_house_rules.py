"""The repository's house rules, checked on its own text.

Every module under ``sofa_gui/qt`` uses Qt (Qt-free code belongs in ``app/`` or
``view/``); modules stay under :data:`MAX_LINES` lines; no module reaches for another
module's private (``_name``) names; and the text of the repository speaks of the
product, not of how or when it was made (no issue numbers, work sessions, dated runs,
machine paths).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sofa_gui"
QT_MODULES = ("PySide6", "pyqtgraph", "shiboken6")

#: The longest a module may be.
MAX_LINES = 600
#: Modules still over :data:`MAX_LINES`, each with the reason; the list only shrinks
#: (an entry whose module got short enough fails the test until it is removed).
TOO_LONG: dict[str, str] = {}


def _py_files(*tops: str):
    for top in tops:
        yield from sorted((ROOT / top).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- Qt only under qt/ -------------------------------------------------------------------

def _imported_top_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_every_module_under_qt_uses_qt():
    qt_free = [_rel(p) for p in _py_files("sofa_gui/qt") if p.name != "__init__.py"
               and not _imported_top_names(ast.parse(p.read_text())) & set(QT_MODULES)]
    assert qt_free == [], "Qt-free modules belong in sofa_gui/app or sofa_gui/view"


# -- module length -----------------------------------------------------------------------

def _line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_is_longer_than_the_limit():
    long = {_rel(p): _line_count(p) for p in _py_files("sofa_gui", "tests", "benchmarks")
            if _line_count(p) > MAX_LINES}
    assert sorted(set(long) - set(TOO_LONG)) == [], f"over {MAX_LINES} lines: {long}"


def test_the_allow_list_of_long_modules_only_shrinks():
    short_again = [m for m in TOO_LONG
                   if not (ROOT / m).exists() or _line_count(ROOT / m) <= MAX_LINES]
    assert short_again == [], "remove these from TOO_LONG"


# -- private names stay in their module -------------------------------------------------

def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_of(path: Path, package_root: Path) -> list[str]:
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


#: Folders whose scripts import each other by path (they put the folder on sys.path).
SHARED_BY_PATH = ("benchmarks", "tests", "tests/core", "tests/gui", "tests/robustness")


def _by_path(name: str) -> Path | None:
    for folder in SHARED_BY_PATH:
        if (ROOT / folder / f"{name}.py").is_file():
            return ROOT / folder / f"{name}.py"
    return None


def _resolve(path: Path, node: ast.ImportFrom, package_root: Path) -> list[str] | None:
    """The dotted parts of the module ``node`` imports from, if inside the package (or a
    script of :data:`SHARED_BY_PATH`)."""
    if node.level == 0:
        parts = (node.module or "").split(".")
        if len(parts) == 1 and _by_path(parts[0]) not in (None, path):
            return parts
        return parts if parts[0] == package_root.name else None
    here = _module_of(path, package_root)
    package = here if path.name == "__init__.py" else here[:-1]
    base = package[: len(package) - (node.level - 1)]
    return base + (node.module.split(".") if node.module else [])


def _is_module(parts: list[str], package_root: Path) -> bool:
    p = package_root.parent.joinpath(*parts)
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def private_uses(path: Path, package_root: Path) -> list[str]:
    """``from m import _x`` and ``m._x`` in ``path``, where ``m`` is another module of
    the package (``package_root``), as "file:line: text" lines."""
    tree = ast.parse(path.read_text())
    modules: set[str] = set()  # local names bound to modules of the package
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(path, node, package_root)
            if base is None:
                continue
            for a in node.names:
                if _is_private(a.name):
                    found.append((node.lineno, f"from {'.'.join(base)} import {a.name}"))
                elif _is_module(base + [a.name], package_root):
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name.split(".")[0] == package_root.name:
                    modules.add(a.asname)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and _is_private(node.attr)):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return [f"{path.name}:{line}: {text}" for line, text in sorted(found)]


def test_no_module_uses_another_modules_private_names():
    found = [u for p in _py_files("sofa_gui", "benchmarks") for u in private_uses(p, PACKAGE)]
    assert found == []


def test_tests_share_only_public_helpers():
    """Tests may test the package's private functions (white-box), but what one test
    module takes from another is a public helper (``package_root``: tests, so only the
    scripts shared by path count)."""
    found = [u for p in _py_files("tests") for u in private_uses(p, ROOT / "tests")]
    assert found == []


def test_the_private_name_check_finds_both_forms(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for f in ("__init__.py", "a.py", "sub/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "sub" / "b.py").write_text(
        "from ..a import _hidden, shown\nfrom .. import a\nimport os\n"
        "a._other()\nos._exit(0)\nshown._fine = 1\n")
    assert private_uses(pkg / "sub" / "b.py", pkg) == [
        "b.py:1: from pkg.a import _hidden", "b.py:4: a._other"]


# -- the text speaks of the product --------------------------------------------------------

#: What the residue check skips: version control, virtualenvs, caches and build output
#: (what .gitignore keeps out of the repository).
NOT_THE_REPO = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
                "build", "dist", "sofa_runs", "out"}
#: Recorded data (traces, a recording's manifest and logs) carries the dates, clock times
#: and temporary paths of the run that produced it: that is its content.
RECORDED_DATA = ("tests/data/", "resources/samples/")
RECORDED_KINDS = {"dated run", "clock time of a run", "temporary path"}
#: The desktop metadata's release entry has a date by its format (AppStream).
DATED_BY_FORMAT = {"resources/io.github.sofa_gui.SofaGui.metainfo.xml"}
#: How the making of the software shows in its text; each pattern is a phrase that
#: describes work (who, when, which ticket), not the product.
#: ("handoff" alone is the product's word for a trace the loader child hands over, and
#: the sample traces carry their own, older, wall-clock dates: both are data.)
RESIDUE = {
    "issue number": r"\b[Ii]ssues? ?#?\d+",
    "work session or round": r"\b[Ss]ession \d+\b|\b[Rr]ound \d+\b",
    "dated run": r"\b20(2[5-9]|[3-9]\d)-[01]\d-[0-3]\d\b",
    "clock time of a run": r"\b[0-2]\d:[0-5]\d(:[0-5]\d)? ?UTC\b",
    "machine path": r"/work/|/home/\w+/",
    "temporary path": r"(?<![\w.~])/tmp/",
    "history of the work": r"\bdocs/handoff\b|\bhandoff notes\b|\bthe lead\b|\bengineers?\b",
    "helper session": r"\bhelpers? (session|agent|engineer)s?\b",
}


def _repo_files():
    """Every file of the repository (README, .ci, code, docs, tests, data, resources)."""
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in NOT_THE_REPO and not d.endswith(".egg-info"))
        for name in sorted(files):
            if name not in NOT_THE_REPO and not name.endswith((".pyc", ".whl")):
                yield Path(top, name)


def _text(path: Path) -> str | None:
    """The file's text, or None for binary content (images, gzip, protobuf, parquet)."""
    head = path.read_bytes()[:8192]
    if b"\0" in head or head.startswith(b"\x1f\x8b"):
        return None
    return path.read_text(errors="replace")


def _allowed(rel: str, kind: str) -> bool:
    return ((rel.startswith(RECORDED_DATA) and kind in RECORDED_KINDS)
            or (rel in DATED_BY_FORMAT and kind == "dated run"))


def residue(text: str) -> list[tuple[int, str, str]]:
    """(line number, kind, matched text) for each piece of process residue in ``text``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for kind, pattern in RESIDUE.items():
            m = re.search(pattern, line)
            if m:
                found.append((n, kind, m.group(0)))
    return found


def test_the_text_speaks_of_the_product():
    this = Path(__file__).resolve()
    found = []
    for p in _repo_files():
        text = _text(p) if p != this else None
        rel = _rel(p)
        found += [f"{rel}:{n}: {kind}: {m!r}" for n, kind, m in residue(text or "")
                  if not _allowed(rel, kind)]
    assert found == [], "\n".join(found)


def test_file_names_speak_of_what_they_hold():
    found = [f"{_rel(p)}: {kind}: {m!r}" for p in _repo_files()
             for _, kind, m in residue(_rel(p))]
    assert found == [], "\n".join(found)


def test_the_residue_check_reads_every_part_of_the_repository():
    files = {_rel(p) for p in _repo_files()}
    for part in ("README.md", "pyproject.toml", ".ci/run", "packaging/debian-deps.sh",
                 "docs/architecture.md", "tests/conftest.py", "resources/samples/SOURCES.md"):
        assert part in files
    assert any(f.startswith("benchmarks/") for f in files)
    assert not any(f.startswith((".git/", ".venv/")) or f == ".git" for f in files)


@pytest.mark.parametrize("line", [
    "# issue 15 item 3: keep the cap", "Measured 2026-12-02 on main", "at 01:47 UTC",
    "see /work/bench/run.json", "--dir /tmp/sofa-huge", "as in docs/handoff/",
    "the lead merged it", "Session 4 fix", "kept from round 2", "a helper session wrote this"])
def test_the_residue_patterns_catch_process_talk(line):
    assert residue(line)


@pytest.mark.parametrize("line", [
    "def _helper(x):", "a small helper that formats ns", "the session's signals",
    "an iteration round trip", "ProfilerStep#12", "times in UTC on the axis",
    "tissue 15", "a path like ~/tmp/x or out.tmp/", "from 2021-06-08 08:57:03.460 UTC",
    "the child's handoff folder"])
def test_the_residue_patterns_let_the_products_words_pass(line):
    assert residue(line) == []
