#!/usr/bin/env bash
# Debian/Ubuntu packages the app needs: the system libraries Qt loads (offscreen and a real
# X11 window), Xvfb, and Python's venv and pip (Debian ships them apart from python3).
# Usage: bash packaging/debian-deps.sh   (as root or with sudo; a no-op when all are present)
set -euo pipefail
pkgs=(libgl1 libegl1 libx11-6 libdbus-1-3 libfontconfig1 libfreetype6 libglib2.0-0 libxkbcommon0
      libx11-xcb1 libxcb1 libxcb-cursor0 libxcb-glx0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1
      libxcb-randr0 libxcb-render0 libxcb-render-util0 libxcb-shape0 libxcb-shm0 libxcb-sync1
      libxcb-util1 libxcb-xfixes0 libxcb-xkb1 libxkbcommon-x11-0 xvfb xauth)
# `python3 -m venv` needs ensurepip, which Debian packages as python3-venv (only for the
# system Python; a Python of one's own, from pyenv or conda, brings its own).
if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  pkgs+=(python3-venv python3-pip)
fi
# Ubuntu 24.04 and Debian 13 renamed some libraries for 64-bit time (libglib2.0-0 is
# libglib2.0-0t64 there; apt installs it for the old name): either name counts as present.
installed() {
  [[ "$(dpkg-query -W -f='${Status}\n' "$1" "$1t64" 2>/dev/null)" == *"install ok installed"* ]]
}
missing=()
for p in "${pkgs[@]}"; do
  installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "debian-deps: run as root to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
# Another apt job (unattended-upgrades on a fresh machine) may hold the dpkg lock: wait for
# it up to five minutes instead of failing on apt's raw lock error.
apt_opts=(-o DPkg::Lock::Timeout=300 -qq)
if ! $SUDO apt-get "${apt_opts[@]}" update || ! DEBIAN_FRONTEND=noninteractive \
    $SUDO apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"; then
  echo "debian-deps: could not install ${missing[*]}; if another package manager is running" \
       "(a software update), wait for it to finish and run this script again" >&2
  exit 1
fi
