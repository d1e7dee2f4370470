"""How many decode processes an open uses: the cgroup's CPU quota and a live probe decide,
so that splitting a file never makes its open slower than one process."""

from __future__ import annotations

from sofa_gui.core.importers.chrome import cores, parallel


def test_cgroup_v2_quota_rounds_up_to_whole_cpus(tmp_path):
    v2 = tmp_path / "cpu.max"
    v2.write_text("150000 100000\n")
    assert cores.quota_cpus(v2, (tmp_path / "x", tmp_path / "y")) == 2
    v2.write_text("50000 100000\n")
    assert cores.quota_cpus(v2, (tmp_path / "x", tmp_path / "y")) == 1
    v2.write_text("max 100000\n")
    assert cores.quota_cpus(v2, (tmp_path / "x", tmp_path / "y")) is None


def test_cgroup_v1_quota_and_no_limit(tmp_path):
    quota, period = tmp_path / "q", tmp_path / "p"
    quota.write_text("100000\n")
    period.write_text("100000\n")
    assert cores.quota_cpus(tmp_path / "none", (quota, period)) == 1
    quota.write_text("-1\n")
    assert cores.quota_cpus(tmp_path / "none", (quota, period)) is None
    assert cores.quota_cpus(tmp_path / "none", (tmp_path / "a", tmp_path / "b")) is None


def test_usable_cpus_is_capped_by_the_quota(monkeypatch):
    monkeypatch.setattr(cores, "quota_cpus", lambda: 1)
    assert cores.usable_cpus() == 1


def test_parallel_gain_is_a_positive_ratio():
    gain = cores.parallel_gain()
    assert gain is None or 0 < gain < 10


def test_a_big_file_stays_in_one_process_when_a_second_would_not_run_in_parallel(
        monkeypatch):
    monkeypatch.delenv("SOFA_GUI_DECODE_PARTS", raising=False)
    monkeypatch.delenv("SOFA_GUI_PARALLEL_MIN_BYTES", raising=False)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    calls = []
    monkeypatch.setattr(cores, "parallel_gain", lambda: calls.append(1) or 1.05)
    monkeypatch.setattr(parallel, "parallel_pays", cores.parallel_pays)
    assert parallel.decode_parts(parallel.PARALLEL_MIN_BYTES) == 1
    assert len(calls) == 2  # a low reading is confirmed before giving up the split


def test_a_big_file_is_split_when_the_probe_finds_free_cores(monkeypatch):
    monkeypatch.delenv("SOFA_GUI_DECODE_PARTS", raising=False)
    monkeypatch.delenv("SOFA_GUI_PARALLEL_MIN_BYTES", raising=False)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    monkeypatch.setattr(parallel, "parallel_pays", lambda: True)
    assert parallel.decode_parts(parallel.PARALLEL_MIN_BYTES) == 2


def test_one_busy_moment_does_not_give_up_the_split(monkeypatch):
    readings = iter([1.0, 1.9])
    monkeypatch.setattr(cores, "parallel_gain", lambda: next(readings))
    assert cores.parallel_pays()


def test_forced_part_count_skips_the_probe(monkeypatch):
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "3")
    monkeypatch.setattr(parallel, "parallel_pays", lambda: (_ for _ in ()).throw(AssertionError))
    assert parallel.decode_parts(parallel.PARALLEL_MIN_BYTES) == 3
