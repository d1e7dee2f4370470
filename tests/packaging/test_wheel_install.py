"""The wheel carries the resources and an installed copy finds them (not the checkout's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")


def _listed_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["packages"]


def _source_packages() -> set[str]:
    """Every folder of sofa_gui/ holding Python modules, as a dotted package name."""
    out = set()
    for py in (ROOT / "sofa_gui").rglob("*.py"):
        rel = py.parent.relative_to(ROOT)
        if "__pycache__" not in rel.parts:
            out.add(".".join(rel.parts))
    return out


def test_every_subpackage_is_listed_in_pyproject():
    missing = _source_packages() - set(_listed_packages())
    assert not missing, (f"add {sorted(missing)} to [tool.setuptools] packages in "
                         "pyproject.toml, or the wheel will lack them")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the tree (so no build/ folder leaks in or out)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("sofa_gui", "resources"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp / "dist"), str(src)],
        capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = (tmp / "dist").glob("sofa_gui-*.whl")
    return whl


def test_wheel_contains_code_and_every_resource(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in (ROOT / "resources").rglob("*"):
        if f.is_file():
            assert "sofa_gui/_resources/" + f.relative_to(ROOT / "resources").as_posix() in names
    for f in (ROOT / "sofa_gui").rglob("*"):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
            assert f.relative_to(ROOT).as_posix() in names, f"{f} missing from the wheel"
    assert not any(n.startswith(("resources/", "tests/", "packaging/")) for n in names)


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, dict]:
    """The wheel installed with ``pip --target``; heavy deps come from this interpreter."""
    target = tmp_path_factory.mktemp("site")
    res = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONDONTWRITEBYTECODE": "1"}
    return target, env


def test_installed_copy_finds_its_own_resources(installed, tmp_path):
    target, env = installed
    code = ("import sofa_gui, sofa_gui.core.samples as s; "
            "print(sofa_gui.__file__); print(s.resources_dir()); print(s.demo_trace_path())")
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    pkg_file, res_dir, demo = res.stdout.split()
    assert Path(pkg_file).is_relative_to(target)  # not the checkout's package
    assert Path(res_dir) == target / "sofa_gui" / "_resources"
    assert Path(demo).is_file() and Path(demo).is_relative_to(target)


def test_installed_console_script_prints_version(installed, tmp_path):
    target, env = installed
    from sofa_gui import __version__

    res = subprocess.run([str(target / "bin" / "sofa-gui"), "--version"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"sofa-gui {__version__}"


@pytest.mark.slow
def test_installed_copy_analyzes_its_bundled_sample(installed, tmp_path):
    target, env = installed
    res = subprocess.run([str(target / "bin" / "sofa-gui"), "demo", "--headless"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    # The trace path printed is the installed sample's, not the checkout's.
    assert f"{target}/sofa_gui/_resources/samples/resnet50_num_workers_0" in res.stdout
