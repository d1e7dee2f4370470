"""``analyze`` text, its JSON, the ``findings`` SQL table and the HTML and Markdown
report word each share the same way (``core/analysis/shares.py``): the verdict's of the
profiled time, a finding's of steady-state iteration time (a hypothesis with the time it
is about and what its fix saves), and the breakdown says which of its time the verdict
counts in another bound.  On real captures: a JAX step with a host callback
(compute-bound) and a ``tf.function`` traced again each step (start-up bound).  The app's
side: ``gui/test_shares_agree_app.py``."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from sofa_gui.cli import main
from sofa_gui.core.units import fmt_pct

CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
CALLBACK = CORPUS / "jax_train_metrics_callback" / "capture-1"
RETRACE = CORPUS / "tf_tape_retrace_python_lr" / "capture-1"


def _run(*argv) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


@pytest.fixture(scope="module", params=[CALLBACK, RETRACE], ids=["callback", "retrace"])
def run(request, tmp_path_factory):
    """(analyze --json document, analyze text, Markdown report, HTML report)."""
    path = str(request.param)
    out = tmp_path_factory.mktemp("report")
    _run("report", path, "-o", str(out / "r.md"))
    _run("report", path, "-o", str(out / "r.html"))
    return (json.loads(_run("analyze", path, "--json")), _run("analyze", path),
            (out / "r.md").read_text(), (out / "r.html").read_text())


def _words(f: dict) -> str:
    """A finding's share in the words every text surface uses."""
    if "covers" in f:
        return (f"{fmt_pct(f['covers'])} of steady-state iteration time, "
                f"{fmt_pct(f['share'])} saved")
    return f"{fmt_pct(f['share'])} of steady-state iteration time"


def test_every_surface_words_the_findings_shares_alike(run):
    doc, text, md, html = run
    assert "of the profiled time" in text.splitlines()[0]
    assert fmt_pct(doc["verdict"]["share"]) in text.splitlines()[0]
    for f in doc["findings"]:
        floor = "at least " if f.get("estimate_is_lower_bound") else ""
        said = f"{_words(f)}, estimated speed-up {floor}{f['estimated_speedup']:.2f}x"
        assert f"({f['id']}): {said}" in text
        assert said in md and said in html
    assert "share " not in "\n".join(line for line in text.splitlines() if "] " in line)


def test_the_compute_hypothesis_shows_the_compute_share_and_the_saving():
    doc = json.loads(_run("analyze", str(CALLBACK), "--json"))
    f = next(f for f in doc["findings"] if f["id"] == "compute_bound")
    assert f["share"] == pytest.approx(f["covers"] / 2, abs=1e-3)  # 2x faster compute
    assert abs(f["covers"] - doc["verdict"]["shares"]["compute"]) < 0.01
    assert doc["verdict"]["moved"] == []
    sql = json.loads(_run("sql", str(CALLBACK), "SELECT id, share, covers FROM findings",
                          "--json"))
    rows = {r[0]: (round(r[1], 4), r[2] if r[2] is None else round(r[2], 4))
            for r in sql["rows"]}
    assert rows == {g["id"]: (g["share"], g.get("covers")) for g in doc["findings"]}


def test_the_breakdown_says_the_verdict_counts_the_compiles_as_start_up(run):
    doc, text, md, html = run
    moved = doc["verdict"]["moved"]
    said = [line for line in text.splitlines() if "The verdict counts" in line]
    if not moved:
        assert not said
        return
    (m,) = moved
    title = next(f["title"] for f in doc["findings"] if f["id"] == m["by"])
    assert title == "Recompilation in every step (start-up work repeated)"
    assert m["to"] == "startup" == doc["verdict"]["bound"]
    assert said == [f"  Categories of what the thread ran. The verdict counts "
                    f"{fmt_pct(m['share'])} of profiled time as Start-up: Recompilation in every "
                    f"step, here in "
                    f"Forward / Runtime / launch API."]
    assert m["from"] == ["compute", "host_overhead"]
    assert said[0].strip() in md and said[0].strip() in html


def test_diff_gives_the_findings_shares_of_the_step():
    doc = json.loads(_run("analyze", str(CALLBACK), "--json"))
    text = _run("diff", str(CALLBACK), str(CALLBACK))
    for f in doc["findings"]:
        pct = fmt_pct(f["share"])
        assert f"Persisting: {f['id']} ({pct} -> {pct} of step, " in text
