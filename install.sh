#!/usr/bin/env bash
# Installs everything the console and its tests need: a virtual environment in .venv with the runtime and
# test packages, and Debian's chromium for the real-browser test (playwright drives it; it never downloads
# a browser of its own).
set -euo pipefail
cd "$(dirname "$0")"

# chromium for the browser test; CJK and emoji fonts so its screenshots show Chinese text and icons.
APT_PACKAGES="chromium fonts-noto-cjk fonts-noto-color-emoji"
missing=""
for package in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing="$missing $package"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" = none ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: cannot install$missing here (needs apt and root); the browser test needs chromium" >&2
  else
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
  fi
fi

python3 -m venv .venv
.venv/bin/pip install -r requirements-dev.txt
