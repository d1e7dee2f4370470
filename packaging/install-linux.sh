#!/usr/bin/env bash
# Install an unpacked sofa-gui bundle for the current user (or system-wide with --prefix):
# copies the folder to PREFIX/lib/sofa-gui, links PREFIX/bin/sofa-gui and sofa-gui-app, and
# registers the desktop entry, icons and AppStream metainfo. Run it from the bundle folder
# (it is shipped there as install.sh).
#
#   ./install.sh                 # PREFIX=~/.local
#   sudo ./install.sh --prefix /usr/local
#   ./install.sh --uninstall     # remove what an install put there
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
prefix="${HOME}/.local"
uninstall=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift ;;
    --uninstall) uninstall=1 ;;
    *) echo "usage: $0 [--prefix DIR] [--uninstall]" >&2; exit 2 ;;
  esac
  shift
done
app_id=io.github.sofa_gui.SofaGui
dest="$prefix/lib/sofa-gui"
share="$prefix/share"

files=("$prefix/bin/sofa-gui" "$prefix/bin/sofa-gui-app"
       "$share/applications/$app_id.desktop" "$share/metainfo/$app_id.metainfo.xml"
       "$share/icons/hicolor/scalable/apps/sofa-gui.svg")
for d in "$here"/share/icons/hicolor/*x*; do
  files+=("$share/icons/hicolor/$(basename "$d")/apps/sofa-gui.png")
done

if [ "$uninstall" = 1 ]; then
  rm -f "${files[@]}"
  rm -rf "$dest"
  echo "removed sofa-gui from $prefix"
  exit 0
fi

[ -x "$here/sofa-gui" ] || { echo "run this from an unpacked sofa-gui bundle" >&2; exit 2; }
if [ "$here" != "$dest" ]; then
  rm -rf "$dest"
  mkdir -p "$dest"
  cp -a "$here/." "$dest/"
fi
mkdir -p "$prefix/bin" "$share/applications" "$share/metainfo"
ln -sf "$dest/sofa-gui" "$prefix/bin/sofa-gui"
ln -sf "$dest/sofa-gui-app" "$prefix/bin/sofa-gui-app"
# Absolute Exec so the menu entry works even when PREFIX/bin is not on the session's PATH.
sed -e "s|^Exec=sofa-gui-app|Exec=$dest/sofa-gui-app|" -e "s|^TryExec=.*|TryExec=$dest/sofa-gui-app|" \
  "$here/share/applications/$app_id.desktop" > "$share/applications/$app_id.desktop"
cp "$here/share/metainfo/$app_id.metainfo.xml" "$share/metainfo/"
cp -r "$here/share/icons" "$share/"
command -v update-desktop-database >/dev/null && update-desktop-database -q "$share/applications" || true
command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$share/icons/hicolor" || true
echo "installed sofa-gui in $dest; run sofa-gui-app or pick SOFA GUI from the applications menu"
