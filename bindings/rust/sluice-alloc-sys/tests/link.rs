//! Every function of sluice.h is declared here and links (the static
//! library exports it), and the basic calls work through the raw names.
use sluice_alloc_sys::*;
use std::ffi::CString;
use std::ptr;

#[test]
fn every_function_links() {
    let fns: [*const (); 33] = [
        sl_malloc as *const (), sl_calloc as *const (), sl_realloc as *const (), sl_reallocarray as *const (),
        sl_free as *const (), sl_free_sized as *const (), sl_free_aligned_sized as *const (),
        sl_aligned_alloc as *const (), sl_posix_memalign as *const (), sl_memalign as *const (),
        sl_valloc as *const (), sl_pvalloc as *const (), sl_usable_size as *const (), sl_alloc_bulk as *const (),
        sl_free_bulk as *const (), sl_cache_create as *const (), sl_cache_alloc as *const (),
        sl_cache_free as *const (), sl_cache_alloc_bulk as *const (), sl_cache_free_bulk as *const (),
        sl_cache_shrink as *const (), sl_cache_destroy as *const (), sl_cache_set_reclaim as *const (),
        sl_cache_stats as *const (), sl_prof_dump as *const (),
        sl_purge as *const (), sl_flush as *const (), sl_check as *const (), sl_stat as *const (),
        sl_ctl as *const (), sl_stat_name as *const (), sl_stats_print as *const (), sl_stats_json as *const (),
    ];
    assert!(fns.iter().all(|f| !f.is_null()));
    // as many as the header declares
    let header = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../include/sluice.h"));
    assert_eq!(header.matches("SL_API ").count() - 1, fns.len(), "a function of sluice.h is missing here");
}

#[test]
fn raw_calls() {
    unsafe {
        let p = sl_malloc(100) as *mut u8;
        assert!(!p.is_null() && sl_usable_size(p as _) >= 100);
        sl_free(p as _);
        let name = CString::new("raw").unwrap();
        let c = sl_cache_create(name.as_ptr(), 24, 8, SL_CACHE_RECLAIMABLE, None);
        assert!(!c.is_null());
        let o = sl_cache_alloc(c);
        assert!(!o.is_null());
        sl_cache_free(c, o);
        let mut st: sl_cache_stats = std::mem::zeroed();
        st.size = std::mem::size_of::<sl_cache_stats>();
        assert_eq!(sl_cache_stats(c, &mut st), 0);
        assert!(st.object_size >= 24); // its stride in the slab
        assert_eq!((st.allocations, st.frees, st.objects_active), (1, 1, 0));
        sl_cache_destroy(c);
        let mut v: i64 = -1;
        let mut len = std::mem::size_of::<i64>();
        let opt = CString::new("opt.check").unwrap();
        assert_eq!(sl_ctl(opt.as_ptr(), &mut v as *mut i64 as _, &mut len, ptr::null(), 0), 0);
        assert!(v == 0 || v == 1);
    }
}
