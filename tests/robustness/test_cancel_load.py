"""Cancelling a load midway raises Cancelled, from every phase, and caches nothing.

The trace is the huge-trace benchmark's generator at a small size (Kineto-shaped, with
steps, launches, kernels and flows); ``benchmarks/huge.py`` measures the latency at 10M.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from sofa_gui.core import store
from sofa_gui.core.importers import load_trace
from sofa_gui.core.progress import Cancelled, CancelToken

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import huge  # noqa: E402


@pytest.fixture(scope="module")
def kineto(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cancel") / "gen.pt.trace.json"
    huge.generate(path, 150_000, ops_per_step=500)
    return path


def _phases(path: Path) -> list[tuple[float, str]]:
    seen: list[tuple[float, str]] = []
    load_trace(path, CancelToken(lambda f, m: seen.append((f, m))), use_cache=False)
    return seen


def test_load_reports_progress_in_phases(kineto):
    seen = _phases(kineto)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert len({m.split(" ")[0] for _, m in seen}) >= 3  # reading, building, ... phases


@pytest.mark.parametrize("at", [0.05, 0.5, 0.87, 0.95])
def test_cancel_in_each_phase_raises_and_caches_nothing(kineto, tmp_path, monkeypatch, at):
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    token: CancelToken

    def on_progress(fraction, message):
        if fraction >= at:
            token.cancel()

    token = CancelToken(on_progress)
    with pytest.raises(Cancelled):
        load_trace(kineto, token, use_cache=True)
    assert not store.entry_dir(kineto).exists()
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_cancel_from_another_thread_stops_the_worker(kineto):
    token = CancelToken()
    outcome: list[str] = []

    def work():
        try:
            load_trace(kineto, token, use_cache=False)
            outcome.append("finished")
        except Cancelled:
            outcome.append("cancelled")

    th = threading.Thread(target=work)
    th.start()
    while token.fraction <= 0.0 and th.is_alive():
        threading.Event().wait(0.002)
    token.cancel()
    at = token.fraction
    th.join(120)
    assert not th.is_alive()
    if at < 1.0:  # cancelled before the load reported its end
        assert outcome == ["cancelled"]
