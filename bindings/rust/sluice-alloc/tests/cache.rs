//! Typed object caches: values are moved in and dropped exactly once,
//! one by one or in bulk, from the allocating thread or another one.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

static DROPS: AtomicUsize = AtomicUsize::new(0);

struct Conn {
    id: usize,
    buf: [u8; 200],
}

impl Drop for Conn {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn typed_cache() {
    let cache: Cache<Conn> = Cache::new("conn").expect("cache");
    let base = DROPS.load(Ordering::Relaxed);
    let mut a = cache.alloc(Conn { id: 1, buf: [1; 200] }).unwrap();
    a.id += 1;
    assert_eq!(a.id, 2);
    assert_eq!(a.buf[199], 1);
    assert_eq!((&*a as *const Conn as usize) % std::mem::align_of::<Conn>(), 0);
    drop(a);
    assert_eq!(DROPS.load(Ordering::Relaxed), base + 1);

    let objs = cache.alloc_bulk(1000, |i| Conn { id: i, buf: [i as u8; 200] }).unwrap();
    assert!(objs.iter().enumerate().all(|(i, c)| c.id == i && c.buf[7] == i as u8));
    let before = sluice_alloc::stat("bulk_free_calls");
    cache.free_bulk(objs);
    assert_eq!(DROPS.load(Ordering::Relaxed), base + 1001);
    assert!(sluice_alloc::stat("bulk_free_calls") > before);
    cache.shrink();

    // objects freed on other threads (remote frees into the cache)
    let objs = cache.alloc_bulk(4000, |i| Conn { id: i, buf: [0; 200] }).unwrap();
    let mut it = objs.into_iter();
    thread::scope(|s| {
        for _ in 0..4 {
            let part: Vec<_> = it.by_ref().take(1000).collect();
            s.spawn(move || drop(part));
        }
    });
    assert_eq!(DROPS.load(Ordering::Relaxed), base + 5001);
    assert!(sluice_alloc::check());
}

#[test]
fn refused_geometry() {
    assert!(Cache::<[u8; 1 << 20]>::new("too big").is_none());
}

use sluice_alloc::Cache;
