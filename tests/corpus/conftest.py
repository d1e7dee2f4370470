"""The diagnosis scorer (``benchmarks/diagnosis.py``), loaded once for the corpus tests
that score with it: it is a benchmark script, not a package module."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCORER = Path(__file__).resolve().parents[2] / "benchmarks" / "diagnosis.py"


@pytest.fixture(scope="session")
def diag():
    spec = importlib.util.spec_from_file_location("diagnosis_bench", SCORER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
