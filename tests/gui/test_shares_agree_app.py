"""The app says what each share is a share of, with the numbers ``analyze --json`` gives:
the header's verdict is of the profiled time, a finding card's share is of the step (a
hypothesis also says what its fix saves), and where the verdict counts a breakdown's time
in another bound (a recurring compile runs as forward ops; the verdict counts it as
start-up) the breakdown says so with the verdict's numbers.  On real captures: a JAX step
with a host callback (compute-bound, with the faster-compute hypothesis), a retraced
``tf.function`` and a jitted JAX step compiled again for each new shape (start-up bound),
and the bundled sample.  ``tests/test_cli_shares.py`` checks the text and the reports."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from sofa_gui.cli import main
from sofa_gui.core.analysis.palette import label_of
from sofa_gui.core.analysis.verdict import HOST_MAP
from sofa_gui.core.samples import demo_trace_path
from sofa_gui.core.units import fmt_pct

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
CALLBACK = CORPUS / "jax_train_metrics_callback" / "capture-1"
RETRACE = CORPUS / "tf_tape_retrace_python_lr" / "capture-1"
RESHAPE = CORPUS / "jax_train_shape_recompile" / "capture-1"
CAPTURES = {"callback": CALLBACK, "retrace": RETRACE, "reshape": RESHAPE, "sample": None}


def _path(key: str) -> Path:
    return CAPTURES[key] or Path(demo_trace_path())


def analyze_json(path) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["analyze", str(path), "--json"]) == 0
    return json.loads(buf.getvalue())


@pytest.mark.parametrize("key", list(CAPTURES))
def test_header_and_cards_say_what_their_shares_are_of(open_window, key):
    doc = analyze_json(_path(key))
    w = open_window(_path(key), (1280, 800))
    v = doc["verdict"]
    assert w.summary.text_of("Limited by") == \
        f"{v['label']} ({fmt_pct(v['share'])} of profiled time)"
    cards = w.panels["findings"].cards
    assert [c.finding.id for c in cards] == [f["id"] for f in doc["findings"]]
    for card, f in zip(cards, doc["findings"]):
        head = card.figures.text().splitlines()[0]
        if f["estimated_speedup"] is None:
            assert head.endswith(" once")
        elif "covers" in f:  # a hypothesis: the time it is about, then what it saves
            assert head == f"{fmt_pct(f['covers'])} of step, {fmt_pct(f['share'])} saved"
        else:
            assert head == f"{fmt_pct(f['share'])} of step"
        if f["estimated_speedup"] is not None:  # "≥" where the estimate is a lower bound
            floor = "≥" if f.get("estimate_is_lower_bound") else ""
            assert card.figures.text().splitlines()[1].startswith(
                f"{floor}{f['estimated_speedup']:.2f}×")
    best = max((f for f in doc["findings"] if f["estimated_speedup"] is not None),
               key=lambda f: f["estimated_speedup"], default=None)
    if best is not None:
        said = "at least" if best.get("estimate_is_lower_bound") else "up to"
        assert w.panels["findings"].status.text().endswith(
            f"best single fix: {said} {best['estimated_speedup']:.2f}×")
    top = doc["findings"][0]
    assert w.summary.text_of("Top bottleneck") == \
        f"{top['title']} ({cards[0].figures.text().splitlines()[0]})"


def test_the_compute_card_shows_the_compute_share_beside_the_verdict(open_window):
    """Compute-bound at 83.5% of the profiled time: the compute card says the compute
    takes 83.4% of the step and that 2x faster compute saves 41.7%, not a bare 41.7%."""
    doc = analyze_json(CALLBACK)
    assert doc["verdict"]["bound"] == "compute"
    w = open_window(CALLBACK, (1280, 800))
    card = next(c for c in w.panels["findings"].cards if c.finding.id == "compute_bound")
    f = next(f for f in doc["findings"] if f["id"] == "compute_bound")
    assert abs(f["covers"] - doc["verdict"]["shares"]["compute"]) < 0.01
    assert f["share"] < f["covers"]
    assert card.numbers.text().startswith(
        f"{fmt_pct(f['covers'])} of steady-state iteration time, {fmt_pct(f['share'])} saved")
    assert f["confidence_why"] in card.numbers.text()
    assert not w.panels["breakdown"].reading.isVisibleTo(w)  # the verdict moved nothing


@pytest.mark.parametrize("key", ["retrace", "reshape"])
def test_breakdown_says_the_verdict_counts_its_compiles_as_start_up(open_window, key):
    doc = analyze_json(_path(key))
    v = doc["verdict"]
    assert v["bound"] == "startup"
    moved = next(m for m in v["moved"] if m["by"] == "recompile")
    assert moved["to"] == "startup" and moved["share"] > 0.9
    w = open_window(_path(key), (1280, 800))
    panel = w.panels["breakdown"]
    for i in range(len(doc["iterations"]["items"])):
        w.session.select_iteration(i, zoom=False)
        assert panel.reading.isVisibleTo(w)
        side = panel.current_side()
        row = side.row(i)
        held = [label_of(c) for c, t in zip(side.categories, row)
                if HOST_MAP.get(c) in moved["from"] and t >= 0.01 * row.sum()]
        assert "Forward" in held
        counts = (f"The verdict counts {fmt_pct(moved['share'])} of profiled time as "
                  f"Start-up: Recompilation in every step, here in {' / '.join(held)}.")
        # a laptop's short dock holds it to one line, the numbers first, all in the tooltip
        assert panel.compact and panel.reading.text() == counts
        assert f"Categories of what the thread ran. {counts}" in panel.reading.toolTip()
    assert fmt_pct(v["share"]) in w.summary.text_of("Limited by")
