//! Shrinkers: purge asks the closure to give objects back (want =
//! usize::MAX), sluice counts what it freed; a cleared shrinker is not
//! asked; a replaced one is the new closure; sluice's rules inside a
//! shrinker (no cache created, no shrinker set) hold; a panic aborts.
use sluice_alloc::{flags, Cache, CacheBox, Construct, ConstructedCache};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

struct Entry {
    key: u64,
    _value: [u8; 100],
}

type Held = Arc<Mutex<Vec<CacheBox<'static, Entry>>>>;

fn fill(cache: &'static Cache<Entry>, held: &Held, n: u64) {
    let mut h = held.lock().unwrap();
    for key in 0..n {
        h.push(cache.alloc(Entry { key, _value: [1; 100] }).unwrap());
    }
}

#[test]
fn purge_asks_the_shrinker() {
    let cache: &'static Cache<Entry> = Box::leak(Box::new(Cache::with_flags("entries", flags::RECLAIMABLE).unwrap()));
    let held: Held = Arc::default();
    let asked = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicBool::new(false));
    let (h, a, r) = (Arc::clone(&held), Arc::clone(&asked), Arc::clone(&refused));
    cache.set_shrinker(move |want| {
        a.store(want, Ordering::SeqCst);
        // sluice forbids creating a cache in here: the safe API says None
        r.store(Cache::<u64>::new("inside").is_none(), Ordering::SeqCst);
        let mut l = h.lock().unwrap();
        let n = want.min(l.len());
        l.drain(..n);
        n
    });
    fill(cache, &held, 1000);
    assert_eq!(held.lock().unwrap()[999].key, 999);
    let before = sluice_alloc::stat("reclaim_objects");
    sluice_alloc::purge();
    assert!(held.lock().unwrap().is_empty(), "the shrinker dropped every held entry");
    assert_eq!(asked.load(Ordering::SeqCst), usize::MAX);
    assert!(refused.load(Ordering::SeqCst), "a cache created inside a shrinker is refused");
    assert!(sluice_alloc::stat("reclaim_objects") >= before + 1000);

    // replaced: the new closure is the one asked
    let second = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&second);
    cache.set_shrinker(move |_| {
        s.fetch_add(1, Ordering::SeqCst);
        0
    });
    fill(cache, &held, 10);
    sluice_alloc::purge();
    assert!(second.load(Ordering::SeqCst) >= 1);
    assert_eq!(held.lock().unwrap().len(), 10, "the old closure is not called");

    // cleared: not asked at all
    cache.clear_shrinker();
    let calls = second.load(Ordering::SeqCst);
    sluice_alloc::purge();
    assert_eq!(second.load(Ordering::SeqCst), calls);
    assert_eq!(held.lock().unwrap().len(), 10);
    held.lock().unwrap().clear();
}

struct Page([u64; 64]);
impl Construct for Page {
    fn construct() -> Self {
        Page([0; 64])
    }
}

#[test]
fn constructed_cache_shrinker() {
    let cache: &'static ConstructedCache<Page> = Box::leak(Box::new(ConstructedCache::new("pages").unwrap()));
    let held = Arc::new(Mutex::new(cache.get_bulk(100).unwrap()));
    let h = Arc::clone(&held);
    cache.set_shrinker(move |want| {
        let mut l = h.lock().unwrap();
        let n = want.min(l.len());
        let gone: Vec<_> = l.drain(..n).collect();
        cache.put_bulk(gone);
        n
    });
    held.lock().unwrap().iter_mut().for_each(|p| p.0[63] = 1);
    sluice_alloc::purge();
    assert!(held.lock().unwrap().is_empty());
    cache.clear_shrinker();
}

#[test]
fn a_dropped_cache_forgets_its_shrinker() {
    let called = Arc::new(AtomicUsize::new(0));
    {
        let c = Arc::clone(&called);
        let cache: Cache<u64> = Cache::new("short-lived").unwrap();
        cache.set_shrinker(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            0
        });
    }
    sluice_alloc::purge();
    assert_eq!(called.load(Ordering::SeqCst), 0);
}

#[test]
fn panicking_shrinker_aborts() {
    if std::env::var_os("SLUICE_ALLOC_CHILD").is_some() {
        let cache: Cache<u64> = Cache::new("bad shrinker").unwrap();
        cache.set_shrinker(|_| panic!("shrinker fails"));
        sluice_alloc::purge();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "panicking_shrinker_aborts", "--nocapture", "--test-threads=1"])
        .env("SLUICE_ALLOC_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6), "status {:?}, stderr {}", out.status, err);
    assert!(err.contains("a shrinker panicked"), "stderr: {}", err);
}
