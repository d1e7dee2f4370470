"""Landmark-cut confidence drops when the steps look unlike each other.

Real ``torch.profiler`` capture (``tests/data/torch-loops/periodic_eval``, 16 steps,
annotations removed), altered the way a misleading loop would look: some steps lose
their forward pass's autograd links, or run wholly different ops.
"""

from __future__ import annotations

import numpy as np
from loop_truth import LOOPS_DIR, true_windows_ns, truth

from sofa_gui.core.analysis.iterations import detect_iterations, iterations_text
from sofa_gui.core.analysis.iterations.landmarks import Landmarks
from sofa_gui.core.analysis.iterations.steps import landmark_iterations
from sofa_gui.core.importers import load_trace

KEEP = ("Optimizer.", "enumerate(DataLoader)")  # the landmarks stay


def _capture():
    t = load_trace(LOOPS_DIR / "periodic_eval.json.gz", use_cache=False)
    return t, Landmarks.of(t).main_lane, true_windows_ns(truth("periodic_eval"))


def _in_steps(t, lane, windows, steps) -> np.ndarray:
    """Slices of the loop's thread that start inside the given true steps."""
    s = t.slices
    ts, te = windows
    idx = t.lane_slices(lane)
    hit = np.zeros(len(idx), bool)
    for k in steps:
        hit |= (s.start[idx] >= ts[k]) & (s.start[idx] < te[k])
    return idx[hit]


def _other_ops_in_half_the_steps():
    """The capture with steps #4..#11 running ops no other step runs."""
    t, lane, w = _capture()
    s = t.slices
    for k in range(4, 12):
        for i in _in_steps(t, lane, w, (k,)).tolist():
            name = t.names[int(s.name[i])]
            if not name.startswith(KEEP):
                s.name[i] = len(t.names)
                t.names.append(f"custom::step{k}_{name}")
    return t


def test_consistent_loop_keeps_its_confidence():
    t, _lane, _w = _capture()
    it = landmark_iterations(t, Landmarks.of(t))
    assert it.confidence == 0.9 and it.pattern["consistent_steps"] == 1.0


def test_steps_without_a_forward_pass_lower_the_confidence():
    t, lane, w = _capture()
    fwd = set(_in_steps(t, lane, w, (4, 9, 13)).tolist())
    f = t.flows
    f.kind[(f.kind == 1) & np.isin(f.src, list(fwd))] = 2  # drop their fwd->bwd links
    it = landmark_iterations(t, Landmarks.of(t))
    assert len(it) == 16
    assert abs(it.pattern["consistent_steps"] - 13 / 16) < 1e-3
    assert abs(it.confidence - 0.9 * (13 / 16) ** 2) < 1e-3
    assert "3 of 16 steps look unlike the others (#4, #9, #13: 3 without a forward pass" \
        in it.reason


def test_steps_running_other_ops_make_iterations_uncertain():
    """Half the steps run ops no other step runs: 8 of 16 unlike -> 0.9 x 0.25."""
    t = _other_ops_in_half_the_steps()
    lm = Landmarks.of(t)
    it = landmark_iterations(t, lm)
    assert len(it) == 16 and it.pattern["consistent_steps"] == 0.5
    assert it.confidence < 0.5 and it.uncertain
    assert "8 with under 50% of the ops most steps run" in it.reason
    found = detect_iterations(t)
    assert found.uncertain
    assert "iterations uncertain" in iterations_text(t, found)[0]


def test_report_says_iterations_uncertain():
    """The same altered capture through the whole analysis: the Markdown and HTML
    reports say the iterations are uncertain, and so does every finding."""
    from sofa_gui.core.analysis.pipeline import analyze
    from sofa_gui.core.analysis.report import html_report, markdown_report

    t = _other_ops_in_half_the_steps()
    a = analyze(t)
    assert a.iterations.uncertain
    assert "iterations uncertain" in markdown_report(t, a)
    assert "iterations uncertain" in html_report(t, a)
    # and the advisor marks every finding that rests on them
    assert a.findings and all(f.summary.startswith("Iterations uncertain") for f in a.findings)
