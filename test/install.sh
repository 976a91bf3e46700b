#!/usr/bin/env bash
# make install as a distribution runs it: stage this build tree with
# DESTDIR=$W/stage and prefix /usr, then check what landed (the library
# with its SONAME links, the static library, the header, sluice.pc naming
# /usr, the CMake package, the man pages, the sluice command), build a
# program with pkg-config against the staging (PKG_CONFIG_SYSROOT_DIR) and
# one per target with find_package (test/cmake_package), run them on the
# staged library, then uninstall (cmake/uninstall.cmake, as make
# uninstall) and check that nothing is left. The build tree's own
# install_manifest.txt (a real make install's) is put back at the end.
set -u
BUILD=$(cd "${1:?the build tree}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/harness.sh"
STAGE=$W/stage
step() { # name command...
  local name=$1; shift
  if "$@" >"$W/log" 2>&1; then ok "$name"; else bad "$name"; tail -20 "$W/log"; fi
}
keep_manifest "$BUILD" # sets MANIFEST

libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$BUILD/CMakeCache.txt")
case $libdir in /*) ;; *) libdir=/usr/$libdir ;; esac
LIB=$STAGE$libdir
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")

step install env DESTDIR="$STAGE" cmake --install "$BUILD" --prefix /usr

# the library: libsluice.so -> libsluice.so.0 -> libsluice.so.$version
step "libsluice.so.$version is a file" test -f "$LIB/libsluice.so.$version" -a ! -L "$LIB/libsluice.so.$version"
[ "$(readlink "$LIB/libsluice.so.0")" = "libsluice.so.$version" ] && ok "libsluice.so.0 -> libsluice.so.$version" ||
  bad "libsluice.so.0 links to '$(readlink "$LIB/libsluice.so.0")'"
[ "$(readlink "$LIB/libsluice.so")" = libsluice.so.0 ] && ok "libsluice.so -> libsluice.so.0" ||
  bad "libsluice.so links to '$(readlink "$LIB/libsluice.so")'"
step "SONAME libsluice.so.0" bash -c "readelf -d '$LIB/libsluice.so.$version' | grep -q 'SONAME.*\[libsluice.so.0\]'"
for f in "$LIB/libsluice.a" "$STAGE/usr/include/sluice.h" "$LIB/cmake/sluice/sluiceConfig.cmake" \
         "$LIB/cmake/sluice/sluiceConfigVersion.cmake" "$LIB/cmake/sluice/sluiceTargets.cmake" \
         "$STAGE/usr/share/man/man1/sluice.1" "$STAGE/usr/share/man/man3/sluice.3" \
         "$STAGE/usr/share/man/man3/sl_cache_alloc.3"; do
  [ -f "$f" ] && ok "${f#"$STAGE"}" || bad "${f#"$STAGE"} is missing"
done
step "bin/sluice is executable" test -x "$STAGE/usr/bin/sluice"
# nothing but what the manifest lists (so uninstall can take it all back)
find "$STAGE" \( -type f -o -type l \) | sed "s|^$STAGE||" | sort >"$W/staged"
sort "$MANIFEST" >"$W/listed"
step "the manifest lists every staged file" cmp "$W/staged" "$W/listed"

# sluice.pc names the final paths; the sysroot maps them onto the staging
export PKG_CONFIG_PATH=$LIB/pkgconfig PKG_CONFIG_SYSROOT_DIR=$STAGE
[ "$(PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=prefix sluice)" = /usr ] && ok "sluice.pc: prefix=/usr" ||
  bad "sluice.pc: prefix=$(pkg-config --variable=prefix sluice)"
[ "$(PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=libdir sluice)" = "$libdir" ] && ok "sluice.pc: libdir=$libdir" ||
  bad "sluice.pc: libdir=$(PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=libdir sluice)"
[ "$(pkg-config --modversion sluice)" = "$version" ] && ok "sluice.pc: version $version" || bad "sluice.pc: version"
step "build with pkg-config" bash -c \
  "cc -o '$W/prog' '$ROOT/test/cmake_package/main.c' \$(pkg-config --cflags --libs sluice)"
step "the program needs libsluice.so.0" bash -c "readelf -d '$W/prog' | grep -q 'NEEDED.*\[libsluice.so.0\]'"
step "run on the staged library" env LD_LIBRARY_PATH="$LIB" "$W/prog"
step "it loads the staged library" bash -c "LD_LIBRARY_PATH='$LIB' ldd '$W/prog' | grep -q '$LIB/libsluice.so.0'"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
# the staged command finds the staged library (bindir to libdir), which
# reports the program's final statistics
step "bin/sluice runs a program on it" bash -c \
  "'$STAGE/usr/bin/sluice' run --json '$W/run.json' -- /bin/true &&
   python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))[\"runs\"][\"sluice\"][\"final\"] is None)' '$W/run.json'"

# find_package(sluice) from the staging: the package is relocatable
step cmake-configure cmake -S "$ROOT/test/cmake_package" -B "$W/b" -DCMAKE_PREFIX_PATH="$STAGE/usr"
step cmake-build cmake --build "$W/b"
step run-shared "$W/b/with_shared"
step run-static "$W/b/with_static"
step "the shared one loads the staged library" bash -c "ldd '$W/b/with_shared' | grep -q '$LIB/libsluice.so'"

# uninstall: every file gone, and lib/cmake/sluice with them
step uninstall env DESTDIR="$STAGE" cmake -DMANIFEST="$MANIFEST" -P "$ROOT/cmake/uninstall.cmake"
left=$(find "$STAGE" \( -type f -o -type l \))
[ -z "$left" ] && ok "uninstall left no file" || bad "uninstall left: $left"
[ ! -d "$LIB/cmake/sluice" ] && ok "lib/cmake/sluice removed" || bad "lib/cmake/sluice is still there"
finish install
