#!/usr/bin/env bash
# Under valgrind's memcheck (src/base/annotate.h): a use after free of an
# object cache's object is reported, and so is one of a malloc block,
# whether memcheck's malloc serves the program (valgrind 3.19 puts its own
# in place of libsluice's malloc, calloc, realloc, free and posix_memalign)
# or sluice's does (--soname-synonyms=somalloc=nouserintercepts; then
# sluice tells memcheck about each block, and the report's free names
# sluice's checked_free); a clean program using caches (a constructor,
# bulk, a remote free, destroy with live objects) and the whole malloc
# family gives no error either way, linked with -lsluice or preloaded.
# Skipped, with a line, when valgrind is not installed.
set -u
PROG=${1:?valgrind_prog linked with libsluice}
PLAIN=${2:?valgrind_prog without sluice}
LIB=${3:?libsluice.so}
. "$(dirname "$0")/harness.sh"
if ! command -v valgrind >/dev/null 2>&1; then
  echo "valgrind: not installed, skipped"
  exit 0
fi
NOUSER=--soname-synonyms=somalloc=nouserintercepts
expect() { # name wanted-status case [env/valgrind options...] -- program
  local name=$1 want=$2 what=$3; shift 3
  local env=() opts=()
  while [ "$1" != -- ]; do
    case $1 in *=*/*) env+=("$1") ;; *) opts+=("$1") ;; esac
    shift
  done
  shift
  env "${env[@]}" valgrind -q "${opts[@]}" --error-exitcode=1 "$1" "$what" >"$W/out" 2>"$W/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, wanted $want: $(head -12 "$W/err")"; return 1; fi
  ok "$name"
}
has() { # name pattern: in the last run's stderr
  grep -q -- "$2" "$W/err" && ok "$1" || bad "$1: no '$2' in: $(head -12 "$W/err")"
}

if expect "clean program, linked" 0 clean -- "$PROG"; then
  grep -q "clean done" "$W/out" && ok "... it ran to the end" || bad "clean: $(cat "$W/out")"
fi
expect "cache object used after free: reported" 1 cache-uaf -- "$PROG" &&
  has "... as an invalid read of a freed block" "Invalid read of size 1" &&
  has "... of the cache's object size, freed" "3 bytes inside a block of size 40 free'd"
expect "malloc block used after free: reported (memcheck's malloc)" 1 malloc-uaf -- "$PROG" &&
  has "... as an invalid write" "Invalid write of size 1"
expect "clean program, sluice's malloc" 0 clean "$NOUSER" -- "$PROG"
expect "malloc block used after free: reported (sluice's malloc)" 1 malloc-uaf "$NOUSER" -- "$PROG" &&
  has "... freed by sluice, which told memcheck" "checked_free" &&
  has "... 10 bytes into the 64 asked for" "10 bytes inside a block of size 64 free'd"
expect "preloaded, sluice's malloc: use after free reported" 1 malloc-uaf "LD_PRELOAD=$LIB" "$NOUSER" -- "$PLAIN" &&
  has "... by sluice's annotation" "annotate_free"
finish valgrind
