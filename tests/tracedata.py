"""Where test traces live: ``tests/data`` and the shared real traces beside the checkout.

A plain module (not ``conftest``) so tests in every folder can import it unambiguously.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces" / "public"


def shared_trace(rel: str) -> Path:
    """A real trace from ``../shared/traces/public``; skips the test when absent."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"shared trace {rel} not available")
    return p
