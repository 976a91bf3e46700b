//! Builds sluice's C sources into a static library with the C compiler
//! alone (no crate: it builds offline). The sources are `sluice/` in this
//! crate when present (the published package: package.sh copies them
//! there), else the repository's own `../../../src` and `include`.
//!
//! The compiler is `$CC_<target>`, `$TARGET_CC` or `$CC` (default `cc`),
//! the archiver the same with AR (default `ar`), as the `cc` crate reads
//! them; `$CFLAGS` is added. Files compile in parallel, up to cargo's
//! NUM_JOBS. The library is built with SL_OVERRIDE=0: the sl_ names only,
//! so the program's C libraries keep the C library's malloc. The `check`
//! feature builds it with SL_CHECK_DEFAULT=1: checked mode on unless
//! SLUICE_CHECK=0 says otherwise.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("sluice: cannot read {}: {}", dir.display(), e))
        .map(|e| e.unwrap().path())
        .collect();
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

/// `$NAME_<target>`, `$TARGET_NAME`, `$NAME`, else `default`.
fn tool(name: &str, default: &str) -> String {
    let target = env::var("TARGET").unwrap_or_default();
    for var in [format!("{}_{}", name, target), format!("{}_{}", name, target.replace('-', "_")), format!("TARGET_{}", name), name.to_string()] {
        println!("cargo:rerun-if-env-changed={}", var);
        if let Ok(v) = env::var(&var) {
            if !v.is_empty() {
                return v;
            }
        }
    }
    default.to_string()
}

fn wait(cmd: &str, mut child: Child) {
    let status = child.wait().unwrap_or_else(|e| panic!("sluice: {}: {}", cmd, e));
    assert!(status.success(), "sluice: {} failed: {}", cmd, status);
}

fn main() {
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let vendored = here.join("sluice");
    let repo = here.join("../../..");
    let root = if vendored.join("src").is_dir() { vendored } else { repo.clone() };
    if root != repo && repo.join("src/api/malloc.c").is_file() {
        println!("cargo:warning=building from the copy in sluice-alloc-sys/sluice (package.sh's), not from the repository's src/: remove it");
    }
    assert!(
        root.join("src/api/malloc.c").is_file(),
        "sluice: no C sources in {} (a package made without package.sh?)",
        root.display()
    );
    if env::var("CARGO_CFG_TARGET_OS").map_or(false, |os| os != "linux") {
        panic!("sluice: the allocator runs on Linux only");
    }
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let cc = tool("CC", "cc");
    let ar = tool("AR", "ar");
    let cflags: Vec<String> = env::var("CFLAGS").unwrap_or_default().split_whitespace().map(String::from).collect();
    let debug = env::var("PROFILE").map_or(false, |p| p == "debug") && env::var("OPT_LEVEL").map_or(true, |o| o == "0");
    let check = env::var_os("CARGO_FEATURE_CHECK").is_some();
    let jobs: usize = env::var("NUM_JOBS").ok().and_then(|j| j.parse().ok()).unwrap_or(1).max(1);

    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut objects = Vec::new();
    let mut running: Vec<(String, Child)> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let o = out.join(format!("{}-{}.o", i, f.file_stem().unwrap().to_string_lossy()));
        let mut cmd = Command::new(&cc);
        cmd.args(["-c", "-std=gnu11", "-O2", "-fPIC", "-DSL_OVERRIDE=0", "-fvisibility=hidden"])
            .args(["-ftls-model=initial-exec", "-fno-builtin-malloc", "-fno-builtin-calloc"])
            .args(["-fno-builtin-free", "-fno-builtin-realloc"])
            .args(if debug { &["-g"][..] } else { &[][..] })
            .args(if check { &["-DSL_CHECK_DEFAULT=1"][..] } else { &[][..] })
            .args(&cflags)
            .arg("-I")
            .arg(root.join("include"))
            .arg(f)
            .arg("-o")
            .arg(&o);
        let shown = format!("{} {}", cc, f.display());
        let child = cmd.spawn().unwrap_or_else(|e| panic!("sluice: cannot run {}: {}", cc, e));
        running.push((shown, child));
        if running.len() >= jobs {
            let (shown, child) = running.remove(0);
            wait(&shown, child);
        }
        objects.push(o);
    }
    for (shown, child) in running {
        wait(&shown, child);
    }
    let lib = out.join("libsluice.a");
    let _ = fs::remove_file(&lib);
    let archive = Command::new(&ar).arg("crs").arg(&lib).args(&objects).spawn();
    wait(&format!("{} crs", ar), archive.unwrap_or_else(|e| panic!("sluice: cannot run {}: {}", ar, e)));

    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=sluice");
    println!("cargo:rustc-link-lib=pthread");
    // for crates that build C against sluice: DEP_SLUICE_INCLUDE
    println!("cargo:include={}", root.join("include").display());
    println!("cargo:rerun-if-env-changed=CFLAGS");
    // folders: cargo scans them whole (a changed header rebuilds); this
    // crate's own, for a vendored copy that appears or goes
    println!("cargo:rerun-if-changed={}", root.join("include").display());
    println!("cargo:rerun-if-changed={}", root.join("src").display());
    println!("cargo:rerun-if-changed={}", here.display());
}
