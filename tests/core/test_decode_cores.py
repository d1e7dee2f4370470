"""How many decode processes an open uses: one per usable core, the cgroup's CPU quota
capping the affinity mask."""

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


def test_a_big_file_is_split_over_the_usable_cores(monkeypatch):
    monkeypatch.delenv("SOFA_GUI_DECODE_PARTS", raising=False)
    monkeypatch.delenv("SOFA_GUI_PARALLEL_MIN_BYTES", raising=False)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    assert parallel.decode_parts(parallel.PARALLEL_MIN_BYTES) == 2
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 1)
    assert parallel.decode_parts(parallel.PARALLEL_MIN_BYTES) == 1


def test_a_forced_part_count_wins(monkeypatch):
    monkeypatch.setenv("SOFA_GUI_DECODE_PARTS", "3")
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 1)
    assert parallel.decode_parts(parallel.PARALLEL_MIN_BYTES) == 3
