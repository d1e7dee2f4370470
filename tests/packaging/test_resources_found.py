"""The resources a desktop install needs exist, are valid, and are found from a checkout."""

from __future__ import annotations

import configparser
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sofa_gui.core.samples import demo_trace_path, resource_path, resources_dir

ROOT = Path(__file__).resolve().parents[2]
APP_ID = "io.github.sofa_gui.SofaGui"
sys.path.insert(0, str(ROOT / "packaging"))
import render_icons  # noqa: E402


def test_checkout_resources_are_found():
    # In a checkout (plain or editable install) the helper resolves to the top-level folder.
    assert resources_dir() == ROOT / "resources"
    assert demo_trace_path().is_file()
    assert resource_path("icons", "sofa-gui.svg").is_file()


def test_desktop_entry_names_the_app_and_icon():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(resource_path(f"{APP_ID}.desktop"))
    d = entry["Desktop Entry"]
    assert d["Type"] == "Application"
    assert d["Exec"].split()[0] == "sofa-gui-app"
    assert d["Icon"] == "sofa-gui"
    assert "Development" in d["Categories"].split(";")


def test_metainfo_matches_desktop_entry():
    root = ET.parse(resource_path(f"{APP_ID}.metainfo.xml")).getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == f"{APP_ID}.desktop"
    binaries = {b.text for b in root.iter("binary")}
    assert binaries == {"sofa-gui", "sofa-gui-app"}
    from sofa_gui import __version__

    assert __version__ in {r.get("version") for r in root.iter("release")}


@pytest.mark.parametrize("tool,args,name", [
    ("desktop-file-validate", [], f"{APP_ID}.desktop"),
    ("appstreamcli", ["validate", "--no-net"], f"{APP_ID}.metainfo.xml"),
])
def test_freedesktop_validators_accept_the_files(tool, args, name):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed")
    res = subprocess.run([tool, *args, str(resource_path(name))], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_png_icons_are_rendered_from_the_svg(qapp):
    for size in (16, 48, 256):
        stored = render_icons.png_path(size).read_bytes()
        assert render_icons.same_pixels(stored, render_icons.render_png(size)), size


def test_same_pixels_sees_a_changed_icon(qapp):
    assert not render_icons.same_pixels(render_icons.render_png(16),
                                        render_icons.png_path(32).read_bytes())


def test_ico_and_icns_hold_every_size():
    ico = (render_icons.ICONS / "sofa-gui.ico").read_bytes()
    reserved, kind, count = struct.unpack_from("<HHH", ico)
    assert (reserved, kind, count) == (0, 1, len(render_icons.ICO_SIZES))
    for i in range(count):
        _, _, _, _, _, _, size, offset = struct.unpack_from("<BBBBHHII", ico, 6 + 16 * i)
        assert ico[offset:offset + 8] == b"\x89PNG\r\n\x1a\n" and offset + size <= len(ico)
    icns = (render_icons.ICONS / "sofa-gui.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack_from(">I", icns, 4)[0] == len(icns)
    pos, types = 8, []
    while pos < len(icns):
        kind, length = icns[pos:pos + 4].decode(), struct.unpack_from(">I", icns, pos + 4)[0]
        assert icns[pos + 8:pos + 16] == b"\x89PNG\r\n\x1a\n"
        types.append(kind)
        pos += length
    assert pos == len(icns) and types == [t for t, _ in render_icons.ICNS_TYPES]


def test_render_icons_check_mode_passes_on_the_committed_files():
    res = subprocess.run([sys.executable, str(ROOT / "packaging" / "render_icons.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
