//! Linux: /proc, prctl, cgroup v2 and signals.

pub mod cgroup;
pub mod procfs;
mod signal;

pub use signal::{Signal, Target, send};

use rustix::process::{Pid, getpid};

/// Makes this process the reaper of its orphaned descendants, so that a
/// double-forked or `setsid` daemon started by the agent is re-parented here
/// and stays findable (and reapable) instead of escaping to init.
pub fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(getpid()))?;
    Ok(())
}

/// The pid of this process, as a plain number.
pub fn own_pid() -> i32 {
    getpid().as_raw_nonzero().get()
}

pub(crate) fn pid(raw: i32) -> Option<Pid> {
    Pid::from_raw(raw)
}

/// Peak resident memory of this process in KiB (`VmHWM`), if readable.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
