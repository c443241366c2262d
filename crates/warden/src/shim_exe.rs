//! Which executable is each run's shim.
//!
//! `warden-shim`, next to warden, when it was built from the same sources
//! (it carries the same build mark): a small executable leaves each run's
//! shim with a fraction of the unshared memory of warden re-executed, and
//! starts sooner. Anything else (no such file, not a regular file, larger
//! than a shim can be, another build) and warden is its own shim, as a
//! library user's program is.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Far above the size of a shim (a release one is under 1 MiB, a debug
/// one under 20 MiB): a larger file is not read.
const MAX_SHIM: u64 = 64 << 20;

/// The shim executable for this process's runs; `None`: warden itself.
pub(crate) fn path() -> Option<PathBuf> {
    static SHIM: OnceLock<Option<PathBuf>> = OnceLock::new();
    SHIM.get_or_init(find).clone()
}

/// How much of the shim is read first. The mark is a constant string,
/// which the linker places with the other constants before the code: in
/// a release shim it sits in the first tens of KiB of a file of more than
/// 700, and each run would otherwise read the whole file.
const HEAD: u64 = 64 << 10;

fn find() -> Option<PathBuf> {
    use warden_run::regular_file;
    let path = std::env::current_exe().ok()?.with_file_name("warden-shim");
    // Only a regular file is read (never a FIFO or a device), and only so
    // far.
    let (head, more) = regular_file::read_head(&path, HEAD).ok()?;
    if warden_process::shim_file_matches(&head) {
        return Some(path);
    }
    if !more {
        return None;
    }
    let bytes = regular_file::read(&path, MAX_SHIM).ok()?;
    warden_process::shim_file_matches(&bytes).then_some(path)
}
