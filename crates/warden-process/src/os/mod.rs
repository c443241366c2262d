//! Everything that talks to the operating system about processes.
//!
//! The rest of warden never sees a `#[cfg]`: it calls these functions, and a
//! port to another platform provides the same names here.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(not(target_os = "linux"))]
compile_error!(
    "warden supports Linux only for now: process containment needs /proc, prctl and cgroups"
);
