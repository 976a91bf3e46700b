//! Object caches (`sl_cache_t`) in two kinds, over one owner of the C
//! cache (`RawCache`: created here, destroyed on drop, its shrinker kept in
//! shrinker.rs):
//!   - `Cache<T>`: a value is moved into each object and dropped when the
//!     object goes back (`CacheBox`); no constructor.
//!   - `ConstructedCache<T>`: sluice runs `T::construct` once per object,
//!     when it first carves it from a new slab (the C constructor); an
//!     object always holds a valid `T`, free or not, and a freed one keeps
//!     its state for the next user (`Constructed` does not drop it). So
//!     `T` must have no drop glue: sluice gives slabs back (shrink, purge,
//!     destroy) without a destructor, and whatever a `Drop` would release
//!     would leak. That is checked when the cache type is compiled.
//!
//! Objects borrow their cache, so none outlives it, and sluice's
//! `sl_cache_destroy` (every slab at once) runs only when none is live.
use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::mem::{align_of, needs_drop, size_of, ManuallyDrop};
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use sluice_alloc_sys as ffi;

use crate::shrinker;

/// The C cache: created, shrunk, given a shrinker, destroyed on drop.
struct RawCache(NonNull<ffi::sl_cache_t>);

impl RawCache {
    fn create<T>(name: &str, flags: u32, ctor: ffi::sl_ctor_fn) -> Option<Self> {
        if shrinker::in_shrinker() {
            return None; // sluice forbids it there
        }
        let cname = CString::new(name).ok()?;
        let raw = unsafe { ffi::sl_cache_create(cname.as_ptr(), size_of::<T>().max(1), align_of::<T>(), flags, ctor) };
        NonNull::new(raw).map(RawCache)
    }

    fn ptr(&self) -> *mut ffi::sl_cache_t {
        self.0.as_ptr()
    }

    fn shrink(&self) -> usize {
        unsafe { ffi::sl_cache_shrink(self.ptr()) }
    }

    fn set_shrinker<F: Fn(usize) -> usize + Send + Sync + 'static>(&self, f: F) {
        shrinker::set(self.ptr(), Arc::new(f))
    }

    fn clear_shrinker(&self) {
        shrinker::clear(self.ptr())
    }
}

impl Drop for RawCache {
    fn drop(&mut self) {
        shrinker::forget(self.ptr());
        unsafe { ffi::sl_cache_destroy(self.ptr()) }
    }
}

/// A typed object cache (`sl_cache_t`): objects of `T` from slabs of their
/// own, allocated and freed one at a time or in bulk. Dropping the cache
/// destroys it; the objects borrow it, so none outlives it.
pub struct Cache<T> {
    raw: RawCache,
    _t: PhantomData<T>,
}

// sluice's caches are safe to use from any thread; a `T` crosses threads
// through them, so it must be `Send`.
unsafe impl<T: Send> Send for Cache<T> {}
unsafe impl<T: Send> Sync for Cache<T> {}

impl<T> Cache<T> {
    /// A cache named `name` for objects of `T` (at most 128 KiB, aligned
    /// to at most 4096); `None` if sluice refuses it, or when called from
    /// inside a shrinker.
    pub fn new(name: &str) -> Option<Self> {
        Self::with_flags(name, 0)
    }

    /// As [`Cache::new`], with [`flags`](crate::flags).
    pub fn with_flags(name: &str, flags: u32) -> Option<Self> {
        RawCache::create::<T>(name, flags, None).map(|raw| Cache { raw, _t: PhantomData })
    }

    /// Move `value` into a new object of the cache.
    pub fn alloc(&self, value: T) -> Option<CacheBox<'_, T>> {
        let p = unsafe { ffi::sl_cache_alloc(self.raw.ptr()) } as *mut T;
        let ptr = NonNull::new(p)?;
        unsafe { ptr.as_ptr().write(value) };
        Some(CacheBox { ptr, cache: self })
    }

    /// `n` new objects, the `i`th holding `make(i)`: all or none (one
    /// `sl_cache_alloc_bulk` call).
    pub fn alloc_bulk(&self, n: usize, mut make: impl FnMut(usize) -> T) -> Option<Vec<CacheBox<'_, T>>> {
        let raw = bulk_alloc(&self.raw, n)?;
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
        bulk_free(&self.raw, raw);
    }

    /// Give the cache's empty slabs back; returns the bytes released.
    pub fn shrink(&self) -> usize {
        self.raw.shrink()
    }

    /// The cache's shrinker (`sl_cache_set_reclaim`): `f(want)` should drop
    /// up to `want` objects of this cache that the program holds but can
    /// do without, and return how many it dropped. `purge` asks it with
    /// `want = usize::MAX` before giving memory back; under a heap budget
    /// sluice's reclaimer thread asks for a few pageblocks' worth, so `f`
    /// may run on that thread. One call at a time; a closure set again
    /// replaces the last one. Create the cache with
    /// [`flags::RECLAIMABLE`](crate::flags::RECLAIMABLE) so its slabs are
    /// grouped apart.
    ///
    /// The closure is `'static`: the objects it drops are usually held in
    /// an `Arc<Mutex<..>>` shared with the program, which for
    /// `CacheBox<'static, T>` needs a cache that lives for the whole
    /// program (a `static`, or `Box::leak`).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use sluice_alloc::{flags, Cache, CacheBox};
    ///
    /// struct Entry { key: u64, value: [u8; 100] }
    /// let cache: &'static Cache<Entry> = Box::leak(Box::new(Cache::with_flags("lru", flags::RECLAIMABLE).unwrap()));
    /// let lru: Arc<Mutex<Vec<CacheBox<'static, Entry>>>> = Arc::default();
    /// let held = Arc::clone(&lru);
    /// cache.set_shrinker(move |want| {
    ///     let mut l = held.lock().unwrap();
    ///     let n = want.min(l.len());
    ///     l.drain(..n); // the oldest n go back to the cache
    ///     n
    /// });
    /// lru.lock().unwrap().push(cache.alloc(Entry { key: 1, value: [0; 100] }).unwrap());
    /// sluice_alloc::purge(); // asks the shrinker first
    /// assert!(lru.lock().unwrap().is_empty());
    /// ```
    ///
    /// # Panics
    /// When called from inside a shrinker (sluice forbids it). A panic in
    /// `f` aborts the process.
    pub fn set_shrinker<F: Fn(usize) -> usize + Send + Sync + 'static>(&self, f: F) {
        self.raw.set_shrinker(f)
    }

    /// Remove the shrinker; once this returns, it is not running and will
    /// not be called. Panics when called from inside a shrinker.
    pub fn clear_shrinker(&self) {
        self.raw.clear_shrinker()
    }
}

/// `n` objects in one `sl_cache_alloc_bulk` call, all or none.
fn bulk_alloc(raw: &RawCache, n: usize) -> Option<Vec<*mut c_void>> {
    let mut out: Vec<*mut c_void> = vec![ptr::null_mut(); n];
    if n > 0 && unsafe { ffi::sl_cache_alloc_bulk(raw.ptr(), n, out.as_mut_ptr()) } != n {
        return None;
    }
    Some(out)
}

fn bulk_free(raw: &RawCache, mut objs: Vec<*mut c_void>) {
    if !objs.is_empty() {
        unsafe { ffi::sl_cache_free_bulk(raw.ptr(), objs.len(), objs.as_mut_ptr()) };
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
            ffi::sl_cache_free(self.cache.raw.ptr(), self.ptr.as_ptr() as *mut c_void);
        }
    }
}

/// How a [`ConstructedCache`] builds its objects: once per object, when
/// sluice first carves it from a new slab, not on every
/// [`ConstructedCache::get`]. `construct` may allocate; a panic in it
/// aborts the process (it runs inside sluice).
///
/// The type must have no drop glue (no `Drop`, no field that has one):
/// sluice gives slabs back without a destructor. A type with one is
/// refused when the cache is compiled:
///
/// ```compile_fail
/// use sluice_alloc::{Construct, ConstructedCache};
/// struct Buf(Vec<u8>);
/// impl Construct for Buf {
///     fn construct() -> Self { Buf(Vec::with_capacity(4096)) }
/// }
/// let c: Option<ConstructedCache<Buf>> = ConstructedCache::new("bufs");
/// ```
pub trait Construct: Sized {
    /// A new object in its constructed state.
    fn construct() -> Self;
}

struct NoDropGlue<T>(PhantomData<T>);
impl<T> NoDropGlue<T> {
    const CHECK: () = assert!(
        !needs_drop::<T>(),
        "ConstructedCache<T>: T must have no drop glue (sluice gives slabs back without a destructor)"
    );
}

unsafe extern "C" fn construct_object<T: Construct>(obj: *mut c_void) {
    let v = catch_unwind(AssertUnwindSafe(T::construct)).unwrap_or_else(|_| {
        eprintln!("sluice: a constructor panicked; aborting (it cannot unwind into sluice)");
        std::process::abort()
    });
    (obj as *mut T).write(v)
}

/// An object cache with a constructor (`sl_cache_create` with a `ctor`):
/// each object is built once by [`Construct::construct`] and keeps its
/// state across frees, so [`get`](ConstructedCache::get) hands out an
/// object as it was constructed or as its last user left it, at the cost
/// of an allocation. Objects borrow the cache; dropping the cache
/// destroys it.
pub struct ConstructedCache<T: Construct> {
    raw: RawCache,
    _t: PhantomData<T>,
}

unsafe impl<T: Construct + Send> Send for ConstructedCache<T> {}
unsafe impl<T: Construct + Send> Sync for ConstructedCache<T> {}

impl<T: Construct> ConstructedCache<T> {
    /// A cache named `name` for objects of `T` (at most 128 KiB, aligned
    /// to at most 4096); `None` if sluice refuses it, or when called from
    /// inside a shrinker.
    pub fn new(name: &str) -> Option<Self> {
        Self::with_flags(name, 0)
    }

    /// As [`ConstructedCache::new`], with [`flags`](crate::flags).
    pub fn with_flags(name: &str, flags: u32) -> Option<Self> {
        #[allow(clippy::let_unit_value)]
        let () = NoDropGlue::<T>::CHECK;
        RawCache::create::<T>(name, flags, Some(construct_object::<T>)).map(|raw| ConstructedCache { raw, _t: PhantomData })
    }

    /// An object: constructed, or as its last user left it.
    pub fn get(&self) -> Option<Constructed<'_, T>> {
        let p = unsafe { ffi::sl_cache_alloc(self.raw.ptr()) } as *mut T;
        NonNull::new(p).map(|ptr| Constructed { ptr, cache: self })
    }

    /// `n` objects in one `sl_cache_alloc_bulk` call: all or none.
    pub fn get_bulk(&self, n: usize) -> Option<Vec<Constructed<'_, T>>> {
        let raw = bulk_alloc(&self.raw, n)?;
        Some(raw.into_iter().map(|p| Constructed { ptr: unsafe { NonNull::new_unchecked(p as *mut T) }, cache: self }).collect())
    }

    /// Give objects back with one `sl_cache_free_bulk` call; they keep
    /// their state.
    pub fn put_bulk(&self, objs: Vec<Constructed<'_, T>>) {
        let raw = objs
            .into_iter()
            .map(|o| {
                assert!(ptr::eq(o.cache, self), "put_bulk: an object of another cache");
                ManuallyDrop::new(o).ptr.as_ptr() as *mut c_void
            })
            .collect();
        bulk_free(&self.raw, raw);
    }

    /// Give the cache's empty slabs back; returns the bytes released (their
    /// objects are constructed again when new slabs are carved).
    pub fn shrink(&self) -> usize {
        self.raw.shrink()
    }

    /// The cache's shrinker, as [`Cache::set_shrinker`].
    pub fn set_shrinker<F: Fn(usize) -> usize + Send + Sync + 'static>(&self, f: F) {
        self.raw.set_shrinker(f)
    }

    /// Remove the shrinker, as [`Cache::clear_shrinker`].
    pub fn clear_shrinker(&self) {
        self.raw.clear_shrinker()
    }
}

/// An object of a [`ConstructedCache`]: dropping it gives the object back
/// as it is (its state is kept for the next user; nothing is dropped).
pub struct Constructed<'a, T: Construct> {
    ptr: NonNull<T>,
    cache: &'a ConstructedCache<T>,
}

unsafe impl<T: Construct + Send> Send for Constructed<'_, T> {}
unsafe impl<T: Construct + Sync> Sync for Constructed<'_, T> {}

impl<T: Construct> Deref for Constructed<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Construct> DerefMut for Constructed<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { self.ptr.as_mut() }
    }
}

impl<T: Construct> Drop for Constructed<'_, T> {
    fn drop(&mut self) {
        unsafe { ffi::sl_cache_free(self.cache.raw.ptr(), self.ptr.as_ptr() as *mut c_void) }
    }
}
