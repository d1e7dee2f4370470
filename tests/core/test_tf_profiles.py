"""TensorBoard profile folders and TF/JAX runs, on real captures (tests/data/tf, see
benchmarks/gen_tf_captures.py): opening, step markers, the main thread, tf.data lanes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sofa_gui.core.analysis.host_side import cpu_lanes_of_rank, main_thread
from sofa_gui.core.analysis.iterations import detect_iterations
from sofa_gui.core.errors import TraceFormatError
from sofa_gui.core.importers import load_trace, pick_importer
from sofa_gui.core.trace import Kind

TF = Path(__file__).resolve().parents[1] / "data" / "tf"
TRUTH = json.loads((TF / "ground_truth.json").read_text())
CASES = sorted(k for k in TRUTH if not k.startswith("_"))


def xplane_file(case: str) -> Path:
    return TF / TRUTH[case]["files"][0]


@pytest.mark.parametrize("level", ["logdir", "plugins", "profile", "run", "file"])
def test_every_level_of_a_tensorboard_logdir_opens_the_same_run(level):
    f = xplane_file("serial_map")
    path = {"logdir": TF / "serial_map", "plugins": TF / "serial_map" / "plugins",
            "profile": TF / "serial_map" / "plugins" / "profile", "run": f.parent,
            "file": f}[level]
    assert pick_importer(path).name == "xplane"
    t = load_trace(path, use_cache=False)
    assert len(t.slices) == len(load_trace(f, use_cache=False).slices) > 10_000
    if level != "file":
        assert t.meta.extra["profile_run"]["folder"] == str(f.parent)
        assert t.meta.extra["profile_run"]["hosts"] == ["vm"]


def test_several_runs_open_the_newest_and_list_the_others(tmp_path):
    profile = tmp_path / "logdir" / "plugins" / "profile"
    old, new = profile / "2026_01_01_00_00_00", profile / "2026_02_01_00_00_00"
    for run, case in ((old, "cached"), (new, "generator")):
        run.mkdir(parents=True)
        shutil.copy(xplane_file(case), run / "vm.xplane.pb")
    t = load_trace(tmp_path / "logdir", use_cache=False)
    assert t.meta.extra["profile_run"]["folder"] == str(new)
    assert t.meta.extra["profile_run"]["other_runs"] == [str(old)]
    note = next(n for n in t.meta.load_stats.notes if "profile runs found" in n)
    assert "2 profile runs found" in note and "2026_01_01_00_00_00" in note
    # the newest is the generator run: its Python-side input stage is there
    assert "Iterator::Generator" in t.names


def test_several_hosts_of_one_run_load_as_ranks(tmp_path):
    run = tmp_path / "plugins" / "profile" / "2026_03_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(xplane_file("cached"), run / "hostA.xplane.pb")
    shutil.copy(xplane_file("generator"), run / "hostB.xplane.pb")
    t = load_trace(tmp_path, use_cache=False)
    assert t.meta.ranks == [0, 1] and t.meta.world_size == 2
    assert t.meta.extra["profile_run"]["hosts"] == ["hostA", "hostB"]
    groups = set(t.lanes.group)
    assert {"rank 0 · Host CPU", "rank 1 · Host CPU", "rank 0 · tf.data",
            "rank 1 · tf.data"} <= groups
    one = load_trace(xplane_file("cached"), use_cache=False)
    assert int((t.lanes.rank[t.slices.lane] == 0).sum()) == len(one.slices)
    # each rank's main thread is its own python thread
    for rank in (0, 1):
        lane = main_thread(t, cpu_lanes_of_rank(t, rank))
        assert t.lanes.name[lane] == "python" and t.lanes.rank[lane] == rank


def test_folders_without_a_profile_say_so(tmp_path):
    (tmp_path / "plugins" / "profile" / "run").mkdir(parents=True)
    with pytest.raises(TraceFormatError, match="not a trace folder"):
        load_trace(tmp_path, use_cache=False)
    bad = tmp_path / "plugins" / "profile" / "run" / "vm.xplane.pb"
    bad.write_bytes(xplane_file("cached").read_bytes()[:5000])
    with pytest.raises(TraceFormatError) as err:
        load_trace(tmp_path, use_cache=False)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_cli_analyzes_a_logdir_and_fails_cleanly_on_an_empty_one(tmp_path):
    env = {**os.environ, "SOFA_GUI_CACHE_DIR": str(tmp_path / "cache")}
    ok = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(TF / "step_markers"),
                         "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert len(json.loads(ok.stdout)["iterations"]["items"]) == 12
    (tmp_path / "empty").mkdir()
    bad = subprocess.run([sys.executable, "-m", "sofa_gui", "analyze", str(tmp_path / "empty")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_step_markers_are_step_annotations():
    t = load_trace(TF / "step_markers", use_cache=False)
    s = t.slices
    ann = np.flatnonzero(s.kind == int(Kind.ANNOTATION))
    names = sorted({t.names[i] for i in s.name[ann]})
    assert names == sorted(f"train step {i}" for i in range(12))
    it = detect_iterations(t)
    assert it.method == "annotations" and len(it) == 12
    assert it.labels[0] == "train step 0" and it.labels[-1] == "train step 11"
    assert t.args.get(int(s.args[ann[0]]))["step_num"] == 0  # the original stat is kept


@pytest.mark.parametrize("case", CASES)
def test_the_python_thread_is_the_main_thread(case):
    """Not one of the runtime pools (Eigen, tf_Compute, XLA) that hold more events."""
    t = load_trace(TF / case, use_cache=False)
    lane = main_thread(t, cpu_lanes_of_rank(t, -1))
    assert t.lanes.name[lane] == "python"
    if case != "jax_train":  # TF: an Eigen pool has the most events, not the loop thread
        busiest = int(np.argmax(np.bincount(t.slices.lane, minlength=len(t.lanes))))
        assert busiest != lane


@pytest.mark.parametrize("case", ["generator", "serial_map", "parallel_prefetch", "cached"])
def test_tf_data_threads_are_grouped_under_tf_data(case):
    t = load_trace(TF / case, use_cache=False)
    lanes = np.flatnonzero([g == "tf.data" for g in t.lanes.group])
    assert len(lanes) >= 1
    assert all(t.lanes.name[i].startswith("tf_data") for i in lanes)
    iters = np.isin(t.slices.name, t.name_ids(lambda n: n.startswith("Iterator::")))
    on = set(t.slices.lane[iters].tolist()) - {main_thread(t, cpu_lanes_of_rank(t, -1))}
    assert on and on <= set(lanes.tolist())


@pytest.mark.parametrize("case", CASES)
def test_every_capture_has_its_true_number_of_iterations(case):
    t = load_trace(TF / case, use_cache=False)
    it = detect_iterations(t)
    assert len(it) == TRUTH[case]["steps"] == 12
    s = t.slices
    if case == "jax_train":  # no input fetch traced: each step starts at its jitted call
        heads = t.name_ids(lambda n: n == "PjitFunction(train_step)")
    elif case == "step_markers":
        heads = t.name_ids(lambda n: n.startswith("train step "))
    else:  # TF: each step starts where the loop fetches its batch
        heads = t.name_ids(lambda n: n == "TFE_Py_FastPathExecute_C")
        fetch = t.name_ids(lambda n: n == "EagerLocalExecute: IteratorGetNext")
        inside = np.flatnonzero(np.isin(s.name, fetch))
        assert len(inside) == 12
    first = np.flatnonzero(np.isin(s.name, heads))
    first = first[s.depth[first] == s.depth[first].min()]  # the outermost of nested twins
    starts = np.unique(s.start[first])
    assert np.array_equal(np.sort(it.starts), starts[:12])
    # the median step matches the wall time measured in Python around each step (noisy
    # machine: within 35%)
    med_ms = float(np.median(it.durations)) / 1e6
    assert med_ms == pytest.approx(TRUTH[case]["median_step_ms"], rel=0.35)


def test_public_mi300_jax_capture():
    """5 calls of a jitted conv on 8 MI300X: one iteration per call, the first call's
    one-off work is start-up, the GPUs are nearly idle, the XLA runtime threads are host
    dispatch work."""
    from sofa_gui.core.analysis.pipeline import analyze

    t = load_trace(Path(__file__).resolve().parents[1] / "data" / "xplane" / "tw003.xplane.pb",
                   use_cache=False)
    a = analyze(t)
    s = t.slices
    calls = np.flatnonzero(np.isin(s.name, t.name_ids(
        lambda n: n == "PjitFunction(forward_3d_conv)")) & (s.depth == 0))
    assert len(a.iterations) == len(calls) == 5
    assert np.array_equal(a.iterations.starts, np.sort(s.start[calls]))
    busy = [float(d.column("compute").sum()) / float((d.ends - d.starts).sum())
            for d in a.breakdown.devices]
    assert max(busy) < 0.06
    ids = [f.id for f in a.findings]
    assert "startup_cost" in ids and "host_dispatch_bound" in ids
    startup = a.findings[ids.index("startup_cost")]
    assert startup.estimated_speedup is None and startup.one_off_ns > 20e6
    assert a.run.value("framework") == "jax" and a.run.value("compiled") == "xla"
    # compiled already: no "jit it" advice
    for f in a.findings:
        assert not any(x.text.startswith("jax.jit the whole") for x in f.fixes)
