"""Shared fixtures.  Qt runs offscreen; the cache goes to a per-session temp dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces" / "public"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def data_dir() -> Path:
    return DATA


def shared_trace(rel: str) -> Path:
    """A real trace from ``../shared/traces/public``; skips the test when absent."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"shared trace {rel} not available")
    return p
