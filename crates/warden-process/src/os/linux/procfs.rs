//! Reading the process table from /proc.
//!
//! Used to find every process that descends from a run's shim (the run's
//! processes when no cgroup is available), to name processes in the report
//! (their command lines), and to find which processes still hold a pipe.

use std::collections::HashSet;
use std::fs;

/// One entry of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcEntry {
    pub pid: i32,
    pub ppid: i32,
    /// `Z` for a zombie: dead, only waiting to be reaped; `T` stopped.
    pub state: u8,
    /// The process group.
    pub pgid: i32,
    /// The controlling terminal (0 for none).
    pub tty: i32,
    /// The foreground process group of that terminal (-1 without one).
    pub tpgid: i32,
    /// When the process started, in clock ticks since boot: with the pid,
    /// it names one process (pids are reused, this pair is not).
    pub start: u64,
}

impl ProcEntry {
    /// Stopped (by a signal or a tracer): it cannot run, and so cannot fork.
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, b'T' | b't')
    }

    /// Dead: a zombie or on its way out.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Every process visible in /proc, skipping ones that vanish while read.
pub fn processes() -> Vec<ProcEntry> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(e) = read_stat(pid, &mut buf) {
            out.push(e);
        }
    }
    out
}

/// The stat line of one process, if it still exists.
pub fn entry(pid: i32) -> Option<ProcEntry> {
    read_stat(pid, &mut Vec::new())
}

/// A small /proc file, read whole. /proc files say they are empty, so a
/// plain `read_to_string` starts with a 32-byte read and doubles from
/// there: 7 reads for /proc/self/status. With room for the whole file
/// first, it takes one read and the one that sees the end.
pub(crate) fn read_small(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::with_capacity(4096);
    fs::File::open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

fn read_stat(pid: i32, buf: &mut Vec<u8>) -> Option<ProcEntry> {
    use std::io::Read;
    buf.clear();
    // Room for the whole file, so it is read in one go (see `read_small`).
    buf.reserve(1024);
    fs::File::open(format!("/proc/{pid}/stat"))
        .ok()?
        .read_to_end(buf)
        .ok()?;
    parse_stat(pid, buf)
}

/// Parses `/proc/PID/stat`. The command name is in parentheses and may hold
/// spaces, parentheses and bytes that are not UTF-8 (the kernel cuts it at
/// 15 bytes, even inside a character), so fields are read as bytes from
/// the last `)`: a process with an odd name must not become invisible.
fn parse_stat(pid: i32, stat: &[u8]) -> Option<ProcEntry> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.bytes().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    let _session = fields.next()?;
    let tty = fields.next()?.parse().ok()?;
    let tpgid = fields.next()?.parse().ok()?;
    // Fields 9 to 21, then the start time (field 22).
    let start = fields.nth(13)?.parse().ok()?;
    Some(ProcEntry {
        pid,
        ppid,
        state,
        pgid,
        tty,
        tpgid,
        start,
    })
}

/// The live (non-zombie) descendants of `root`, not including `root`,
/// parents before children. Walked down from `root` through each
/// process's children lists rather than a scan of all of /proc: the cost
/// is the run's own processes, not every process on the machine. Like
/// any listing of a tree that is still running, it is a snapshot: a
/// process forked or re-parented while it is read may be missed (the
/// sweep, which must be complete, freezes the tree first).
pub fn live_descendants(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for child in children(parent) {
            if !seen.insert(child) {
                continue;
            }
            queue.push(child);
            if entry(child).is_some_and(|e| e.state != b'Z') {
                out.push(child);
            }
        }
    }
    out
}

/// The direct children of `pid`, from every one of its threads (a child
/// is listed under the thread that forked it; an orphan under the thread
/// the kernel picked). Much cheaper than a scan of all of /proc.
pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(list) = read_small(task.path().join("children")) {
            out.extend(
                list.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// The live members of process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    // A group with no member at all (the usual end of a run) is answered
    // by the kernel at once; only one that still has members (live, or
    // zombies, or not ours to signal) costs a scan of all of /proc.
    if let Some(group) = rustix::process::Pid::from_raw(pgid)
        && rustix::process::test_kill_process_group(group) == Err(rustix::io::Errno::SRCH)
    {
        return Vec::new();
    }
    processes()
        .into_iter()
        .filter(|p| p.pgid == pgid && p.state != b'Z')
        .map(|p| p.pid)
        .collect()
}

/// Whether `pid` exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    entry(pid).is_some_and(|e| e.state != b'Z')
}

/// The command line of a process, arguments joined by spaces; the bracketed
/// command name for kernel-style processes with an empty command line.
pub fn cmdline(pid: i32) -> String {
    match fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(raw) if !raw.is_empty() => {
            let parts: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            parts.join(" ")
        }
        _ => fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| format!("[{}]", c.trim_end()))
            .unwrap_or_default(),
    }
}

/// Whether `pid` has an open file descriptor on one of the pipes whose
/// inode numbers are given.
pub fn holds_pipe(pid: i32, inodes: &[u64]) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        fs::read_link(fd.path()).is_ok_and(|target| {
            target
                .to_str()
                .and_then(|t| t.strip_prefix("pipe:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|ino| inodes.contains(&ino))
        })
    })
}

/// Every live process other than `except` that holds one of the pipes.
pub fn pipe_holders(inodes: &[u64], except: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|p| p.pid != except && p.state != b'Z' && holds_pipe(p.pid, inodes))
        .map(|p| p.pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parens_in_name_parses() {
        let tail = b" 4194560 1 2 3 4 5 6 7 8 20 0 1 0 777 1 2";
        let line = [&b"7 (a) b (c)) S 42 7 7 34816 7 "[..], &tail[..]].concat();
        let e = parse_stat(7, &line).unwrap();
        assert_eq!(
            e,
            ProcEntry {
                pid: 7,
                ppid: 42,
                state: b'S',
                pgid: 7,
                tty: 34816,
                tpgid: 7,
                start: 777,
            }
        );
        // A name cut inside a multi-byte character.
        let line = [&b"8 (\xd0\xbf\xd1\x80\xd0) S 9 8 8 0 -1 "[..], &tail[..]].concat();
        let e = parse_stat(8, &line).unwrap();
        assert_eq!(e.ppid, 9);
    }

    #[test]
    fn own_process_is_found_with_its_parent() {
        let me = std::process::id() as i32;
        let e = entry(me).expect("own stat");
        assert_eq!(e.ppid as u32, std::os::unix::process::parent_id());
        assert!(cmdline(me).contains("warden_process"));
    }

    #[test]
    fn child_is_a_live_descendant_and_holds_its_pipe() {
        use std::os::unix::fs::MetadataExt;
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let me = std::process::id() as i32;
        assert!(live_descendants(me).contains(&pid));
        let ino = fs::metadata(format!("/proc/{me}/fd/{}", {
            use std::os::fd::AsRawFd;
            child.stdout.as_ref().unwrap().as_raw_fd()
        }))
        .unwrap()
        .ino();
        assert!(holds_pipe(pid, &[ino]));
        assert!(pipe_holders(&[ino], me).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_alive(pid));
    }

    #[test]
    fn own_cpu_time_grows_with_work() {
        // Work until the counter shows 30 ms more, for as long as a loaded
        // machine needs to give this thread that much CPU (bounded, so a
        // counter that never moves fails rather than hangs).
        let before = crate::os::cpu_time().expect("readable");
        let want = before + std::time::Duration::from_millis(30);
        let t = std::time::Instant::now();
        let mut x = 0u64;
        let mut after = before;
        while after < want && t.elapsed() < std::time::Duration::from_secs(30) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            after = crate::os::cpu_time().unwrap();
        }
        assert!(
            after >= want,
            "{before:?} -> {after:?} in {:?}",
            t.elapsed()
        );
    }
}
