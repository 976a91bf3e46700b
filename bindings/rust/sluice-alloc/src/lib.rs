//! sluice for Rust: the [sluice] memory allocator as the global allocator,
//! typed object caches (with constructors, shrinkers and bulk operations),
//! and sluice's purge, flush, options and statistics.
//!
//! ```toml
//! [dependencies]
//! sluice-alloc = "0.1"
//! # or, with checked mode: sluice-alloc = { version = "0.1", features = ["check"] }
//! ```
//!
//! ```
//! #[global_allocator]
//! static A: sluice_alloc::Sluice = sluice_alloc::Sluice;
//!
//! fn main() {
//!     let v: Vec<u64> = (0..1000).collect(); // allocated by sluice
//!     assert!(sluice_alloc::stat("alloc_small") > 0);
//!     drop(v);
//!     sluice_alloc::purge(); // every free page back to the kernel now
//! }
//! ```
//!
//! # How it is built
//!
//! The C library comes from the `sluice-alloc-sys` crate, whose package
//! carries sluice's C sources (in sluice's repository it takes them from
//! `src/` and `include/`); its `build.rs` compiles them with the
//! system's C compiler (`$CC`, default `cc`, with `$CFLAGS`) into a static
//! library linked into the program. No other crate and no network: a C11
//! compiler is all it needs, and it runs on Linux only. The library has
//! the `sl_` names only, so C libraries in the same program keep the C
//! library's `malloc`; only Rust's allocations (through [`Sluice`]) and
//! the [`Cache`]s go to sluice.
//!
//! # Object caches
//!
//! A [`Cache<T>`] hands out objects of `T` from slabs of their own (the
//! kernel's `kmem_cache`): [`Cache::alloc`] moves a value in, and dropping
//! the [`CacheBox`] drops it and gives the object back. A
//! [`ConstructedCache<T>`] builds each object once, with
//! [`Construct::construct`], when sluice first carves it from a new slab;
//! a freed object keeps its state for the next [`ConstructedCache::get`],
//! which costs no construction. Either kind can have a shrinker
//! ([`Cache::set_shrinker`]): a closure that `sl_purge` (and, under a heap
//! budget, sluice's reclaimer thread) asks to give objects back.
//!
//! ```
//! use sluice_alloc::{Cache, Construct, ConstructedCache};
//!
//! struct Conn { id: u64, buf: [u8; 256] }
//! let conns: Cache<Conn> = Cache::new("conn").unwrap();
//! let c = conns.alloc(Conn { id: 7, buf: [0; 256] }).unwrap();
//! assert_eq!(c.id, 7);
//!
//! struct Scratch { table: [u32; 64] }
//! impl Construct for Scratch {
//!     fn construct() -> Self { Scratch { table: [0; 64] } }
//! }
//! let scratch: ConstructedCache<Scratch> = ConstructedCache::new("scratch").unwrap();
//! let mut s = scratch.get().unwrap(); // constructed, or as its last user left it
//! s.table[0] += 1;
//! ```
//!
//! # Checked mode
//!
//! With the `check` feature the allocator starts in sluice's checked mode
//! (as with `SLUICE_CHECK=1`): canaries around every allocation, freed
//! memory zeroed and held in a quarantine, guard pages around big ones, so
//! an overflow, a write after free or a double free in `unsafe` code is
//! reported when it is freed. It costs time and memory; `SLUICE_CHECK=0`
//! in the environment still turns it off. [`option`]`("check")` tells
//! which mode runs. Object caches are not checked.
//!
//! # Misuse
//!
//! A misuse that reaches sluice (a double free through `unsafe` code, a
//! pointer sluice did not hand out) is reported on stderr in one line and
//! the process aborts, as in C. The environment variables `SLUICE_*` of
//! the C library (see its README or `man sluice`) apply.
//!
//! [sluice]: https://crates.io/crates/sluice-alloc

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{CStr, CString};
use std::os::raw::{c_int, c_void};
use std::ptr;

use sluice_alloc_sys as ffi;

mod cache;
mod shrinker;

pub use cache::{Cache, CacheBox, Construct, Constructed, ConstructedCache};

/// The largest alignment sluice's `malloc` gives without asking.
const MIN_ALIGN: usize = 16;

/// sluice as Rust's global allocator.
pub struct Sluice;

unsafe impl GlobalAlloc for Sluice {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.align() <= MIN_ALIGN {
            ffi::sl_malloc(l.size()) as *mut u8
        } else {
            ffi::sl_memalign(l.align(), l.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.align() <= MIN_ALIGN {
            return ffi::sl_calloc(1, l.size()) as *mut u8;
        }
        let p = self.alloc(l);
        if !p.is_null() {
            ptr::write_bytes(p, 0, l.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, _l: Layout) {
        ffi::sl_free(p as *mut c_void)
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        if l.align() <= MIN_ALIGN {
            return ffi::sl_realloc(p as *mut c_void, new_size) as *mut u8;
        }
        let q = self.alloc(Layout::from_size_align_unchecked(new_size, l.align()));
        if !q.is_null() {
            ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
            self.dealloc(p, l);
        }
        q
    }
}

/// Bytes usable at `p`, a live allocation made through [`Sluice`].
///
/// # Safety
/// `p` must be a live allocation of sluice's.
pub unsafe fn usable_size(p: *const u8) -> usize {
    ffi::sl_usable_size(p as *const c_void)
}

/// Give all free memory back to the kernel now (`sl_purge`).
pub fn purge() {
    unsafe { ffi::sl_purge() }
}

/// Wait until every huge range freed so far has been released by the
/// teardown workers (`sl_flush`).
pub fn flush() {
    unsafe { ffi::sl_flush() }
}

/// Walk every structure and check every invariant (`sl_check`): true, or
/// the process aborts with a line naming the broken one. Call it while
/// other threads are not allocating.
pub fn check() -> bool {
    unsafe { ffi::sl_check() == 0 }
}

/// One counter or gauge by name (`sl_stat`); 0 for an unknown name.
pub fn stat(name: &str) -> u64 {
    match CString::new(name) {
        Ok(c) => unsafe { ffi::sl_stat(c.as_ptr()) },
        Err(_) => 0,
    }
}

/// Every counter and gauge, by name, in sluice's order.
pub fn stats() -> Vec<(&'static str, u64)> {
    let mut out = Vec::new();
    for i in 0.. {
        let n = unsafe { ffi::sl_stat_name(i) };
        if n.is_null() {
            break;
        }
        let name = unsafe { CStr::from_ptr(n) }.to_str().unwrap_or("");
        out.push((name, stat(name)));
    }
    out
}

/// Write the statistics as one JSON object to a file descriptor
/// (`sl_stats_json`).
pub fn stats_json_to(fd: std::os::unix::io::RawFd) {
    unsafe { ffi::sl_stats_json(fd as c_int) }
}

/// An option of sluice's by the name after `SLUICE_` in lower case
/// (`"check"`, `"purge"`, `"dirty_decay_ms"`, ...) as the allocator runs
/// with it (`sl_ctl("opt.NAME")`); `None` for an unknown name.
pub fn option(name: &str) -> Option<i64> {
    let cname = CString::new(format!("opt.{}", name)).ok()?;
    let mut v: i64 = 0;
    let mut len = std::mem::size_of::<i64>();
    let rc = unsafe { ffi::sl_ctl(cname.as_ptr(), &mut v as *mut i64 as *mut c_void, &mut len, ptr::null(), 0) };
    (rc == 0 && len == std::mem::size_of::<i64>()).then_some(v)
}

/// Flags of [`Cache::with_flags`] and [`ConstructedCache::with_flags`].
pub mod flags {
    /// Slabs in RECLAIM pageblocks (objects the owner can give back: a
    /// cache with a shrinker).
    pub const RECLAIMABLE: u32 = sluice_alloc_sys::SL_CACHE_RECLAIMABLE;
    /// Objects aligned to 64 bytes.
    pub const HWCACHE_ALIGN: u32 = sluice_alloc_sys::SL_CACHE_HWCACHE_ALIGN;
}
