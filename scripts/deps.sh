#!/usr/bin/env bash
# deps.sh — installs the Debian packages spyglass needs, only those missing.
# Usage: scripts/deps.sh [build|test|demo]   (default: test, the superset)
set -euo pipefail

want=(cmake make gcc clang pkg-config libclang-rt-14-dev
      libsqlite3-dev libpq-dev libncurses-dev libxxhash-dev libzstd-dev
      sqlite3 libjansson-dev libwslay-dev libssl-dev libvpx-dev libpng-dev)
case "${1:-test}" in
  test) want+=(tmux postgresql procps python3 clang-format git openssl chromium)
        want+=(vpx-tools pngcheck protobuf-compiler curl jq libjemalloc2)
        want+=(firefox-esr) ;;
  demo|build) ;;
  *) echo "deps.sh: unknown set '$1' (build, test or demo)" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# The trace tests install @rolldown/debug with npm. Any node + npm will do
# (e.g. nodesource's nodejs, which bundles npm); Debian's only if none.
if [ "${1:-test}" = test ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "spyglass: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "spyglass: run as root, or install them yourself: apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
