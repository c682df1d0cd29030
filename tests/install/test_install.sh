#!/usr/bin/env bash
# Installs the build into a temp prefix and uses it as a user would: the file set, headers
# that compile alone, the CLI, a CMake consumer (find_package), a pkg-config consumer and the
# Python package, each opening the installed registry and checking one Adam step against fp64,
# after the prefix has been moved (every installed path must be relative).
#   test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# A consumer sees only the prefix: no build-tree registry, no user overrides.
unset OPFORGE_REGISTRY OPFORGE_ISA OPFORGE_LIBRARY PYTHONPATH

cmake --install "$build" --prefix "$tmp/first" >"$tmp/install.log" || {
  cat "$tmp/install.log"; fail "cmake --install"; }
mv "$tmp/first" "$tmp/p"  # the prefix moves
p=$(realpath "$tmp/p")
libdir=$(cd "$p" && ls -d lib*/ | head -1)
[[ -d $p/lib/x86_64-linux-gnu ]] && libdir=lib/x86_64-linux-gnu

for f in bin/opforge include/opforge/opforge.h include/opforge/runtime.hpp \
         include/opforge/descriptor.h include/opforge/version.h include/opforge/npy.hpp \
         include/opforge/suggest.hpp \
         "$libdir"/cmake/opforge/opforgeConfig.cmake \
         "$libdir"/cmake/opforge/opforgeConfigVersion.cmake \
         "$libdir"/cmake/opforge/opforgeTargets.cmake "$libdir"/pkgconfig/opforge.pc \
         share/opforge/registry/index.json; do
  [[ -e $p/$f ]] || fail "not installed: $f"
done
# The library with VERSION and SOVERSION: real file, soname link, dev link.
real=$(cd "$p/$libdir" && ls libopforge_runtime.so.*.*.*) || fail "no libopforge_runtime.so.X.Y.Z"
soname=$(objdump -p "$p/$libdir/$real" | awk '/SONAME/ {print $2}')
[[ -L $p/$libdir/$soname && -L $p/$libdir/libopforge_runtime.so ]] ||
  fail "missing soname link $soname or libopforge_runtime.so"
echo "installed: $real (soname $soname)"

# Every public header compiles on its own against the prefix alone (no source tree); the C
# ABI headers also as C.
for h in "$p"/include/opforge/*; do
  name=include/opforge/${h##*/}
  case $h in
    */opforge.h | */version.h) echo "#include <opforge/${h##*/}>" | cc -x c -std=c11 -fsyntax-only -I"$p/include" - ||
           fail "$name does not compile alone as C" ;;
  esac
  echo "#include <opforge/${h##*/}>" | c++ -x c++ -std=c++17 -fsyntax-only -I"$p/include" - ||
    fail "$name does not compile alone as C++"
done
grep -rn '#include "registry/\|#include "runtime/\|#include "dsl/' "$p/include" &&
  fail "an installed header includes a source-tree path"

# The CLI: version, and the registry installed beside it found without being told.
"$p/bin/opforge" --version >"$tmp/version.txt"
grep -q "^registry $p/share/opforge/registry\$" "$tmp/version.txt" ||
  { cat "$tmp/version.txt"; fail "opforge --version does not name the installed registry"; }
"$p/bin/opforge" list >"$tmp/list.txt" || fail "installed opforge list"
grep -q apply_adam "$tmp/list.txt" || fail "installed opforge list lacks apply_adam"

# A CMake consumer.
cmake -S "$src/tests/install/consumer_cmake" -B "$tmp/c1" -G Ninja -DCMAKE_PREFIX_PATH="$p" \
  >"$tmp/c1.log" 2>&1 || { cat "$tmp/c1.log"; fail "consumer_cmake configure"; }
cmake --build "$tmp/c1" >>"$tmp/c1.log" 2>&1 || { cat "$tmp/c1.log"; fail "consumer_cmake build"; }
"$tmp/c1/consumer" || fail "consumer_cmake run"

# A pkg-config consumer (C, through the C ABI).
export PKG_CONFIG_PATH=$p/$libdir/pkgconfig
[[ $(pkg-config --modversion opforge) == "$(sed -n 's/^opforge //p' "$tmp/version.txt")" ]] ||
  fail "pkg-config version differs from opforge --version"
cc -std=c11 -O2 "$src/tests/install/consumer_pkgconfig/main.c" -I"$src/tests/install" \
  $(pkg-config --cflags --libs opforge) -lm -Wl,-rpath,"$(pkg-config --variable=libdir opforge)" \
  -o "$tmp/c2" || fail "consumer_pkgconfig build"
"$tmp/c2" || fail "consumer_pkgconfig run"

# The Python package, installed beside the library: imported from the moved prefix, it finds
# the library and the registry by itself and runs one Adam step against fp64 (NumPy).
pydir=$p/${libdir%/}/python3/dist-packages
[[ -f $pydir/opforge/__init__.py && -f $pydir/opforge/_install_paths.py ]] ||
  fail "not installed: ${libdir%/}/python3/dist-packages/opforge"
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  (cd "$tmp" && PYTHONPATH=$pydir OPFORGE_USER_REGISTRY=$tmp/user-registry \
    OPFORGE_CACHE_DIR=$build/test-cache /usr/bin/python3 - "$p") <<'EOF' || fail "installed Python package"
import os
import sys

import numpy as np

import opforge

prefix = os.path.realpath(sys.argv[1])
assert os.path.realpath(opforge.__file__).startswith(prefix + "/"), opforge.__file__
assert os.path.realpath(opforge.library_path()).startswith(prefix + "/"), opforge.library_path()
registry = os.path.join(prefix, "share", "opforge", "registry")
assert os.path.realpath(opforge.default_registry()) == os.path.realpath(registry), \
    opforge.default_registry()
rng = np.random.default_rng(3)
n, t, lr, b1, b2, eps = 1001, 4, 1e-2, 0.9, 0.999, 1e-8
var, m, g = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
v = rng.random(n).astype(np.float32)
# TensorFlow ApplyAdam in fp64 on the same fp32 inputs.
m64 = b1 * m + (1 - b1) * g.astype(np.float64)
v64 = b2 * v + (1 - b2) * g.astype(np.float64) ** 2
ref = var - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m64 / (np.sqrt(v64) + eps)
with opforge.open() as reg:
    reg.select("apply_adam")(var=var, m=m, v=v, grad=g, lr=lr, beta1=b1, beta2=b2,
                             epsilon=eps, beta1_power=b1 ** t, beta2_power=b2 ** t)
err = np.max(np.abs(var - ref) / (1e-6 + 1e-5 * np.abs(ref)))
assert err <= 1, f"Adam step off by {err} x tolerance"
print(f"python package: {opforge.library_path()}, Adam step within {err:.2g} x tolerance")
# A rule built on the fly by the installed opforge command.
from opforge.rules import cli_path
assert os.path.realpath(cli_path()) == os.path.join(prefix, "bin", "opforge"), cli_path()
op = opforge.rule("""optimizer installed_sign
  state var
  input grad
  hyper lr = 0.5
  var = var - lr * sign(grad)
""")
x, g = np.array([1, 2, 3], np.float32), np.array([-1, 0, 4], np.float32)
op(var=x, grad=g, lr=0.5)
assert x.tolist() == [1.5, 2.0, 2.5], x
print(f"python package: rule built by {cli_path()}")
EOF
else
  echo "install test: /usr/bin/python3 lacks numpy, the Python package check is skipped"
fi
echo "install test: ok"
