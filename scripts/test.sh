#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (ctest). CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)"
