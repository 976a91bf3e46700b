//! Builds sluice's C sources (../../src) into a static library, so that
//! `cargo build` needs nothing but a C compiler: $CC (default cc) compiles
//! each file into OUT_DIR, $AR (default ar) archives them. No crate is
//! needed, so it builds offline. The library is built with SL_OVERRIDE=0:
//! the sl_ names only, so the Rust program's C libraries keep the C
//! library's malloc and only Rust's allocations go to sluice (through
//! `Sluice`, the global allocator).
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir).expect("sluice's src/").map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().map_or(false, |e| e == "c") {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            // cxx.c: C++ operators; fault.c: fault injection, test builds only
            if name != "cxx.c" && name != "fault.c" {
                out.push(p);
            }
        }
    }
}

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("sluice: cannot run {:?}: {}", cmd, e));
    assert!(status.success(), "sluice: {:?} failed: {}", cmd, status);
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let ar = env::var("AR").unwrap_or_else(|_| "ar".into());
    let debug = env::var("PROFILE").map_or(false, |p| p == "debug") && env::var("OPT_LEVEL").map_or(true, |o| o == "0");
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut objects = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let o = out.join(format!("{}-{}.o", i, f.file_stem().unwrap().to_string_lossy()));
        run(Command::new(&cc)
            .args(["-c", "-std=gnu11", "-O2", "-fPIC", "-DSL_OVERRIDE=0", "-fvisibility=hidden"])
            .args(["-ftls-model=initial-exec", "-fno-builtin-malloc", "-fno-builtin-calloc"])
            .args(["-fno-builtin-free", "-fno-builtin-realloc"])
            .args(if debug { &["-g"][..] } else { &[][..] })
            .arg("-I")
            .arg(root.join("include"))
            .arg(f)
            .arg("-o")
            .arg(&o));
        objects.push(o);
    }
    let lib = out.join("libsluice.a");
    let _ = fs::remove_file(&lib);
    run(Command::new(&ar).arg("crs").arg(&lib).args(&objects));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=sluice");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=AR");
    println!("cargo:rerun-if-changed={}", root.join("include").display());
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
}
