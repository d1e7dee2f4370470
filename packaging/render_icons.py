"""Render ``resources/icons/sofa-gui.svg`` into the PNG sizes, ``.ico`` and ``.icns`` files.

The SVG is the only hand-made icon; everything else is derived here with Qt's own SVG
renderer, so re-running this after editing the SVG keeps every size in step:

    python packaging/render_icons.py          # rewrite resources/icons/*
    python packaging/render_icons.py --check  # exit 1 if a stored PNG is out of date

Windows ``.ico`` and macOS ``.icns`` are written as containers of PNG images (both formats
allow that), so no image library beyond Qt is needed.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parent.parent / "resources" / "icons"
SVG = ICONS / "sofa-gui.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# icns chunk type -> pixel size (PNG payloads; 'ic11'..'ic14' are the @2x variants).
ICNS_TYPES = (("icp4", 16), ("icp5", 32), ("icp6", 64), ("ic07", 128), ("ic08", 256),
              ("ic09", 512), ("ic11", 32), ("ic12", 64), ("ic13", 256), ("ic14", 512))


def png_path(size: int) -> Path:
    return ICONS / "png" / f"sofa-gui-{size}.png"


def render_png(size: int) -> bytes:
    """The SVG drawn at ``size`` x ``size`` pixels, as PNG bytes."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"cannot parse {SVG}")
    img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(Qt.GlobalColor.transparent)
    painter = QPainter(img)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    img.save(buf, "PNG")
    buf.close()
    return bytes(data)


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """A Windows .ico holding PNG images (ICONDIR + ICONDIRENTRY per image)."""
    sizes = [s for s in ICO_SIZES if s in pngs]
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    entries, blobs = b"", b""
    for s in sizes:
        blob = pngs[s]
        dim = 0 if s >= 256 else s  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(blob), offset)
        blobs += blob
        offset += len(blob)
    return header + entries + blobs


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """A macOS .icns: 'icns' + length, then (type, length, PNG) chunks."""
    body = b"".join(t.encode() + struct.pack(">I", 8 + len(pngs[s])) + pngs[s]
                    for t, s in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def _image(png: bytes):
    from PySide6.QtGui import QImage

    img = QImage()
    img.loadFromData(png, "PNG")
    return img.convertToFormat(QImage.Format.Format_ARGB32)


def same_pixels(a: bytes, b: bytes, tolerance: int = 8) -> bool:
    """True when two PNGs decode to the same size and every channel is within ``tolerance``."""
    ia, ib = _image(a), _image(b)
    if ia.size() != ib.size():
        return False
    for y in range(ia.height()):
        for x in range(ia.width()):
            pa, pb = ia.pixel(x, y), ib.pixel(x, y)
            if any(abs(((pa >> k) & 255) - ((pb >> k) & 255)) > tolerance
                   for k in (0, 8, 16, 24)):
                return False
    return True


def _app():
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.instance() or QGuiApplication([])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare the stored PNGs")
    args = ap.parse_args(argv)
    app = _app()  # noqa: F841 -- QImage/QSvgRenderer need an application object
    pngs = {s: render_png(s) for s in PNG_SIZES}
    if args.check:
        stale = [s for s in PNG_SIZES if not png_path(s).is_file()
                 or not same_pixels(png_path(s).read_bytes(), pngs[s])]
        if stale:
            print(f"out of date: {stale}; run python packaging/render_icons.py", file=sys.stderr)
            return 1
        print("icons up to date")
        return 0
    png_path(PNG_SIZES[0]).parent.mkdir(parents=True, exist_ok=True)
    for s, blob in pngs.items():
        png_path(s).write_bytes(blob)
    (ICONS / "sofa-gui.ico").write_bytes(ico_bytes(pngs))
    (ICONS / "sofa-gui.icns").write_bytes(icns_bytes(pngs))
    print(f"wrote {len(pngs)} PNGs, sofa-gui.ico and sofa-gui.icns under {ICONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
