#!/usr/bin/env bash
# web_zones.sh TOOL WEB_HELPER NPM_CACHE BUILD_DIR — the dashboard's CPU
# zones panel in headless Chromium (as test/web_browser.sh, whose
# playwright-core install in NPM_CACHE it shares) against `spyglass demo
# --headless` and a provider with a known zone sequence (web_helper
# zprovider), through a real `spyglass serve` in a private runtime dir,
# compared with a C consumer's spans (web_helper ztruth). First the page's
# zone state on golden ZONES frames (node). Saves BUILD_DIR/web_zones*.png.
set -euo pipefail
tool=$1
helper=$2
cache=$3
out=$(cd "$4" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/web_lib.sh"
web_playwright web_zones "$cache"
web_rundir spy_webz
mkdir "$rundir/golden"
"$helper" golden "$rundir/golden" >/dev/null
SPY_GOLDEN_DIR="$rundir/golden" SPY_HELPER=$helper "$node" --test "$here/web_zones_state.test.mjs"
SPYGLASS_DIR=$rundir SPY_TOOL=$tool SPY_HELPER=$helper SPY_PW=$pw SPY_OUT=$out \
  timeout 110 "$node" "$here/web_zones.mjs"
