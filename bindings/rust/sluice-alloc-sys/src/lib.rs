//! The raw functions of the [sluice](https://crates.io/crates/sluice-alloc)
//! memory allocator, as its C header `sluice.h` declares them, and the
//! library itself, built from source.
//!
//! Most programs want the safe crate, `sluice-alloc` (the global allocator,
//! typed object caches with constructors and shrinkers). This one is for
//! code that calls the C interface directly, and is the one crate of a
//! program that links the library (`links = "sluice"`).
//!
//! # How it is built
//!
//! `build.rs` compiles sluice's C sources, which the package carries
//! (`sluice/src`, `sluice/include`), with the system's C compiler: `$CC`
//! (or `$CC_<target>`, `$TARGET_CC`; default `cc`) and `$CFLAGS`, archived
//! by `$AR` (default `ar`) into a static library linked into the program,
//! with `-lpthread`. No other crate and no network is needed: a C11
//! compiler for Linux is. The library is built with the `sl_` names only:
//! the program's C libraries keep the C library's `malloc`.
//! `DEP_SLUICE_INCLUDE` gives build scripts of dependent crates the folder
//! of `sluice.h`.
//!
//! # Features
//!
//! `check`: checked mode by default (canaries, zero fill, a quarantine,
//! guard pages: misuse is caught and reported, at a cost in time and
//! memory); `SLUICE_CHECK=0` in the environment still turns it off.
//!
//! # Safety
//!
//! Every function is `unsafe`: the rules are those of `sluice.h` (a pointer
//! passed to a free must come from sluice and be live; misuse is reported
//! on stderr and the process aborts).
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// An object cache (`sl_cache_t`), opaque.
#[repr(C)]
pub struct sl_cache_t {
    _private: [u8; 0],
}

/// Slabs in RECLAIM pageblocks (objects the owner can give back).
pub const SL_CACHE_RECLAIMABLE: c_uint = 0x1;
/// Objects aligned to 64-byte cache lines.
pub const SL_CACHE_HWCACHE_ALIGN: c_uint = 0x2;

/// One cache's line of the slabinfo table (`sl_cache_stats`). Set `size` to
/// `size_of::<sl_cache_stats>()` before the call.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct sl_cache_stats {
    pub size: usize,
    pub name: [c_char; 48],
    pub object_size: u64,
    pub objects_active: u64,
    pub objects_total: u64,
    pub slabs_active: u64,
    pub slabs_total: u64,
    pub pages_per_slab: u64,
    pub pageblock_type: u64,
    pub allocations: u64,
    pub frees: u64,
    pub remote_frees: u64,
    pub bulk_frees: u64,
}
/// `sl_cache_stats::pageblock_type`: a SLAB pageblock.
pub const SL_PAGEBLOCK_SLAB: u64 = 0;
/// `sl_cache_stats::pageblock_type`: a RECLAIM pageblock.
pub const SL_PAGEBLOCK_RECLAIM: u64 = 1;
/// `sl_cache_stats::pageblock_type`: a BUF pageblock (malloc's classes above 512 B).
pub const SL_PAGEBLOCK_BUF: u64 = 2;

/// A cache's constructor: runs once per object, when it is first carved.
pub type sl_ctor_fn = Option<unsafe extern "C" fn(obj: *mut c_void)>;
/// A cache's shrinker: frees up to `want` objects of the cache, returns how
/// many it freed.
pub type sl_reclaim_fn = Option<unsafe extern "C" fn(c: *mut sl_cache_t, want: usize) -> usize>;

extern "C" {
    pub fn sl_malloc(size: usize) -> *mut c_void;
    pub fn sl_calloc(n: usize, size: usize) -> *mut c_void;
    pub fn sl_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    pub fn sl_reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void;
    pub fn sl_free(p: *mut c_void);
    pub fn sl_free_sized(p: *mut c_void, size: usize);
    pub fn sl_free_aligned_sized(p: *mut c_void, align: usize, size: usize);
    pub fn sl_aligned_alloc(align: usize, size: usize) -> *mut c_void;
    pub fn sl_posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int;
    pub fn sl_memalign(align: usize, size: usize) -> *mut c_void;
    pub fn sl_valloc(size: usize) -> *mut c_void;
    pub fn sl_pvalloc(size: usize) -> *mut c_void;
    pub fn sl_usable_size(p: *const c_void) -> usize;

    pub fn sl_alloc_bulk(size: usize, n: usize, out: *mut *mut c_void) -> usize;
    pub fn sl_free_bulk(ptrs: *mut *mut c_void, n: usize);

    pub fn sl_cache_create(name: *const c_char, size: usize, align: usize, flags: c_uint, ctor: sl_ctor_fn)
        -> *mut sl_cache_t;
    pub fn sl_cache_alloc(c: *mut sl_cache_t) -> *mut c_void;
    pub fn sl_cache_free(c: *mut sl_cache_t, p: *mut c_void);
    pub fn sl_cache_alloc_bulk(c: *mut sl_cache_t, n: usize, out: *mut *mut c_void) -> usize;
    pub fn sl_cache_free_bulk(c: *mut sl_cache_t, n: usize, objs: *mut *mut c_void);
    pub fn sl_cache_shrink(c: *mut sl_cache_t) -> usize;
    pub fn sl_cache_destroy(c: *mut sl_cache_t);
    pub fn sl_cache_set_reclaim(c: *mut sl_cache_t, f: sl_reclaim_fn);
    pub fn sl_cache_stats(c: *mut sl_cache_t, out: *mut sl_cache_stats) -> c_int;

    pub fn sl_purge();
    pub fn sl_flush();
    pub fn sl_check() -> c_int;
    pub fn sl_prof_dump(path: *const c_char) -> c_int;

    pub fn sl_stat(name: *const c_char) -> u64;
    pub fn sl_ctl(name: *const c_char, old: *mut c_void, oldlen: *mut usize, new_value: *const c_void, newlen: usize)
        -> c_int;
    pub fn sl_stat_name(i: usize) -> *const c_char;
    pub fn sl_stats_print(fd: c_int);
    pub fn sl_stats_json(fd: c_int);
}
