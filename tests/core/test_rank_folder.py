"""Rank-folder importer: several Kineto files (one per rank) -> one trace grouped per rank."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from kineto_truth import truth
from tracedata import DATA

from sofa_gui.core.importers import load_trace, pick_importer
from sofa_gui.core.importers.chrome.rank_folder import IMPORTER, assign_ranks, rank_in_name
from sofa_gui.core.progress import NullProgress
from sofa_gui.core.trace import Kind, LaneKind

RANKS = DATA / "ranks"


@pytest.fixture(scope="module")
def hta():
    files = sorted(RANKS.glob("*.json.gz"))
    return IMPORTER.load(RANKS, NullProgress()), [truth(f) for f in files]


def test_hta_ranks_folder_is_one_trace_with_lanes_per_rank(hta):
    trace, truths = hta
    assert pick_importer(RANKS).name == "kineto-ranks"
    assert trace.meta.format == "kineto-ranks"
    assert trace.meta.ranks == [0, 1]
    assert trace.meta.world_size == 128  # from distributedInfo: the job had 128 ranks
    assert [f["rank_from"] for f in trace.meta.extra["files"]] == ["distributedInfo"] * 2
    for r, t in enumerate(truths):
        mine = trace.lanes.rank[trace.slices.lane] == r
        kinds = np.bincount(trace.slices.kind[mine], minlength=len(Kind))
        assert {Kind(k).label: int(n) for k, n in enumerate(kinds) if n} == dict(t.kinds)
        lanes = [i for i in range(len(trace.lanes)) if trace.lanes.rank[i] == r]
        assert all(trace.lanes.group[i].startswith(f"rank {r} · ") for i in lanes)
        gpu = [i for i in lanes if trace.lanes.kind[i] == LaneKind.GPU]
        assert len(gpu) == len(t.gpu_lanes)
        assert sorted(trace.slices.start[mine].tolist()) == sorted(t.x_starts_ns)


def test_load_report_is_the_sum_over_files(hta):
    trace, truths = hta
    rep = trace.meta.load_stats
    assert rep.read == sum(len(t.events) for t in truths)
    assert rep.loaded + rep.skipped_total == rep.read


def test_lanes_are_ordered_rank_by_rank(hta):
    trace, _ = hta
    order = trace.lanes.display_order()
    ranks = trace.lanes.rank[order].tolist()
    assert ranks == sorted(ranks)


def test_launch_flows_never_cross_ranks(hta):
    trace, _ = hta
    f, s = trace.flows, trace.slices
    assert len(f) == int((s.kind == Kind.RUNTIME).sum())  # every runtime call launched work
    rank = trace.lanes.rank[s.lane]
    assert (rank[f.src] == rank[f.dst]).all()
    assert (s.correlation[f.src] == s.correlation[f.dst]).all()


def _kineto(path: Path, rank: int | None = None, base: int | None = None, t0: float = 1.0):
    doc = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1, "ts": t0, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t0 + 1, "dur": 2,
         "args": {"device": 0, "stream": 7}},
    ]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 4}
    if base is not None:
        doc["baseTimeNanoseconds"] = base
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def test_rank_from_file_name_then_file_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    _kineto(a / "trace_rank_3.json")
    _kineto(a / "trace_rank_1.json.gz")
    _kineto(b / "w10.json"), _kineto(b / "w9.json")
    ta = load_trace(a, use_cache=False)
    assert ta.meta.ranks == [1, 3]
    assert {f["rank_from"] for f in ta.meta.extra["files"]} == {"file name"}
    tb = load_trace(b, use_cache=False)
    assert [(f["file"], f["rank"]) for f in tb.meta.extra["files"]] == [("w9.json", 0),
                                                                        ("w10.json", 1)]
    assert tb.meta.extra["files"][0]["rank_from"] == "file order"
    assert tb.meta.world_size == 2


def test_duplicate_distributed_ranks_fall_back(tmp_path):
    _kineto(tmp_path / "run_rank0.json", rank=0)
    _kineto(tmp_path / "run_rank1.json", rank=0)  # e.g. two single-GPU runs
    t = load_trace(tmp_path, use_cache=False)
    assert t.meta.ranks == [0, 1]
    assert t.meta.extra["files"][1]["rank_from"] == "file name"


def test_each_file_keeps_its_clock_unless_bases_differ(tmp_path):
    same, diff = tmp_path / "same", tmp_path / "diff"
    same.mkdir(), diff.mkdir()
    _kineto(same / "r0.json", 0, base=10**18, t0=1.0)
    _kineto(same / "r1.json", 1, base=10**18, t0=2.0)
    t = load_trace(same, use_cache=False)
    assert sorted(set(t.slices.start.tolist())) == [1000, 2000, 3000]
    assert t.meta.epoch_offset_ns == 10**18
    _kineto(diff / "r0.json", 0, base=10**18, t0=1.0)
    _kineto(diff / "r1.json", 1, base=10**18 + 5000, t0=1.0)
    t = load_trace(diff, use_cache=False)
    r1 = t.lanes.rank[t.slices.lane] == 1
    assert t.slices.start[r1].min() == 6000  # shifted onto rank 0's base
    assert any("baseTimeNanoseconds" in n for n in t.meta.load_stats.notes)


def test_can_open_folders_of_kineto_files(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    (one / "notes.json").write_text('{"not": "a trace"}')
    assert IMPORTER.can_open(one) == 0
    _kineto(one / "r0.json")
    assert 0 < IMPORTER.can_open(one) < 0.9  # one trace: below any folder format's content
    _kineto(one / "r1.json")
    assert IMPORTER.can_open(one) >= 0.9
    sofa = tmp_path / "sofa"
    shutil.copytree(one, sofa)
    (sofa / "gputrace.csv").write_text("timestamp,event\n")
    assert IMPORTER.can_open(sofa) == 0
    rec = tmp_path / "rec"
    shutil.copytree(one, rec)
    (rec / "manifest.json").write_text("{}")
    assert IMPORTER.can_open(rec) == 0
    assert IMPORTER.can_open(one / "r0.json") == 0


def test_assign_ranks_helpers():
    assert rank_in_name("sampled_rank-12.json.gz") == 12
    assert rank_in_name("RANK_3.pt.trace.json") == 3
    assert rank_in_name("worker0.1623143089861.pt.trace.json.gz") is None
    assert assign_ranks([]) == []


def test_a_folder_with_one_trace_opens_as_that_trace(tmp_path):
    """A TensorBoard plugin run folder holds one ``worker0.*.pt.trace.json.gz``."""
    src = sorted(RANKS.glob("*.json.gz"))[0]
    run = tmp_path / "resnet50_num_workers_0"
    run.mkdir()
    shutil.copy(src, run / src.name)
    (run / "events.out.tfevents.1").write_bytes(b"\0\1")
    folder = load_trace(run, use_cache=False)
    single = load_trace(src, use_cache=False)
    assert pick_importer(run).name == "kineto-ranks"
    assert folder.meta.format == single.meta.format
    assert len(folder.slices) == len(single.slices)
    assert folder.lanes.name == single.lanes.name and folder.lanes.group == single.lanes.group
    assert any("events.out.tfevents.1: left out" in n for n in folder.meta.load_stats.notes)
