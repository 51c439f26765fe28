#!/usr/bin/env bash
# web_buffers.sh TOOL WEB_HELPER NPM_CACHE BUILD_DIR — the buffer inspector in a
# real headless Chromium (Debian's chromium) driven by playwright-core from npm
# (installed once into NPM_CACHE), against a provider of known images
# (web_helper images), `spyglass demo --headless` and `spyglass serve`
# in a private runtime directory. Saves BUILD_DIR/web_buffers*.png.
set -euo pipefail
tool=$1
helper=$2
cache=$3
out=$(cd "$4" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/web_lib.sh"
web_playwright web_buffers "$cache"
web_rundir spy_webbuf
SPYGLASS_DIR=$rundir SPY_TOOL=$tool SPY_HELPER=$helper SPY_PW=$pw SPY_OUT=$out \
  timeout 110 "$node" "$here/web_buffers.mjs"
