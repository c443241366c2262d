//! `warden-shim`: the process between warden and the agent of one run.
//!
//! The same code as `warden __warden-shim` (see
//! `warden_process::run_if_shim`), in a small executable of its own:
//! every run keeps its shim alive as long as it lasts, and the loader
//! writes far fewer relocated pointers into a small executable than into
//! the whole of warden (its unshared memory is a fraction), which also
//! starts sooner. warden uses it only when it sits next to warden and
//! carries the same build mark; otherwise warden is its own shim.

#![forbid(unsafe_code)]

/// The mark warden looks for in this file (kept by the linker).
#[used]
static MARK: &str = warden_process::SHIM_MARK;

fn main() {
    warden_process::run_if_shim();
    eprintln!("warden-shim: only warden starts this program, once per run ({MARK})");
    std::process::exit(2);
}
