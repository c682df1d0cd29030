#!/usr/bin/env bash
# The main job: set up, build, and regenerate the op library into the default registry
# (build/oplib) through the compile cache (the build's `oplib` target: every op and the rule
# files in generators/rules/), then print what it holds. Extra arguments run one more
# `opforge build` with them (e.g. --explain, --only apply_adam).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
if [[ $# -gt 0 ]]; then
  build/registry/cli/opforge build --rules generators/rules "$@"
fi
echo
build/registry/cli/opforge list
