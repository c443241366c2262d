//! Linux: /proc, prctl, cgroups (v2, and v1 for limits) and signals.

pub mod cgroup;
pub mod child_exits;
pub mod clone_into;
pub mod limits;
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

/// Marks every file descriptor from `first` up close-on-exec, so that a
/// program started next gets only the ones below (stdin, stdout, stderr):
/// a descriptor warden inherited from its own parent must never reach the
/// agent. Close-on-exec rather than closed, so that a pipe the spawning
/// code still needs until the exec keeps working.
///
/// Async-signal-safe (raw system calls only), for use between fork and
/// exec.
pub fn cloexec_from(first: i32) -> std::io::Result<()> {
    let first = first.max(0) as libc::c_uint;
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes descriptor
    // flags; it takes plain integers and touches no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return Ok(());
    }
    // Kernels before 5.11: one descriptor at a time, up to the limit.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    let top = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        1024
    };
    for fd in first as libc::c_int..top {
        // SAFETY: F_SETFD on a descriptor that may not exist fails with
        // EBADF and changes nothing.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}

/// Gives up the controlling terminal, if this process has one, so that
/// opening `/dev/tty` fails (ENXIO) and nothing can stop it for reading
/// the terminal or write over what the terminal shows.
///
/// `TIOCNOTTY` rather than `setsid()`: the process stays in its session
/// (a new session would also be a new scheduling autogroup, which changes
/// how much CPU the run gets next to everything else). It does not lead a
/// session, so it can never acquire a terminal again; nor can its
/// children, unless they start a session of their own and open a
/// terminal no session holds.
///
/// Async-signal-safe (raw system calls only), for use between fork and
/// exec.
pub fn drop_controlling_terminal() {
    // SAFETY: open with a static NUL-terminated path, ioctl TIOCNOTTY
    // (no argument) and close on the descriptor just opened: raw system
    // calls that touch no memory of ours but the path.
    unsafe {
        let fd = libc::open(
            c"/dev/tty".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::ioctl(fd, libc::TIOCNOTTY);
            libc::close(fd);
        }
    }
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
    let status = procfs::read_small("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time (user + system, all threads) this process has used so far.
pub fn cpu_time() -> Option<std::time::Duration> {
    let stat = procfs::read_small("/proc/self/stat").ok()?;
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
