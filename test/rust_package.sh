#!/usr/bin/env bash
# The Rust crates as crates.io would have them: bindings/rust/package.sh
# (on a copy of bindings/rust) makes sluice-alloc-sys-X.crate, which must
# carry sluice's C sources, and sluice-alloc-X.crate; then a program in an
# empty folder that depends on sluice-alloc = "X" builds offline, with an
# empty CARGO_HOME, from the two packages alone (vendored as cargo vendor
# would: a directory source replacing crates.io), and runs: the global
# allocator, a cache, a constructed cache and a shrinker. Skipped (exit 77)
# without cargo, or with one older than 1.90.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/harness.sh"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: the Rust packages are not checked"
  exit 77
fi
# packaging two crates of a workspace together (the second depending on
# the first, unpublished) came with cargo 1.90
v=$(cargo --version | sed -n 's/^cargo \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
if [ -z "$v" ] || [ "${v% *}" -eq 1 -a "${v#* }" -lt 90 ]; then
  echo "$(cargo --version): packaging the two crates together needs cargo 1.90 or later: not checked"
  exit 77
fi
step() { # name command...
  local name=$1; shift
  if "$@" >"$W/log" 2>&1; then ok "$name"; else bad "$name"; tail -20 "$W/log"; fi
}
export CARGO_TARGET_DIR=$W/target
mkdir -p "$W/rust" "$W/vendor" "$W/app/src" "$W/app/.cargo" "$W/cargo-home"
(cd "$ROOT/bindings/rust" && tar --exclude=./target --exclude=./sluice-alloc-sys/sluice -cf - .) | (cd "$W/rust" && tar xf -)
step package env SLUICE_ROOT="$ROOT" "$W/rust/package.sh" --no-verify --offline
PKG=$W/target/package
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$W/rust/sluice-alloc-sys/Cargo.toml" | head -1)
SYS=$PKG/sluice-alloc-sys-$version.crate SAFE=$PKG/sluice-alloc-$version.crate
step "the -sys package carries the C sources" bash -c \
  "tar tzf '$SYS' | grep -qx 'sluice-alloc-sys-$version/sluice/src/api/malloc.c' &&
   tar tzf '$SYS' | grep -qx 'sluice-alloc-sys-$version/sluice/include/sluice.h' &&
   [ \$(tar tzf '$SYS' | grep -c '\.c\$') -eq $(find "$ROOT/src" -name '*.c' | wc -l) ]"
step "the copy is gone after packaging" test ! -e "$W/rust/sluice-alloc-sys/sluice"
step "sluice-alloc depends on sluice-alloc-sys by version" bash -c \
  "tar xzOf '$SAFE' sluice-alloc-$version/Cargo.toml | grep -A2 'dependencies.sluice-alloc-sys' | grep -q 'version = \"$version\"'"

for crate in "$SYS" "$SAFE"; do
  tar xzf "$crate" -C "$W/vendor"
  dir=$W/vendor/$(basename "$crate" .crate)
  printf '{"files":{},"package":"%s"}' "$(sha256sum "$crate" | cut -d' ' -f1)" >"$dir/.cargo-checksum.json"
done
cat >"$W/app/Cargo.toml" <<TOML
[package]
name = "app"
version = "0.1.0"
edition = "2021"
[dependencies]
sluice-alloc = "$version"
TOML
cat >"$W/app/.cargo/config.toml" <<TOML
[source.crates-io]
replace-with = "vendored"
[source.vendored]
directory = "$W/vendor"
TOML
cat >"$W/app/src/main.rs" <<'RS'
use sluice_alloc::{Cache, Construct, ConstructedCache};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[global_allocator]
static A: sluice_alloc::Sluice = sluice_alloc::Sluice;

struct Scratch([u32; 16]);
impl Construct for Scratch {
    fn construct() -> Self { Scratch([7; 16]) }
}

fn main() {
    let before = sluice_alloc::stat("alloc_small");
    let v: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    assert!(sluice_alloc::stat("alloc_small") >= before + 1000);
    let cache: Cache<[u8; 64]> = Cache::new("app").unwrap();
    let b = cache.alloc([1; 64]).unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let a = Arc::clone(&asked);
    cache.set_shrinker(move |want| { a.store(want, Ordering::SeqCst); 0 });
    sluice_alloc::purge();
    assert_eq!(asked.load(Ordering::SeqCst), usize::MAX);
    let pool: ConstructedCache<Scratch> = ConstructedCache::new("scratch").unwrap();
    assert_eq!(pool.get().unwrap().0[15], 7);
    assert!(sluice_alloc::check());
    println!("sluice-alloc works: {} strings, object {}", v.len(), b[63]);
}
RS
step "the program builds offline from the packages" bash -c \
  "cd '$W/app' && CARGO_HOME='$W/cargo-home' cargo build --offline"
step "it runs" bash -c "'$CARGO_TARGET_DIR/debug/app' | grep -q 'sluice-alloc works'"
finish rust_package
