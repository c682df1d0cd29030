#!/usr/bin/env bash
# Installs the Debian 12 packages opforge needs, only those that are missing (idempotent).
# Everything that configure, build and the tests touch is here: a new machine needs nothing
# else (scripts/fresh-check.sh proves it in a debootstrapped Debian 12 root).
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --list   print the package list and exit
set -euo pipefail

packages=(
  # build; clang-14 also compiles dsl/table_lookup.c to the bitcode the 8-bit kernels link
  cmake ninja-build g++ binutils libhalide14-0-dev llvm-14-dev nlohmann-json3-dev clang-14
  # tests: doctest; clang-14 + libclang-rt-14-dev for the rule-parser fuzzer (libFuzzer);
  # pkgconf for the installed-package consumer test
  doctest-dev clang-14 libclang-rt-14-dev pkgconf
  # libomp-14-dev: clang-14's omp.h, for the ThreadSanitizer build of the runtime
  # (runtime/thread_pool.cpp includes it; GCC's omp.h is not on clang's path)
  libomp-14-dev
  # libdnnl-dev (oneDNN 2.6): the same-run peer of `opforge bench` for the NN ops (registry/cli/
  # peers); nothing else links it. Debian builds it with the OpenCL GPU runtime, so its CMake
  # config requires OpenCL, which libdnnl-dev only recommends: ocl-icd-opencl-dev and
  # opencl-headers. Without any of the three, configure drops the peer and says so.
  libdnnl-dev ocl-icd-opencl-dev opencl-headers
  # Debian's /usr/bin/python3 with numpy, torch (CPU) and pytest: .npy interop and torch
  # comparisons in the tests, scripts/bench_*.py; tests that need them say 'skipped' without.
  python3 python3-numpy python3-torch python3-pytest
  # OpenBLAS: Debian's torch calls the BLAS of the libblas.so.3 alternative, netlib's untuned
  # reference BLAS unless this registers its own (higher priority); the torch peers of the
  # bench scripts (torch.matmul, nn.Linear, MultiheadAttention) are then a tuned GEMM
  libopenblas0-pthread
)
case "${1:-}" in
  --list) printf '%s\n' "${packages[@]}"; exit 0 ;;
  --bench | "") ;;  # --bench: kept for old command lines; torch is in the base list now
  *) echo "setup: unknown option '$1' (expected --list)" >&2; exit 2 ;;
esac

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
"${sudo[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
