#!/usr/bin/env bash
# web_browser.sh TOOL WEB_HELPER NPM_CACHE BUILD_DIR — the dashboard in a
# real headless Chromium (Debian's chromium, scripts/deps.sh) driven by
# playwright-core from npm (installed once into NPM_CACHE), against
# `spyglass demo --headless`, deterministic providers and `spyglass serve`
# in a private runtime directory. Saves BUILD_DIR/web_dashboard.png.
set -euo pipefail
tool=$1
helper=$2
cache=$3
out=$(cd "$4" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/web_lib.sh"
web_playwright web_browser "$cache"
web_rundir spy_web
SPYGLASS_DIR=$rundir SPY_TOOL=$tool SPY_HELPER=$helper SPY_PW=$pw SPY_OUT=$out \
  timeout 170 "$node" "$here/web_browser.mjs"
