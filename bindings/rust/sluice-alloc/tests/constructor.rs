//! Caches with a constructor: each object is built once, when carved, and
//! keeps its state across frees; bulk gets and puts; objects freed on
//! other threads; and a constructor that panics aborts the process.
use sluice_alloc::{Construct, ConstructedCache};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

static BUILT: AtomicUsize = AtomicUsize::new(0);

struct Slot {
    magic: u64,
    uses: u32,
    table: [u8; 240],
}

impl Construct for Slot {
    fn construct() -> Self {
        BUILT.fetch_add(1, Ordering::Relaxed);
        Slot { magic: 0x5eed, uses: 0, table: [0xab; 240] }
    }
}

#[test]
fn constructed_once_and_state_kept() {
    let cache: ConstructedCache<Slot> = ConstructedCache::new("slot").expect("cache");
    let mut a = cache.get().unwrap();
    assert_eq!(a.magic, 0x5eed);
    assert!(a.table.iter().all(|&b| b == 0xab));
    assert_eq!((&*a as *const Slot as usize) % std::mem::align_of::<Slot>(), 0);
    a.uses = 7;
    let addr = &*a as *const Slot;
    drop(a);
    // the object comes back to this thread first, as its last user left it
    let b = cache.get().unwrap();
    assert_eq!(&*b as *const Slot, addr);
    assert_eq!(b.uses, 7, "the freed object kept its state");
    drop(b);

    // 10,000 gets and frees construct only the objects carved, not 10,000
    let before = BUILT.load(Ordering::Relaxed);
    for _ in 0..10_000 {
        let o = cache.get().unwrap();
        assert_eq!(o.magic, 0x5eed);
    }
    assert!(BUILT.load(Ordering::Relaxed) - before < 100, "built {}", BUILT.load(Ordering::Relaxed) - before);

    // bulk: every object constructed, and put back as it is (the second
    // round sees the marks of the first on the objects it gets again)
    let mut objs = cache.get_bulk(1000).unwrap();
    assert!(objs.iter().all(|o| o.magic == 0x5eed && o.table[239] == 0xab));
    let first: std::collections::HashSet<usize> = objs.iter().map(|o| &**o as *const Slot as usize).collect();
    objs.iter_mut().for_each(|o| o.uses = 9);
    cache.put_bulk(objs);
    let objs = cache.get_bulk(1000).unwrap();
    // (an object of a slab given back meanwhile is constructed anew)
    let kept = objs.iter().filter(|o| o.uses == 9).count();
    assert!(kept > 0, "no object came back as it was put");
    assert!(objs.iter().all(|o| o.magic == 0x5eed && (o.uses != 9 || first.contains(&(&**o as *const Slot as usize)))));

    // freed on other threads
    let mut it = objs.into_iter();
    thread::scope(|s| {
        for _ in 0..4 {
            let part: Vec<_> = it.by_ref().take(250).collect();
            s.spawn(move || drop(part));
        }
    });
    assert!(sluice_alloc::check());
}

#[test]
fn zero_sized_and_refused() {
    struct Unit;
    impl Construct for Unit {
        fn construct() -> Self {
            Unit
        }
    }
    let c: ConstructedCache<Unit> = ConstructedCache::new("unit").unwrap();
    drop(c.get().unwrap());
    #[allow(dead_code)]
    struct Huge([u8; 1 << 20]);
    impl Construct for Huge {
        fn construct() -> Self {
            Huge([0; 1 << 20])
        }
    }
    assert!(ConstructedCache::<Huge>::new("too big").is_none());
}

struct Bad;
impl Construct for Bad {
    fn construct() -> Self {
        panic!("constructor fails")
    }
}

#[test]
fn panicking_constructor_aborts() {
    if std::env::var_os("SLUICE_ALLOC_CHILD").is_some() {
        let c: ConstructedCache<Bad> = ConstructedCache::new("bad").unwrap();
        let o = c.get();
        println!("survived: {}", o.is_some());
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "panicking_constructor_aborts", "--nocapture", "--test-threads=1"])
        .env("SLUICE_ALLOC_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6), "status {:?}, stderr {}", out.status, err);
    assert!(err.contains("a constructor panicked"), "stderr: {}", err);
}
