//! sluice for Rust: the allocator as the global allocator, typed object
//! caches with bulk operations, and sluice's purge, flush and statistics.
//!
//! ```ignore
//! #[global_allocator]
//! static A: sluice::Sluice = sluice::Sluice;
//! ```
//!
//! The crate builds sluice's C sources with the `cc` crate (build.rs), with
//! the `sl_` names only: Rust's allocations go to sluice, while C libraries
//! linked into the same program keep the C library's `malloc`.
//!
//! A misuse that reaches sluice (a double free through `unsafe` code, a
//! pointer sluice did not hand out) is reported on stderr in one line and
//! the process aborts, as in C.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::{c_void, CStr, CString};
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop};
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_char, c_int, c_uint};
use std::ptr::{self, NonNull};

mod ffi {
    use super::*;
    #[repr(C)]
    pub struct SlCache {
        _private: [u8; 0],
    }
    extern "C" {
        pub fn sl_malloc(size: usize) -> *mut c_void;
        pub fn sl_calloc(n: usize, size: usize) -> *mut c_void;
        pub fn sl_realloc(p: *mut c_void, size: usize) -> *mut c_void;
        pub fn sl_memalign(align: usize, size: usize) -> *mut c_void;
        pub fn sl_free(p: *mut c_void);
        pub fn sl_usable_size(p: *const c_void) -> usize;
        pub fn sl_cache_create(
            name: *const c_char,
            size: usize,
            align: usize,
            flags: c_uint,
            ctor: Option<unsafe extern "C" fn(*mut c_void)>,
        ) -> *mut SlCache;
        pub fn sl_cache_alloc(c: *mut SlCache) -> *mut c_void;
        pub fn sl_cache_free(c: *mut SlCache, p: *mut c_void);
        pub fn sl_cache_alloc_bulk(c: *mut SlCache, n: usize, out: *mut *mut c_void) -> usize;
        pub fn sl_cache_free_bulk(c: *mut SlCache, n: usize, objs: *mut *mut c_void);
        pub fn sl_cache_shrink(c: *mut SlCache) -> usize;
        pub fn sl_cache_destroy(c: *mut SlCache);
        pub fn sl_purge();
        pub fn sl_flush();
        pub fn sl_check() -> c_int;
        pub fn sl_stat(name: *const c_char) -> u64;
        pub fn sl_stat_name(i: usize) -> *const c_char;
        pub fn sl_stats_json(fd: c_int);
    }
}

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
    unsafe { ffi::sl_stats_json(fd) }
}

/// Flags of [`Cache::with_flags`].
pub mod flags {
    /// Slabs in RECLAIM pageblocks (objects the owner can give back).
    pub const RECLAIMABLE: u32 = 0x1;
    /// Objects aligned to 64 bytes.
    pub const HWCACHE_ALIGN: u32 = 0x2;
}

/// A typed object cache (`sl_cache_t`): objects of `T` from slabs of their
/// own, allocated and freed one at a time or in bulk. Dropping the cache
/// destroys it; the objects borrow it, so none outlives it.
pub struct Cache<T> {
    raw: NonNull<ffi::SlCache>,
    _t: PhantomData<T>,
}

// sluice's caches are safe to use from any thread; a `T` crosses threads
// through them, so it must be `Send`.
unsafe impl<T: Send> Send for Cache<T> {}
unsafe impl<T: Send> Sync for Cache<T> {}

impl<T> Cache<T> {
    /// A cache named `name` for objects of `T` (at most 128 KiB, aligned
    /// to at most 4096); `None` if sluice refuses it.
    pub fn new(name: &str) -> Option<Self> {
        Self::with_flags(name, 0)
    }

    /// As [`Cache::new`], with [`flags`].
    pub fn with_flags(name: &str, flags: u32) -> Option<Self> {
        let cname = CString::new(name).ok()?;
        let raw = unsafe { ffi::sl_cache_create(cname.as_ptr(), size_of::<T>().max(1), align_of::<T>(), flags, None) };
        NonNull::new(raw).map(|raw| Cache { raw, _t: PhantomData })
    }

    /// Move `value` into a new object of the cache.
    pub fn alloc(&self, value: T) -> Option<CacheBox<'_, T>> {
        let p = unsafe { ffi::sl_cache_alloc(self.raw.as_ptr()) } as *mut T;
        let ptr = NonNull::new(p)?;
        unsafe { ptr.as_ptr().write(value) };
        Some(CacheBox { ptr, cache: self })
    }

    /// `n` new objects, the `i`th holding `make(i)`: all or none (one
    /// `sl_cache_alloc_bulk` call).
    pub fn alloc_bulk(&self, n: usize, mut make: impl FnMut(usize) -> T) -> Option<Vec<CacheBox<'_, T>>> {
        let mut raw: Vec<*mut c_void> = vec![ptr::null_mut(); n];
        if n > 0 && unsafe { ffi::sl_cache_alloc_bulk(self.raw.as_ptr(), n, raw.as_mut_ptr()) } != n {
            return None;
        }
        Some(
            raw.into_iter()
                .enumerate()
                .map(|(i, p)| {
                    let p = p as *mut T;
                    unsafe { p.write(make(i)) };
                    CacheBox { ptr: unsafe { NonNull::new_unchecked(p) }, cache: self }
                })
                .collect(),
        )
    }

    /// Drop the values of `objs` and give the objects back with one
    /// `sl_cache_free_bulk` call (one splice per slab).
    pub fn free_bulk(&self, objs: Vec<CacheBox<'_, T>>) {
        let mut raw: Vec<*mut c_void> = Vec::with_capacity(objs.len());
        for b in objs {
            assert!(ptr::eq(b.cache, self), "free_bulk: an object of another cache");
            let b = ManuallyDrop::new(b);
            unsafe { ptr::drop_in_place(b.ptr.as_ptr()) };
            raw.push(b.ptr.as_ptr() as *mut c_void);
        }
        if !raw.is_empty() {
            unsafe { ffi::sl_cache_free_bulk(self.raw.as_ptr(), raw.len(), raw.as_mut_ptr()) };
        }
    }

    /// Give the cache's empty slabs back; returns the bytes released.
    pub fn shrink(&self) -> usize {
        unsafe { ffi::sl_cache_shrink(self.raw.as_ptr()) }
    }
}

impl<T> Drop for Cache<T> {
    fn drop(&mut self) {
        unsafe { ffi::sl_cache_destroy(self.raw.as_ptr()) }
    }
}

/// An object of a [`Cache`], owning its `T`: dropping it drops the value
/// and frees the object to its cache (from whichever thread).
pub struct CacheBox<'a, T> {
    ptr: NonNull<T>,
    cache: &'a Cache<T>,
}

unsafe impl<T: Send> Send for CacheBox<'_, T> {}
unsafe impl<T: Sync> Sync for CacheBox<'_, T> {}

impl<T> Deref for CacheBox<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> DerefMut for CacheBox<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { self.ptr.as_mut() }
    }
}

impl<T> Drop for CacheBox<'_, T> {
    fn drop(&mut self) {
        unsafe {
            ptr::drop_in_place(self.ptr.as_ptr());
            ffi::sl_cache_free(self.cache.raw.as_ptr(), self.ptr.as_ptr() as *mut c_void);
        }
    }
}
