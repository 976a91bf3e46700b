#!/usr/bin/env bash
# package.sh [publish] [cargo args...] — the crates.io packages of the
# Rust crates, in $CARGO_TARGET_DIR/package (default target/package):
# sluice-alloc-sys-X.Y.Z.crate, which carries sluice's C sources, and
# sluice-alloc-X.Y.Z.crate. It copies the repository's src/ and include/
# into sluice-alloc-sys/sluice/ (build.rs builds from there when present),
# runs `cargo package --workspace` (or `cargo publish --workspace` with
# `publish` first), and removes the copy again: it is not in git, and a
# stale one would hide edits of ../../src from `cargo test`. Packaged
# together, sluice-alloc is verified against the sluice-alloc-sys package
# just made before either is on crates.io (cargo 1.90 or later; an
# older one packages only sluice-alloc-sys before it is published). Other arguments go to cargo
# (--allow-dirty, --no-verify, --offline, --dry-run, ...); SLUICE_ROOT
# names another checkout to take the C sources from.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=${SLUICE_ROOT:-$(cd "$HERE/../.." && pwd)}
VENDOR=$HERE/sluice-alloc-sys/sluice
[ -f "$ROOT/src/api/malloc.c" ] && [ -f "$ROOT/include/sluice.h" ] || { echo "package.sh: no sluice sources in $ROOT" >&2; exit 1; }
trap 'rm -rf "$VENDOR"' EXIT
rm -rf "$VENDOR"
mkdir -p "$VENDOR"
cp -R "$ROOT/src" "$ROOT/include" "$VENDOR/"
cd "$HERE"
verb=package
if [ "${1:-}" = publish ]; then verb=publish; shift; fi
cargo "$verb" --workspace "$@"
