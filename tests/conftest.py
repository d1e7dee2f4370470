"""Shared fixtures.  Qt runs offscreen; the cache goes to a per-session temp dir."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# tests/core's truth helpers (loop_truth, kineto_truth) are used by GUI tests too: importable
# however the suite is started (pytest adds tests/core to the path only when it collects it)
sys.path.insert(0, str(Path(__file__).resolve().parent / "core"))

from ordering import VARIABLE, Order, parse_order, reorder
from tracedata import DATA, SHARED, shared_trace  # noqa: F401  (re-exported)

#: The order the suite runs in (``SOFA_GUI_TEST_ORDER``, tests/ordering.py).
ORDER = pytest.StashKey[Order]()

# Property tests draw the same examples on every CI run: a search that finds a new case
# is a local run's job (SOFA_GUI_HYPOTHESIS_EXAMPLES=500), and CI must not pass or fail
# by chance.
if os.environ.get("CI") == "true":
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None)
    settings.load_profile("ci")


def pytest_configure(config):
    try:
        config.stash[ORDER] = parse_order(os.environ.get(VARIABLE))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_report_header(config):
    return config.stash[ORDER].describe()


def pytest_terminal_summary(terminalreporter, config):
    # `pytest -q` prints no header: a reordered run says its order (and seed) at the end
    if config.stash[ORDER].mode != "collected":
        terminalreporter.write_line(config.stash[ORDER].describe())


def pytest_collection_modifyitems(config, items):
    items[:] = reorder(items, config.stash[ORDER])


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def data_dir() -> Path:
    return DATA

