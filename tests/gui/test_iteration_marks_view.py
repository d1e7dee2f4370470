"""Warm-up and periodic extras in the app: table labels, strip cells, bands, status line.

Real torch.profiler captures (``tests/data/torch-loops``, step annotations removed).
"""

from __future__ import annotations

from pathlib import Path

from test_app_window import open_and_wait, settings, window  # noqa: F401 (fixtures)

from sofa_gui.qt.panels.iterations import COLUMNS

LOOPS = Path(__file__).resolve().parents[1] / "data" / "torch-loops"
LABEL = COLUMNS.index("Step")


def _labels(win) -> list[str]:
    m = win.panels["iterations"].model
    return [m.data(m.index(m.row_of(i), LABEL)) for i in range(m.rowCount())]


def test_warmup_iterations_are_labelled_and_named_in_the_status(qtbot, window):  # noqa: F811
    s = open_and_wait(qtbot, window, LOOPS / "warmup_steps.json.gz")
    assert _labels(window)[:4] == ["warm-up", "warm-up", "warm-up", ""]
    assert "3 warm-up (hatched)" in window.panels["iterations"].status.text()
    tl = window.timeline
    assert "warm-up" in tl.iteration_text(0) and "warm-up" not in tl.iteration_text(3)
    assert s.iterations.steady_state_from == 3


def test_periodic_eval_marks_every_fourth_iteration(qtbot, window):  # noqa: F811
    open_and_wait(qtbot, window, LOOPS / "periodic_eval.json.gz")
    labels = _labels(window)
    assert [i for i, t in enumerate(labels) if t] == [3, 7, 11, 15]
    assert labels[3] == "+ evaluation?"
    assert "every 4th: forward without backward" in window.panels["iterations"].status.text()
    assert "periodic extra: forward without backward" in window.timeline.iteration_text(7)


def _row_colours(win, i: int) -> set[int]:
    """Distinct colours along <= 40 px in the middle of iteration ``i``, low in the lanes."""
    tl = win.timeline
    m = tl.model
    img = tl.graphics_view().grab().toImage()
    mid = m.t0 + int((m.iter_starts[i] + m.iter_ends[i]) / 2)
    y_units = m.total_height - 0.3  # the bottom lane (instant markers): empty there
    p = tl.view_point(mid, y_units)
    left = tl.view_point(m.t0 + int(m.iter_starts[i]), y_units).x()
    half = min(20, max(1, (p.x() - left) - 2))  # stay inside the iteration
    return {img.pixel(p.x() + dx, p.y()) for dx in range(-half, half)}


def test_warmup_band_is_hatched_and_steady_ones_are_plain(qtbot, window):  # noqa: F811
    open_and_wait(qtbot, window, LOOPS / "warmup_steps.json.gz")
    qtbot.wait(50)
    assert len(_row_colours(window, 0)) >= 2  # diagonal hatch lines cross the row
    steady = max(range(4, 12, 2), key=lambda i: window.timeline.model.iter_ends[i]
                 - window.timeline.model.iter_starts[i])
    assert len(_row_colours(window, steady)) == 1  # an even steady iteration: no band


def test_breakdown_panel_says_the_device_windows_use_the_device_clock(qtbot, window):  # noqa: F811
    """HTA ns_resolution: the GPU lags its host; the status gives the step's own time
    (ProfilerStep#105, 95.7 ms) and, labelled, the device's window of it."""
    from tracedata import shared_trace

    s = open_and_wait(qtbot, window, shared_trace(
        "holistic-trace-analysis/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    panel = window.panels["breakdown"]
    s.select_iteration(4)
    qtbot.wait(20)
    assert panel.current_side().kind == "device"
    text = panel.status.text()
    assert "device clock" in text and "Iteration 4: 95.7 ms (device 95.4 ms, ends " in text, text
    host = next(k for k, sd in enumerate(panel._sides) if sd.kind == "host")
    panel.side_combo.setCurrentIndex(host)
    qtbot.wait(20)
    text = panel.status.text()
    assert "host clock" in text and "Iteration 4: 95.7 ms ·" in text, text


def test_status_says_iterations_uncertain_when_steps_differ(qtbot, window, tmp_path):  # noqa: F811
    """periodic_eval with steps #4..#11 running ops no other step runs (the landmarks,
    optimizer and DataLoader, kept): the status line starts "Iterations uncertain"."""
    import gzip
    import json

    from loop_truth import truth

    doc = json.loads(gzip.decompress((LOOPS / "periodic_eval.json.gz").read_bytes()))
    steps = truth("periodic_eval")["steps"][4:12]
    for ev in doc["traceEvents"]:
        name, ts = ev.get("name", ""), ev.get("ts")
        if (ev.get("ph") == "X" and ev.get("cat") in ("cpu_op", "user_annotation")
                and not name.startswith(("Optimizer.", "enumerate(DataLoader)"))):
            k = next((j for j, x in enumerate(steps)
                      if x["start_us"] <= float(ts) < x["end_us"]), None)
            if k is not None:
                ev["name"] = f"custom::step{k}_{name}"
    path = tmp_path / "periodic_eval_altered.json"
    path.write_text(json.dumps(doc))
    s = open_and_wait(qtbot, window, path)
    assert s.iterations.uncertain and len(s.iterations) == 16
    assert window.panels["iterations"].status.text().startswith("Iterations uncertain: ")
