"""packaging/debian-deps.sh: installs only what is missing, counts Ubuntu 24.04's renamed
(``t64``) libraries as present, and fails with one line.

The script runs against stand-ins for dpkg-query, apt-get, id and python3 on PATH: each
records how it was called, and dpkg-query answers from a list of installed packages.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "packaging" / "debian-deps.sh"
STANDINS = {
    # dpkg-query -W -f=FORMAT NAME...: a status line per installed name, exit 1 if any is not
    "dpkg-query": """
        shift 2; rc=0
        for n in "$@"; do
          if grep -qx -- "$n" "$FAKE/installed"; then echo "install ok installed"
          else echo "dpkg-query: no packages found matching $n" >&2; rc=1; fi
        done
        exit $rc""",
    "apt-get": 'echo "apt-get $*" >> "$FAKE/calls"; exit "${FAKE_APT_RC:-0}"',
    "id": 'echo "${FAKE_UID:-0}"',
    "python3": "exit 0",  # ensurepip is there: no python3-venv needed
}


def _packages() -> list[str]:
    text = SCRIPT.read_text()
    return re.search(r"pkgs=\(([^)]*)\)", text).group(1).split()


@pytest.fixture
def fake(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STANDINS.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    for tool in ("bash", "grep"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (tmp_path / "installed").write_text("")
    return tmp_path


def _run(fake: Path, installed: list[str], **env) -> subprocess.CompletedProcess:
    (fake / "installed").write_text("".join(f"{p}\n" for p in installed))
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(fake / "bin"), "FAKE": str(fake), **env})


def _apt_calls(fake: Path) -> list[str]:
    calls = fake / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_nothing_missing_is_a_no_op(fake):
    proc = _run(fake, _packages())
    assert proc.returncode == 0, proc.stderr
    assert _apt_calls(fake) == []


def test_a_library_under_its_64_bit_time_name_counts_as_present(fake):
    renamed = [p + "t64" if p == "libglib2.0-0" else p for p in _packages()]
    proc = _run(fake, renamed)
    assert proc.returncode == 0, proc.stderr
    assert _apt_calls(fake) == []


def test_only_the_missing_packages_are_installed(fake):
    proc = _run(fake, [p for p in _packages() if p not in ("xvfb", "libxcb-cursor0")])
    assert proc.returncode == 0, proc.stderr
    install = [c for c in _apt_calls(fake) if " install " in c]
    assert len(install) == 1 and install[0].endswith("libxcb-cursor0 xvfb")
    assert "DPkg::Lock::Timeout=300" in install[0]


def test_a_failed_install_says_what_to_do_in_one_line(fake):
    proc = _run(fake, [], FAKE_APT_RC="100")
    assert proc.returncode == 1
    err = proc.stderr.strip()
    assert "\n" not in err and err.startswith("debian-deps: could not install libgl1 ")
    assert "run this script again" in err


def test_without_root_or_sudo_it_names_what_to_install(fake):
    proc = _run(fake, [p for p in _packages() if p != "xauth"], FAKE_UID="1000")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "debian-deps: run as root to install: xauth"
    assert _apt_calls(fake) == []

