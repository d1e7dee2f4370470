"""Cross-rank analysis on hand-made summaries (no cluster): what each rule rests on."""

from __future__ import annotations

import io

import numpy as np
import pytest

from sofa_gui.core.analysis.balance import MOVES, NOT_WORK
from sofa_gui.core.fleet.bar import RankBar
from sofa_gui.core.fleet.cross import cross_rank
from sofa_gui.core.fleet.runset import parse_ranks, rank_files, select
from sofa_gui.core.fleet.summary import RankSummary

CATS = ["compute", "communication", "idle_input", "idle_other"]
MS = 1_000_000


def _rank(r, rows, labels=None, top="compute_bound", header=None, facts=None):
    """rows: per iteration (compute, communication, idle_input, idle_other) in ms;
    ``facts``: key -> value the rank's trace proves."""
    times = [[int(v * MS) for v in row] for row in rows]
    return RankSummary(rank=r, path=f"/run/rank-{r}.json", events=100, header_rank=header,
                       labels=labels or [], durations=[sum(t) for t in times], side="device",
                       categories=list(CATS), times=times, comm_total=[t[1] for t in times],
                       findings=[{"id": top, "title": top, "severity": "high", "share": 0.5}],
                       facts={k: {"value": v, "detail": "", "proof": f"`{k} event`"}
                              for k, v in (facts or {}).items()})


def _sync_job(n=16, slow=5, slow_cat=0, extra=30, iters=4, facts=None):
    """Synchronous job: every rank's iteration is 100 ms; the slow rank spends ``extra``
    ms more in ``slow_cat`` and the others wait that long in communication; ``facts``
    (rank -> facts) what each rank's trace proves."""
    out = []
    for r in range(n):
        rows = []
        for _ in range(iters):
            base = [60 + (r % 3) * 0.5, 30 + extra, 5, 5 - (r % 3) * 0.5]
            if r == slow:
                base[1] -= extra
                base[slow_cat] += extra
            rows.append(base)
        out.append(_rank(r, rows, [f"ProfilerStep#{10 + j}" for j in range(iters)],
                         facts=(facts or {}).get(r)))
    return out


def test_slow_rank_holding_collectives_is_found_with_its_cause():
    res = cross_rank(_sync_job(slow=5, slow_cat=2))
    assert [s.rank for s in res.stragglers] == [5]
    s = res.stragglers[0]
    # a wait for input is time that is not work: the cause as the balance model reads it,
    # with the category that holds it
    assert s.cause == NOT_WORK and s.category == "idle_input" and s.iterations == [0, 1, 2, 3]
    assert s.excess_ns == pytest.approx(30 * MS, rel=0.05)
    assert s.removed_ns == pytest.approx(30 * MS, rel=0.05) and s.moved_ns < 1 * MS
    assert s.cause_text().startswith("time that is not work (+29.50 ms outside ops")
    f = res.findings[0]
    assert "the excess is time that is not work" in f.summary
    assert f.id == "straggler_holds_collectives" and f.ranks == [5]
    assert f.confidence > 0.5 and f.rests_on
    assert "input" in f.fixes[0].text  # the cause's remedy first
    from sofa_gui.core.analysis.findings import RULES

    assert RULES["straggler_holds_collectives"].title  # declared in the advisor's registry
    # the slow rank waits least in collectives; the others wait ~30 ms more
    skew = res.wait_skew()
    assert skew[5] == 0 and np.all(skew[np.arange(16) != 5] >= 29 * MS)


def test_straggler_estimate_is_the_balanced_step_not_the_whole_wait():
    # rank 5 computes 30 ms more (work that moves): balanced, each of the 16 ranks does
    # 30/16 ms more; the collective's own cost (30 ms, the least any rank waits) stays
    res = cross_rank(_sync_job(slow=5, slow_cat=0))
    f = res.findings[0]
    compute = [60 + (r % 3) * 0.5 for r in range(16)]
    rest = sorted(10 - (r % 3) * 0.5 for r in range(16))[7]  # the lower median rank's
    balanced = np.mean(compute) + 30 / 16 + rest + 30
    assert f.estimated_speedup == pytest.approx(130 / balanced, rel=1e-3)
    assert f.estimated_speedup < 1 / (1 - 30 / 130)  # not the whole skew removed
    assert "shuffle the samples" in f.fixes[1].text  # after the device check of a compute cause
    # the same excess in input waits is not work: it goes only with its cause
    g = cross_rank(_sync_job(slow=5, slow_cat=2)).findings[0]
    assert g.estimated_speedup == pytest.approx(130 / (np.mean(compute) + rest + 30), rel=1e-3)
    assert "input" in g.fixes[0].text and "find what it waits on" in g.fixes[1].text


def test_extra_compute_is_work_that_moves_named_by_its_category():
    s = cross_rank(_sync_job(slow=5, slow_cat=0)).stragglers[0]
    assert s.cause == MOVES and s.category == "compute"
    assert s.moved_ns == pytest.approx(30 * MS * 15 / 16, rel=0.05)  # above the 16 ranks' mean
    assert s.cause_text().startswith("op work that moves (+28")
    assert "largest category: compute" in s.cause_text()


def _shown(finding) -> list[str]:
    return [f.framework for f in finding.fixes]


def test_fleet_fixes_are_chosen_by_the_jobs_run_facts():
    # every rank proves a PyTorch job on CPUs: no TensorFlow or JAX fix, no GPU check
    pt = {r: {"framework": "pytorch", "device": "cpu"} for r in range(16)}
    res = cross_rank(_sync_job(slow=5, slow_cat=0, facts=pt))
    f = res.findings[0]
    assert set(_shown(f)) <= {"pytorch", "any"} and "shuffle the samples" in f.fixes[0].text
    why = {fix.framework: reason for fix, reason in f.hidden_fixes}
    assert "this run is pytorch" in why["tensorflow"] and "this run is pytorch" in why["jax"]
    assert any("nvidia-smi" in fix.text and "device is cpu" in reason
               for fix, reason in f.hidden_fixes)
    assert res.facts.value("framework") == "pytorch"
    assert res.facts.get("framework").proof.startswith("rank 0: ")
    assert res.to_dict()["run"]["framework"]["value"] == "pytorch"
    # the same job where the traces prove nothing: every framework's fix is offered
    assert {"tensorflow", "jax"} <= set(_shown(cross_rank(_sync_job(slow=5)).findings[0]))


def test_ranks_that_disagree_leave_the_fact_unknown():
    facts = {r: {"framework": "pytorch"} for r in range(16)}
    facts[3] = {"framework": "jax"}
    res = cross_rank(_sync_job(slow=5, slow_cat=0, facts=facts))
    fw = res.facts.get("framework")
    assert not fw.known and "disagree" in fw.detail
    assert {"tensorflow", "jax"} <= set(_shown(res.findings[0]))


def test_uniform_job_has_no_straggler_and_no_imbalance():
    res = cross_rank(_sync_job(extra=0))
    assert res.stragglers == []
    assert [f.id for f in res.findings] == ["fleet_compute_bound"]
    assert res.findings[0].title.endswith("on 16 of 16 ranks")


def test_broad_imbalance_is_a_finding_not_one_straggler():
    ranks = []
    for r in range(16):
        c = 50 + 2 * r  # own time spreads 50..80 ms over a 100 ms iteration
        ranks.append(_rank(r, [[c, 100 - c - 4, 2, 2]] * 3))
    res = cross_rank(ranks)
    ids = [f.id for f in res.findings]
    assert "load_imbalance" in ids
    assert res.alignment == "order" and res.labels == ["#0", "#1", "#2"]


def test_alignment_by_label_leaves_missing_iterations_empty():
    a = _rank(0, [[60, 30, 5, 5]] * 3, ["ProfilerStep#9", "ProfilerStep#10", "ProfilerStep#11"])
    b = _rank(1, [[60, 30, 5, 5]] * 2, ["ProfilerStep#10", "ProfilerStep#11"])
    res = cross_rank([b, a])
    assert res.alignment == "label"
    assert res.labels == ["ProfilerStep#9", "ProfilerStep#10", "ProfilerStep#11"]  # natural order
    assert res.ranks == [0, 1]
    assert np.isnan(res.iteration[1, 0]) and res.iteration[1, 1] == 100 * MS
    assert res.to_dict()["iteration_us"][1] == [None, 100000.0, 100000.0]


def test_failed_rank_keeps_its_row_and_error():
    ok = _sync_job(n=3, extra=0)
    bad = RankSummary.failed(3, "/run/rank-3.json", "truncated JSON")
    d = cross_rank([*ok, bad]).to_dict()
    assert d["ranks"][3]["error"] == "truncated JSON"
    assert d["iteration_us"][3] == [None] * 4
    assert d["ranks"][3]["iterations"] == {"count": 0, "median_us": None, "method": "none"}


def test_distributed_info_ranks_win_when_distinct():
    s = [_rank(0, [[1, 1, 1, 1]], header=7), _rank(1, [[1, 1, 1, 1]], header=3)]
    assert cross_rank(s).ranks == [3, 7]


def test_rank_selection_and_files(tmp_path):
    assert parse_ranks("0-2,5") == {0, 1, 2, 5}
    with pytest.raises(ValueError, match="bad rank selection"):
        parse_ranks("x")
    for i in (0, 1, 2, 10):
        (tmp_path / f"trace_rank{i}.json").write_text('{"traceEvents": [], "schemaVersion": 1}')
    files = rank_files(tmp_path)
    assert [f.rank for f in files] == [0, 1, 2, 10] and files[0].rank_from == "file name"
    assert [f.rank for f in select(files, "1,2-")] == [1, 2, 10]


def test_bar_groups_ranks_and_marks_failures():
    buf = io.StringIO()
    bar = RankBar(list(range(128)), stream=buf, tty=True)
    bar.update(RankSummary.failed(5, "p", "boom"))
    for r in range(64, 128):
        bar.update(RankSummary(rank=r, path="p"))
    cells = bar.cells()
    assert len(cells) == 64 and cells[2] == "x" and set(cells[32:]) == {"#"}
    assert "65/128 ranks, 1 failed" in buf.getvalue()
