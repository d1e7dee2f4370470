#!/usr/bin/env bash
# Build the one-folder desktop bundle dist/sofa-gui/ (Linux; macOS works the same way, see
# packaging/README.md) and smoke-test it.
#
#   bash packaging/build.sh [--archive] [--python PY] [--dist DIR] [--work DIR]
#
# --archive   also write DIST/sofa-gui-VERSION-linux-ARCH.tar.gz
# --dist      where the bundle folder goes (default: dist); --work: PyInstaller's scratch
#             folder (default: build/pyinstaller)
# --python    the interpreter whose installed packages are frozen (default: python3); it needs
#             the project's dependencies (pip install -e .); PyInstaller is installed if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
ARCHIVE=0
DIST=dist
WORK=build/pyinstaller
while [ $# -gt 0 ]; do
  case "$1" in
    --archive) ARCHIVE=1 ;;
    --python) PY="$2"; shift ;;
    --dist) DIST="$2"; shift ;;
    --work) WORK="$2"; shift ;;
    *) echo "usage: $0 [--archive] [--python PY] [--dist DIR] [--work DIR]" >&2; exit 2 ;;
  esac
  shift
done

"$PY" -c "import PyInstaller" 2>/dev/null || "$PY" -m pip install -q "pyinstaller>=6.10,<7"
"$PY" -c "import numpy, pyarrow, PySide6, pyqtgraph, msgspec" \
  || { echo "install the project's dependencies first: $PY -m pip install -e ." >&2; exit 2; }

start=$(date +%s)
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath "$DIST" --workpath "$WORK" packaging/sofa-gui.spec
out="$DIST/sofa-gui"

# Desktop integration files beside the executables, and the script that installs them.
mkdir -p "$out/share/applications" "$out/share/metainfo"
cp resources/io.github.sofa_gui.SofaGui.desktop "$out/share/applications/"
cp resources/io.github.sofa_gui.SofaGui.metainfo.xml "$out/share/metainfo/"
for png in resources/icons/png/sofa-gui-*.png; do
  n=$(basename "$png" .png); n=${n#sofa-gui-}
  mkdir -p "$out/share/icons/hicolor/${n}x${n}/apps"
  cp "$png" "$out/share/icons/hicolor/${n}x${n}/apps/sofa-gui.png"
done
mkdir -p "$out/share/icons/hicolor/scalable/apps"
cp resources/icons/sofa-gui.svg "$out/share/icons/hicolor/scalable/apps/sofa-gui.svg"
cp packaging/install-linux.sh "$out/install.sh"
chmod +x "$out/install.sh"

"$out/sofa-gui" --version
echo "built $out in $(( $(date +%s) - start )) s, $(du -sh "$out" | cut -f1)"

if [ "$ARCHIVE" = 1 ]; then
  version=$("$out/sofa-gui" --version | awk '{print $2}')
  tarball="$DIST/sofa-gui-${version}-$(uname -s | tr A-Z a-z)-$(uname -m).tar.gz"
  tar -C "$DIST" -czf "$tarball" sofa-gui
  echo "wrote $tarball ($(du -h "$tarball" | cut -f1))"
fi
