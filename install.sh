#!/usr/bin/env bash
# Installs everything the console and its tests need: a virtual environment in .venv with the runtime and
# test packages, and Debian's chromium for the real-browser test (playwright drives it; it never downloads
# a browser of its own).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  elif command -v sudo >/dev/null 2>&1; then
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    echo "warning: chromium is missing and cannot be installed without root; the browser test will fail" >&2
  fi
fi

python3 -m venv .venv
.venv/bin/pip install -r requirements-dev.txt
