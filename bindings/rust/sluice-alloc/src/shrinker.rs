//! Shrinkers: a Rust closure as a cache's `sl_cache_set_reclaim` function.
//!
//! The C function gets the cache pointer and `want`, no context, so the
//! closures live in one registry keyed by the cache pointer; the one C
//! function, `trampoline`, looks the closure up (an `Arc` clone under the
//! registry lock, released before the call) and calls it. Invariants:
//!   - a cache has a closure in the registry while, and only while, the C
//!     side may call `trampoline` for it with that closure in mind:
//!     `set` registers before `sl_cache_set_reclaim`, `clear` removes after
//!     it returns (sluice waits for a running call), and a cache about to
//!     be destroyed is forgotten before `sl_cache_destroy` (a call that
//!     finds no closure frees nothing);
//!   - a closure being called is kept alive by its `Arc` even if replaced
//!     or removed meanwhile;
//!   - a panic in a closure aborts the process (it cannot unwind into C);
//!   - sluice forbids creating or destroying caches and setting shrinkers
//!     from inside a shrinker: `IN_SHRINKER` marks the calling thread, and
//!     the safe API refuses those there (cache.rs).
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_alloc_sys as ffi;

pub(crate) type ShrinkFn = dyn Fn(usize) -> usize + Send + Sync + 'static;

static REGISTRY: Mutex<Vec<(usize, Arc<ShrinkFn>)>> = Mutex::new(Vec::new());

thread_local! {
    static IN_SHRINKER: Cell<bool> = const { Cell::new(false) };
}

fn registry() -> MutexGuard<'static, Vec<(usize, Arc<ShrinkFn>)>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Is this thread running a shrinker?
pub(crate) fn in_shrinker() -> bool {
    IN_SHRINKER.with(|s| s.get())
}

fn not_in_shrinker(what: &str) {
    assert!(!in_shrinker(), "sluice: {} inside a shrinker (sluice forbids it)", what);
}

pub(crate) fn set(c: *mut ffi::sl_cache_t, f: Arc<ShrinkFn>) {
    not_in_shrinker("set_shrinker");
    {
        let mut r = registry();
        match r.iter_mut().find(|(k, _)| *k == c as usize) {
            Some(entry) => entry.1 = f,
            None => r.push((c as usize, f)),
        }
    }
    unsafe { ffi::sl_cache_set_reclaim(c, Some(trampoline)) }
}

pub(crate) fn clear(c: *mut ffi::sl_cache_t) {
    not_in_shrinker("clear_shrinker");
    unsafe { ffi::sl_cache_set_reclaim(c, None) }
    forget(c);
}

/// Before `sl_cache_destroy` (which stops the C side's calls itself).
pub(crate) fn forget(c: *mut ffi::sl_cache_t) {
    not_in_shrinker("dropping a cache");
    registry().retain(|(k, _)| *k != c as usize);
}

unsafe extern "C" fn trampoline(c: *mut ffi::sl_cache_t, want: usize) -> usize {
    let f = registry().iter().find(|(k, _)| *k == c as usize).map(|(_, f)| Arc::clone(f));
    let f = match f {
        Some(f) => f,
        None => return 0,
    };
    let outer = IN_SHRINKER.with(|s| s.replace(true));
    let n = catch_unwind(AssertUnwindSafe(|| f(want))).unwrap_or_else(|_| {
        eprintln!("sluice: a shrinker panicked; aborting (it cannot unwind into sluice)");
        std::process::abort()
    });
    IN_SHRINKER.with(|s| s.set(outer));
    n
}
