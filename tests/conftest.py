"""Shared fixtures.  Qt runs offscreen; the cache goes to a per-session temp dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tracedata import DATA, SHARED, shared_trace  # noqa: F401  (re-exported)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def data_dir() -> Path:
    return DATA

