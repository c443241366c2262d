//! Links the `warden` executable as a fixed-address (non-PIE) program on
//! Linux with glibc.
//!
//! Every run re-executes this binary as its shim, which then lives as long
//! as the run. A position-independent executable is relocated at each
//! start: the loader writes the run-time address into every pointer of its
//! read-only-after-relocation data (vtables, static tables: about 330 KiB
//! here), and each page it writes becomes the shim's own memory. Linked at
//! a fixed address those pages stay shared with the page cache (and with
//! every other shim): the shim's unshared memory drops from about 490 KiB
//! to about 165 KiB (`cargo bench -p warden --bench startup` prints it).
//!
//! The cost: the executable's own code and data are not placed at a random
//! address (the libraries, heap and stacks still are). Delete this file to
//! go back to a position-independent executable.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // musl targets link statically (static-pie): leave them as they are.
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
