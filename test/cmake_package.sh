#!/usr/bin/env bash
# find_package(sluice) from outside: install this build tree into a fresh
# prefix, configure test/cmake_package against it, build a program with
# each target (sluice::sluice, sluice::static) and run both.
set -u
BUILD=${1:?the build tree}
SRC=$(cd "$(dirname "$0")/cmake_package" && pwd)
. "$(dirname "$0")/harness.sh"
WORK=$W
step() { # name command...
  local name=$1; shift
  if "$@" >"$WORK/log" 2>&1; then ok "$name"; else bad "$name"; tail -20 "$WORK/log"; fi
}
step install cmake --install "$BUILD" --prefix "$WORK/prefix"
step config-installed bash -c "find '$WORK/prefix' -name sluiceConfig.cmake | grep -q ."
step configure cmake -S "$SRC" -B "$WORK/b" -DCMAKE_PREFIX_PATH="$WORK/prefix"
step build cmake --build "$WORK/b"
step run-shared "$WORK/b/with_shared"
step run-static "$WORK/b/with_static"
# the shared program loads the installed library, not the build tree's
step rpath-installed bash -c "ldd '$WORK/b/with_shared' | grep -q '$WORK/prefix/.*libsluice.so'"
finish cmake_package
