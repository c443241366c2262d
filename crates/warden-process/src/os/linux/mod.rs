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

/// CPU time (user + system, all threads) this process has used so far.
pub fn cpu_time() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name: state is field 3; utime and stime are
    // fields 14 and 15, in clock ticks.
    let mut fields = stat[stat.rfind(')')? + 1..].split_ascii_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Some(std::time::Duration::from_millis(
        (utime + stime) * 1000 / hz,
    ))
}
