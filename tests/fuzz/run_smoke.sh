#!/usr/bin/env bash
# Fuzz smoke test: runs the libFuzzer target FUZZER for a bounded time on a scratch copy of the
# seed corpus in CORPUS_DIRS, colon-separated (libFuzzer adds inputs to its corpus directory,
# so the source tree is never handed to it). Extra arguments are passed to the fuzzer.
#   run_smoke.sh FUZZER CORPUS_DIR[:CORPUS_DIR...] [libFuzzer flags...]
# Exits with the fuzzer's exit status (0: nothing found).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 FUZZER CORPUS_DIR[:CORPUS_DIR...] [libFuzzer flags...]" >&2
  exit 2
fi
fuzzer=$1
seeds=$2
shift 2

work=$(mktemp -d "${TMPDIR:-/tmp}/opforge-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
IFS=: read -r -a seed_dirs <<<"$seeds"
for d in "${seed_dirs[@]}"; do
  cp "$d"/* "$work/corpus/"
done

rc=0
"$fuzzer" -max_total_time=20 -rss_limit_mb=2048 -timeout=5 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" || rc=$?

# A crash input would be lost with the scratch dir: print it (hex) before it goes.
for f in "$work"/artifacts/*; do
  [[ -e $f ]] || continue
  echo "run_smoke: fuzzer artifact $(basename "$f"):" >&2
  od -An -c "$f" >&2
done
exit "$rc"
