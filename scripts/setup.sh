#!/usr/bin/env bash
# Installs the Debian 12 packages opforge needs, only those that are missing (idempotent).
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --bench  also numpy and torch for scripts/bench_torch.py and bench_nn_torch.py
set -euo pipefail

# libdnnl-dev (oneDNN 2.6): the same-run peer of `opforge bench` for the NN ops (registry/cli/
# peers); nothing else links it. In the base list so that CI compiles the peer code.
packages=(cmake ninja-build g++ binutils libhalide14-0-dev llvm-14-dev nlohmann-json3-dev doctest-dev clang-14 libclang-rt-14-dev libdnnl-dev ocl-icd-opencl-dev opencl-headers)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-numpy python3-torch)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
