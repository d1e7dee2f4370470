"""Where test traces live: ``tests/data`` (``tests/data/real`` mirrors the shared layout)
and the shared real traces beside the checkout.

A plain module (not ``conftest``) so tests in every folder can import it unambiguously.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces" / "public"


REAL = DATA / "real"
#: Shared traces that ship elsewhere in the repository (byte-identical copies).
BUNDLED = {"kineto-tb-plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz":
           Path(__file__).parents[1] / "resources" / "samples"
           / "resnet50_num_workers_0.pt.trace.json.gz"}


def shared_trace(rel: str) -> Path:
    """A real trace by its path under ``../shared/traces/public``: the copy in
    ``tests/data/real`` (or the bundled sample) first, so a plain clone runs the test;
    skips only when neither the copy nor the shared folder has it."""
    for p in (REAL / rel, BUNDLED.get(rel), SHARED / rel):
        if p is not None and p.exists():
            return p
    pytest.skip(f"shared trace {rel} not available")
