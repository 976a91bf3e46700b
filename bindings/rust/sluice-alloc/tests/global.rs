//! sluice as the global allocator of this test program: every Rust
//! allocation below goes through it, under threads that free each other's
//! memory, at every size class, with large alignments and growth.
use std::alloc::{alloc, dealloc, Layout};
use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;

#[global_allocator]
static A: sluice_alloc::Sluice = sluice_alloc::Sluice;

#[test]
fn allocations_go_to_sluice() {
    let before = sluice_alloc::stat("alloc_small");
    let v: Vec<Box<[u8; 100]>> = (0..10_000).map(|_| Box::new([7u8; 100])).collect();
    assert!(sluice_alloc::stat("alloc_small") >= before + 10_000);
    assert!(v.iter().all(|b| b[99] == 7));
}

#[test]
fn threads_free_each_others_memory() {
    let (tx, rx) = mpsc::channel::<Vec<String>>();
    let consumer = thread::spawn(move || {
        let mut n = 0usize;
        for batch in rx {
            n += batch.iter().map(|s| s.len()).sum::<usize>();
        } // each batch freed here, on a thread that did not allocate it
        n
    });
    let producers: Vec<_> = (0..4)
        .map(|t| {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..200 {
                    let batch: Vec<String> = (0..100).map(|k| format!("{t}-{i}-{k}-{}", "x".repeat(k % 300))).collect();
                    tx.send(batch).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    for p in producers {
        p.join().unwrap();
    }
    let total = consumer.join().unwrap();
    assert!(total > 0);
    assert!(sluice_alloc::stat("free_remote") > 0, "cross-thread frees were counted as remote");
}

#[test]
fn maps_grow_and_shrink() {
    let mut m: HashMap<u64, Vec<u64>> = HashMap::new();
    for i in 0..50_000u64 {
        m.entry(i % 5000).or_default().push(i);
    }
    m.retain(|k, _| k % 2 == 0);
    assert_eq!(m.len(), 2500);
    assert!(m.values().all(|v| v.len() == 10));
}

#[test]
fn growth_and_large_buffers() {
    let mut v: Vec<u8> = Vec::new();
    for i in 0..(24 << 20) {
        v.push(i as u8); // realloc through every regime: slab, run, huge
    }
    assert!(v.iter().enumerate().step_by(4099).all(|(i, &b)| b == i as u8));
    let big = vec![1u8; 64 << 20];
    assert_eq!(big[(64 << 20) - 1], 1);
    let z = vec![0u64; 1 << 20]; // alloc_zeroed
    assert!(z.iter().all(|&x| x == 0));
}

#[test]
fn large_alignments() {
    for &align in &[32usize, 64, 4096, 1 << 16, 2 << 20] {
        for &size in &[1usize, 100, 5000, 3 << 20] {
            let l = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = alloc(l);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "align {align} size {size}");
                p.write_bytes(0xab, size);
                dealloc(p, l);
            }
        }
    }
}

#[test]
fn usable_size_and_stats() {
    let b = Box::new([0u8; 1000]);
    assert!(unsafe { sluice_alloc::usable_size(b.as_ptr()) } >= 1000);
    let names: Vec<&str> = sluice_alloc::stats().iter().map(|(n, _)| *n).collect();
    assert!(names.contains(&"alloc_small") && names.contains(&"dirty_bytes"));
    sluice_alloc::purge();
    sluice_alloc::flush();
}
