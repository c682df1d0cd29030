#!/usr/bin/env bash
# The main job: set up, build, regenerate the op library into the default registry
# (build/oplib) through the compile cache, and print what it built.
# Extra arguments go to `opforge build` (e.g. --explain, --only apply_adam).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/registry/cli/opforge build "$@"
echo
build/registry/cli/opforge list
