//! Gives this build of the crate an identity: a hash of its sources and
//! version (`WARDEN_PROCESS_BUILD`). A run's shim may be a separate
//! executable (`warden-shim`); warden uses one only if it was built from
//! the same sources as itself, so a shim left over from an older build is
//! never paired with a newer warden.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let mut all = Vec::new();
    files(&root.join("src"), &mut all);
    all.push(root.join("Cargo.toml"));
    all.sort();
    // SipHash with its fixed keys: the same sources give the same identity.
    let mut h = DefaultHasher::new();
    std::env::var("CARGO_PKG_VERSION").unwrap().hash(&mut h);
    for f in &all {
        f.strip_prefix(&root).unwrap_or(f).hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    println!("cargo:rustc-env=WARDEN_PROCESS_BUILD={:016x}", h.finish());
}
