#!/usr/bin/env bash
# web_build.sh TOOL NPM_CACHE BUILD_DIR — the dashboard's live build view
# in headless Chromium (playwright-core from npm, as web_browser.sh) against
# a traced `spyglass demo build` through a real `spyglass serve`, in a
# private runtime directory. Saves BUILD_DIR/web_build.png.
set -euo pipefail
tool=$1
cache=$2
out=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/web_lib.sh"
web_playwright web_build "$cache"
. "$here/trace_lib.sh"
work=$(mktemp -d /tmp/spy-web-build-XXXXXX)
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT
mkdir -m 700 "$work/run"
gen_tree "$work/src" 6 20
SPYGLASS_DIR=$work/run SPY_TOOL=$tool SPY_PW=$pw SPY_OUT=$out SPY_WORK=$work \
  timeout 170 "$node" "$here/web_build.mjs"
