//! The `check` feature: the allocator starts in checked mode (an exact
//! usable size, an overflow of one byte reported at free and the process
//! aborted), and SLUICE_CHECK=0 in the environment still turns it off.
//! Without the feature, the default mode (and this file checks that too).
use std::alloc::{alloc, dealloc, Layout};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

#[global_allocator]
static A: sluice_alloc::Sluice = sluice_alloc::Sluice;

fn child(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"]).env("SLUICE_ALLOC_CHILD", "1").env_remove("SLUICE_CHECK");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn in_child() -> bool {
    std::env::var_os("SLUICE_ALLOC_CHILD").is_some()
}

#[test]
fn mode() {
    if in_child() {
        println!("check={:?}", sluice_alloc::option("check"));
        let b = Box::new([0u8; 100]);
        println!("usable={}", unsafe { sluice_alloc::usable_size(b.as_ptr()) });
        return;
    }
    let on = cfg!(feature = "check");
    let out = String::from_utf8(child("mode", &[]).stdout).unwrap();
    assert!(out.contains(&format!("check=Some({})", on as i64)), "{}", out);
    // checked mode: the usable size is the size asked
    assert_eq!(out.contains("usable=100\n"), on, "{}", out);
    let out = String::from_utf8(child("mode", &[("SLUICE_CHECK", "0")]).stdout).unwrap();
    assert!(out.contains("check=Some(0)"), "the environment wins: {}", out);
    assert_eq!(sluice_alloc::option("no such option"), None);
}

#[test]
fn overflow_reported() {
    if in_child() {
        unsafe {
            let l = Layout::from_size_align(100, 8).unwrap();
            let p = alloc(l);
            *p.add(100) = 1; // one byte past the end (within the block's slack)
            dealloc(p, l);
        }
        println!("freed");
        return;
    }
    let out = child("overflow_reported", &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    if cfg!(feature = "check") {
        assert_eq!(out.status.signal(), Some(6), "status {:?}, stderr {}", out.status, err);
        assert!(err.contains("heap buffer overflow"), "stderr: {}", err);
    } else {
        assert!(out.status.success(), "status {:?}, stderr {}", out.status, err);
    }
}
