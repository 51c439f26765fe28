#!/usr/bin/env bash
# test-install.sh BUILD_DIR — installs BUILD_DIR into a scratch prefix, then
# builds examples/embed against it twice, with find_package(spyglass) and
# with pkg-config, and runs both binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/spyglass/spyglass.h"
test -x "$prefix/bin/spyglass"
pc_dir=$(dirname "$(find "$prefix" -name spyglass.pc | head -n 1)")

# 1. CMake package
cmake -S examples/embed -B "$prefix/embed-cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/embed-cmake" >/dev/null
LD_LIBRARY_PATH="$(dirname "$pc_dir")" "$prefix/embed-cmake/embed" 3

# 2. pkg-config
cc -Wall -Wextra -Werror examples/embed/main.c -o "$prefix/embed-pc" \
  $(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs spyglass)
LD_LIBRARY_PATH="$(dirname "$pc_dir")" "$prefix/embed-pc" 3
"$prefix/bin/spyglass" --version
echo "install: find_package and pkg-config builds ran"
