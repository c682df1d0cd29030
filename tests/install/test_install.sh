#!/usr/bin/env bash
# Installs the build into a temp prefix and uses it as a user would: the file set, headers
# that compile alone, the CLI, a CMake consumer (find_package) and a pkg-config consumer,
# each opening the installed registry and checking one Adam step against fp64, after the
# prefix has been moved (every installed path must be relative).
#   test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# A consumer sees only the prefix: no build-tree registry, no user overrides.
unset OPFORGE_REGISTRY OPFORGE_ISA

cmake --install "$build" --prefix "$tmp/first" >"$tmp/install.log" || {
  cat "$tmp/install.log"; fail "cmake --install"; }
mv "$tmp/first" "$tmp/p"  # the prefix moves
p=$(realpath "$tmp/p")
libdir=$(cd "$p" && ls -d lib*/ | head -1)
[[ -d $p/lib/x86_64-linux-gnu ]] && libdir=lib/x86_64-linux-gnu

for f in bin/opforge include/opforge/opforge.h include/opforge/runtime.hpp \
         include/opforge/descriptor.h include/opforge/version.h \
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
echo "install test: ok"
