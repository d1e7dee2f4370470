"""``sofa-gui fleet`` on a real Dask cluster (scheduler + 2 workers on 127.0.0.1).

32 ranks made from the two public HTA rank traces (tests/data/ranks), rank ids 0..31
in ``distributedInfo`` and file names; rank 13's compute kernels take 2x longer.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from cluster import ROOT, Cluster, leftovers, marked_env, stop
from tracedata import DATA

from sofa_gui.core.fleet.synth import make_rank_folder

pytestmark = pytest.mark.slow
SLOW_RANK = 13
SOURCES = [DATA / "ranks" / "sampled_rank-0.json.gz", DATA / "ranks" / "sampled_rank-1.json.gz"]


@pytest.fixture(scope="module")
def run32(tmp_path_factory):
    out = tmp_path_factory.mktemp("run32")
    make_rank_folder(out, SOURCES, 32, slow={SLOW_RANK: 2.0})
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("dask"), n_workers=2)
    yield c
    c.close()
    assert not leftovers(c.mark), "cluster processes left behind"


def _fleet(args, env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sofa_gui", "fleet", *args], env=env,
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_fleet_on_cluster_survives_worker_loss_and_finds_the_straggler(run32, cluster):
    proc = _fleet([str(run32), "--scheduler", cluster.address, "--json", "--no-cache"],
                  cluster.env)
    done_lines: list[str] = []
    killed_at: list[int] = []

    def read_progress():
        for line in proc.stderr:
            if line.startswith("rank "):
                done_lines.append(line)
                if len(done_lines) == 3 and not killed_at:
                    killed_at.append(len(done_lines))
                    cluster.workers[1].send_signal(signal.SIGKILL)

    t = threading.Thread(target=read_progress, daemon=True)
    t.start()
    out = proc.stdout.read()
    assert proc.wait(timeout=600) == 0
    t.join(timeout=10)
    assert killed_at == [3], "the worker was not killed mid-run"
    assert cluster.workers[1].wait(timeout=10) == -signal.SIGKILL
    doc = json.loads(out)
    # the JSON contract of the issue
    assert doc["engine"]["kind"] == "dask"
    assert doc["engine"]["scheduler"] == cluster.address
    assert doc["engine"]["workers"] == 1  # the other one was killed
    assert [r["rank"] for r in doc["ranks"]] == list(range(32))
    assert all(r["error"] is None for r in doc["ranks"]), [r["error"] for r in doc["ranks"]]
    assert len(done_lines) == 32
    for r in doc["ranks"]:
        assert set(r) >= {"rank", "path", "events", "error", "iterations", "top_finding"}
        assert r["iterations"]["count"] == 2 and r["events"] > 4000
        assert 0 < r["cpu_seconds"]
    assert len(doc["iteration_us"]) == 32 and all(len(row) == 2 for row in doc["iteration_us"])
    assert doc["alignment"] == "label"
    assert doc["iterations"] == ["ProfilerStep#551", "ProfilerStep#552"]
    # ranks finished after the kill all ran on the surviving worker
    assert len({r["worker"] for r in doc["ranks"]}) == 2
    # the injected straggler, with its cause, and nobody else
    assert [s["rank"] for s in doc["stragglers"]] == [SLOW_RANK]
    s = doc["stragglers"][0]
    assert s["cause"] == "work" and s["category"] == "compute" and s["iterations"] == [0, 1]
    assert s["excess_us"] > 0.1 * min(doc["iteration_us"][0])
    assert set(s) >= {"rank", "iterations", "excess_us", "cause"}
    assert doc["findings"][0]["ranks"] == [SLOW_RANK]


def test_embedded_cluster_reports_a_bad_rank_and_completes_the_others(tmp_path):
    run = tmp_path / "run"
    make_rank_folder(run, SOURCES, 3)
    bad = run / "rank-2.json"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])  # truncated mid-file
    # unique per run: other test runs on this machine may run the same test at once
    env = marked_env(uuid.uuid4().hex, tmp_path / "cache")
    proc = _fleet([str(run), "--workers", "1", "--json"], env)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        stop([proc], env["SOFA_GUI_TEST_MARK"])
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert doc["engine"]["embedded"] is True and doc["engine"]["workers"] == 1
    errors = {r["rank"]: r["error"] for r in doc["ranks"]}
    assert errors[0] is None and errors[1] is None
    assert errors[2] and "rank-2.json" not in errors[2]  # the reason; the path is its own key
    assert doc["ranks"][2]["path"].endswith("rank-2.json")
    assert doc["iteration_us"][2] == [None, None]
    assert "rank 2 failed:" in err
    # the worker processes end with the CLI (allow a loaded machine a few seconds)
    end = time.monotonic() + 20
    while leftovers(env["SOFA_GUI_TEST_MARK"]) and time.monotonic() < end:
        time.sleep(0.2)
    left = leftovers(env["SOFA_GUI_TEST_MARK"])
    assert not left, f"embedded cluster processes left behind: {[p.cmdline() for p in left]}"


@pytest.mark.parametrize("args, msg", [
    (["--ranks", "7-3"], "bad rank selection"),
    (["--ranks", "99"], "selects none"),
    (["--workers", "0"], "must be at least 1"),
])
def test_fleet_usage_errors_exit_2(args, msg):
    proc = subprocess.run([sys.executable, "-m", "sofa_gui", "fleet", str(DATA / "ranks"),
                           *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert msg in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("how", ["cancelled()", "Engine.cancel"])
def test_cancelled_ranks_are_not_reported_as_failed(tmp_path, monkeypatch, how):
    # run_ranks turned every rank still pending at a cancel into a failed summary
    # ("task cancelled"), handed to on_done and returned with the results
    from sofa_gui.core.fleet.engine import open_engine, run_ranks
    from sofa_gui.core.fleet.runset import rank_files
    from sofa_gui.core.progress import Cancelled

    run = tmp_path / "run"
    make_rank_folder(run, SOURCES, 6)
    monkeypatch.setenv("SOFA_GUI_CACHE_DIR", str(tmp_path / "cache"))
    seen, stop_now = [], threading.Event()

    def done(summary):
        seen.append(summary)
        if how == "Engine.cancel":
            engine.cancel()  # as the app's Cancel button does, from another thread
        stop_now.set()

    with open_engine(workers=1) as engine, pytest.raises(Cancelled):
        run_ranks(engine, rank_files(run), on_done=done,
                  cancelled=stop_now.is_set if how == "cancelled()" else None)
    assert seen and all(s.error is None for s in seen), [s.error for s in seen]
