"""Build the PyInstaller one-folder bundle and check the built app works on its own.

Takes about a minute (mostly PyInstaller); runs only with SOFA_GUI_TEST_PACKAGING=1
(CI sets it). The bundle is built into a temp folder, never into the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "_internal/sofa_gui/_resources/samples/resnet50_num_workers_0.pt.trace.json.gz"

pytestmark = [
    pytest.mark.packaging,
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("SOFA_GUI_TEST_PACKAGING") != "1",
                       reason="set SOFA_GUI_TEST_PACKAGING=1 to build the desktop bundle"),
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle")
    res = subprocess.run(
        ["bash", str(ROOT / "packaging" / "build.sh"), "--python", sys.executable,
         "--dist", str(out / "dist"), "--work", str(out / "work")],
        capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    return out / "dist" / "sofa-gui"


def _env(tmp_path: Path) -> dict:
    # The bundle must not lean on the checkout or this interpreter's packages.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(QT_QPA_PLATFORM="offscreen", SOFA_GUI_CACHE_DIR=str(tmp_path / "cache"),
               SOFA_GUI_SETTINGS=str(tmp_path / "settings.ini"))
    return env


def _run(exe: Path, *args, tmp_path: Path, timeout=600):
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path, env=_env(tmp_path))


def test_bundle_prints_its_version(bundle, tmp_path):
    from sofa_gui import __version__

    res = _run(bundle / "sofa-gui", "--version", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"sofa-gui {__version__}"


def test_bundle_analyzes_its_bundled_sample(bundle, tmp_path):
    res = _run(bundle / "sofa-gui", "analyze", "--json", str(bundle / SAMPLE), tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["trace"]["events"] > 50_000
    assert len(doc["iterations"]["items"]) >= 5
    res = _run(bundle / "sofa-gui", "demo", "--headless", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert str(bundle / SAMPLE) in res.stdout  # the bundle's own copy of the sample


def test_bundle_answers_sql_and_call_trees(bundle, tmp_path):
    """DuckDB (and what it loads at run time) and the call tree are in the bundle."""
    sample = str(bundle / SAMPLE)
    res = _run(bundle / "sofa-gui", "sql", sample, "SELECT count(*) AS n FROM slices", "--json",
               tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["rows"][0][0] > 40_000
    res = _run(bundle / "sofa-gui", "sql", sample, "COPY slices TO 'x.csv'", tmp_path=tmp_path)
    assert res.returncode == 2 and "refused" in res.stderr
    res = _run(bundle / "sofa-gui", "calltree", sample, "--iteration", "2", "--json",
               tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["root"]["total_us"] > 0


def test_bundle_reports_bad_input_in_one_line(bundle, tmp_path):
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    res = _run(bundle / "sofa-gui", "analyze", str(bad), tmp_path=tmp_path)
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error: ")


@pytest.mark.parametrize("exe", ["sofa-gui", "sofa-gui-app"])
def test_bundle_renders_a_screenshot_headlessly(bundle, tmp_path, exe, qapp):
    from PySide6.QtGui import QImage

    shot = tmp_path / "shot.png"
    res = _run(bundle / exe, "demo", "--screenshot", str(shot), "--size", "1280x800",
               tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    img = QImage(str(shot))
    assert (img.width(), img.height()) == (1280, 800)
    colors = {img.pixel(x, y) for x in range(0, 1280, 16) for y in range(0, 800, 16)}
    assert len(colors) > 20  # a drawn window, not a blank frame


def test_bundle_leaves_out_development_packages(bundle):
    internal = bundle / "_internal"
    for name in ("pytest", "hypothesis", "torch", "scipy", "IPython", "PyInstaller"):
        assert not (internal / name).exists(), name


def test_bundle_installs_and_uninstalls_for_a_user(bundle, tmp_path):
    prefix = tmp_path / "prefix"
    res = subprocess.run(["bash", str(bundle / "install.sh"), "--prefix", str(prefix)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    desktop = prefix / "share" / "applications" / "io.github.sofa_gui.SofaGui.desktop"
    assert f"Exec={prefix}/lib/sofa-gui/sofa-gui-app %f" in desktop.read_text()
    assert (prefix / "share" / "icons" / "hicolor" / "256x256" / "apps" / "sofa-gui.png").is_file()
    ver = _run(prefix / "bin" / "sofa-gui", "--version", tmp_path=tmp_path)
    assert ver.returncode == 0, ver.stderr
    res = subprocess.run(["bash", str(bundle / "install.sh"), "--prefix", str(prefix),
                          "--uninstall"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and not desktop.exists()
    assert not (prefix / "lib" / "sofa-gui").exists() and not (prefix / "bin" / "sofa-gui").exists()


def test_bundle_records_a_command_and_opens_the_recording(bundle, tmp_path):
    shim = bundle / "_internal" / "sofa_gui" / "recorder" / "torch_shim" / "sitecustomize.py"
    assert shim.is_file()  # the child's Python imports it from disk, not from the bundle
    rec = tmp_path / "rec"
    res = _run(bundle / "sofa-gui", "record", "-o", str(rec), "--interval", "0.05", "--",
               "/bin/sh", "-c", "sleep 0.5", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    res = _run(bundle / "sofa-gui", "analyze", "--json", str(rec), tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["trace"]["counter_samples"] > 0
