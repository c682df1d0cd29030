#!/usr/bin/env bash
# The main job: set up, build, regenerate the op library into the default registry
# (build/oplib) through the compile cache, and print what it built.
# Rule files in generators/rules/ are part of the library. Extra arguments go to
# `opforge build` (e.g. --explain, --only apply_adam).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/registry/cli/opforge build --rules generators/rules "$@"
echo
build/registry/cli/opforge list
