"""The package has no import cycles (module level or inside functions)."""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")  # comes with import-linter (the test extra)


def _cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def test_no_import_cycles():
    assert _cycles(grimp.build_graph("sofa_gui")) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "cyc_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("cyc_pkg")) == [["cyc_pkg.a", "cyc_pkg.b"]]
