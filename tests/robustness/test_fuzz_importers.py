"""Hypothesis-driven mutation fuzzing of every importer (a few hundred cases in the suite).

Each case mutates a seed cut from a real trace (see fuzz_seeds / fuzz_mutators) and
must end in a loaded, consistent trace or a TraceFormatError with path and one-line
reason, within a deadline -- never another exception, never a hang.
``benchmarks/fuzz.py`` runs the same cases by the ten thousand.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings

import pytest
from fuzz_harness import run_case
from fuzz_mutators import make_case
from fuzz_seeds import build_seeds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sofa_gui.core.importers import IMPORTER_MODULES

IMPORTERS = [m.removeprefix("sofa_gui.core.importers.") for m in IMPORTER_MODULES]
CASES_PER_IMPORTER = 60
CASE_TIMEOUT_S = 20.0


@pytest.fixture(scope="session")
def seeds(tmp_path_factory):
    return build_seeds(tmp_path_factory.mktemp("fuzz-seeds"), full=False)


@pytest.mark.parametrize("importer", IMPORTERS)
def test_mutated_inputs_load_or_fail_cleanly(importer, seeds, tmp_path_factory):
    if importer not in seeds:
        pytest.skip(f"no seed trace for {importer} (importer absent or no sample)")
    work = tmp_path_factory.mktemp(f"fuzz-{importer}")
    failures = []

    @settings(max_examples=CASES_PER_IMPORTER, deadline=None, derandomize=True,
              database=None, suppress_health_check=list(HealthCheck))
    @given(rnd=st.randoms(use_true_random=False))
    def one_case(rnd):
        seed = rnd.choice(seeds[importer])
        case_dir = work / "case"
        shutil.rmtree(case_dir, ignore_errors=True)
        path, label = make_case(seed, case_dir, rnd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy overflow warnings on made-up garbage
            res = run_case(path, timeout_s=CASE_TIMEOUT_S)
        if not res.ok:
            failures.append(f"{seed.name} [{label}]: {res.outcome} {res.detail} @ {res.where}")
        assert res.ok, failures[-1]

    one_case()


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sofa_gui", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("name,content", [
    ("empty.json", b""),
    ("truncated.json.gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\x56"),
    ("garbage.json", b"\x00\xff\xfe{{{{"),
    ("notrace.json", b'{"traceEvents": 5}'),
])
def test_cli_bad_file_exits_2_with_one_line(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content)
    res = _cli("analyze", "--json", str(p), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}: "), res.stderr
    assert res.stdout == ""


def test_cli_empty_folder_exits_2_with_one_line(tmp_path):
    (tmp_path / "run").mkdir()
    res = _cli("analyze", str(tmp_path / "run"), cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
