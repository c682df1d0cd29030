#!/usr/bin/env bash
# A missing optional peer drops its bench column; it never fails configure. Debian's oneDNN
# config requires OpenCL: configure with OpenCL hidden must succeed and say why oneDNN is out.
#   test_configure_peers.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake -S "$src" -B "$tmp/b" -G Ninja -DBUILD_TESTING=OFF -DOPFORGE_BUILD_OPLIB=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_OpenCL=ON >"$tmp/log" 2>&1 || {
  cat "$tmp/log"; echo "FAIL: configure without OpenCL" >&2; exit 1; }
grep -q "needs OpenCL.*without its oneDNN peer column" "$tmp/log" || {
  cat "$tmp/log"; echo "FAIL: configure without OpenCL did not report the dropped peer" >&2; exit 1; }
grep "without its oneDNN peer column" "$tmp/log"
echo "configure without OpenCL: ok"
