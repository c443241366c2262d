//! A cgroup v2 of its own for one run, where the system lets us make one.
//!
//! With a cgroup, every process of the run is listed by the kernel
//! (`cgroup.procs`), including ones that changed their process group or
//! session, and `cgroup.kill` SIGKILLs all of them at once, forks racing the
//! kill included. It needs a writable cgroup v2 hierarchy (root, a delegated
//! subtree, or a container with its own cgroup namespace); where there is
//! none, warden falls back to the subreaper alone and says so in the report.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A cgroup created for one run. Removed by [`Cgroup::remove`].
#[derive(Debug, Clone)]
pub struct Cgroup {
    dir: PathBuf,
}

/// What a run's cgroup is named after: `<name>.<pid>.<start>`, the pid and
/// start time of the warden that made it, so that a later warden can tell
/// one whose owner is gone from one that is still in use.
const OWNER_SEP: char = '.';

impl Cgroup {
    /// Creates `<our cgroup>/<name>.<pid>.<start>`, or says why it cannot.
    pub fn create(name: &str) -> io::Result<Self> {
        let parent = own_cgroup_dir()?;
        let dir = parent.join(owned_name(name));
        fs::create_dir(&dir)?;
        let cg = Self { dir };
        if !cg.dir.join("cgroup.kill").exists() {
            cg.remove();
            return Err(io::Error::other(
                "cgroup.kill is missing (needs Linux 5.14 or later)",
            ));
        }
        Ok(cg)
    }

    /// The cgroup a process belongs to, to move it back to (the parent of a
    /// run's cgroup).
    pub fn parent(&self) -> Option<Self> {
        self.dir.parent().map(Self::open)
    }

    /// Moves the calling process into this cgroup.
    pub fn join(&self) -> io::Result<()> {
        fs::write(self.procs_file(), "0")
    }

    /// The cgroup's directory, open: what `clone3` takes to start a child
    /// inside it.
    pub fn open_dir(&self) -> io::Result<std::os::fd::OwnedFd> {
        use rustix::fs::{Mode, OFlags};
        Ok(rustix::fs::open(
            &self.dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// Opens an existing run cgroup by path (used by the shim).
    pub fn open(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The file a process writes `0` to, to join this cgroup.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The pids in the cgroup now.
    pub fn pids(&self) -> Vec<i32> {
        fs::read_to_string(self.procs_file())
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Whether `pid` is in this cgroup.
    pub fn contains(&self, pid: i32) -> bool {
        self.pids().contains(&pid)
    }

    /// The cgroup `pid` is in, if it is somewhere else than in this one
    /// (or below it): a process that moved itself out.
    pub fn outside(&self, pid: i32) -> Option<PathBuf> {
        let dir = cgroup_dir_of(&format!("/proc/{pid}/cgroup")).ok()?;
        (!dir.starts_with(&self.dir)).then_some(dir)
    }

    /// SIGKILLs every process in the cgroup.
    pub fn kill(&self) -> io::Result<()> {
        fs::write(self.dir.join("cgroup.kill"), "1")
    }

    /// Removes the cgroup. It must be empty; a process that was just killed
    /// can take a moment to leave, so this retries briefly.
    pub fn remove(&self) -> bool {
        for _ in 0..50 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        }
        false
    }
}

/// `<name>.<pid>.<start>`: the name of a run's cgroup, in the v2 tree and
/// in each v1 hierarchy a limit needs, after this warden.
pub fn owned_name(name: &str) -> String {
    let me = super::own_pid();
    let start = own_start(me);
    format!("{name}{OWNER_SEP}{me}{OWNER_SEP}{start}")
}

/// Removes the run cgroups under `parent` that warden left behind when it
/// and its shim were killed outright: `warden-*` cgroups whose owner is
/// gone and that hold no process (their sub-cgroups included). Never one
/// of a warden that still runs, and never one with a process in it.
/// Returns the ones removed.
pub fn remove_stale(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.starts_with("warden-") || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let mut parts = name.rsplitn(3, OWNER_SEP);
        let (Some(start), Some(pid), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(start), Ok(pid)) = (start.parse::<u64>(), pid.parse::<i32>()) else {
            continue;
        };
        // This warden's own runs are the many siblings of a big batch:
        // known alive without reading /proc for each, at each run's start.
        let me = super::own_pid();
        let owner_alive = if pid == me && start == own_start(me) {
            true
        } else {
            super::procfs::entry(pid).is_some_and(|e| e.start == start)
        };
        if owner_alive || populated(&dir) {
            continue;
        }
        if remove_tree(&dir) {
            removed.push(dir);
        }
    }
    removed
}

/// The start time of this process (`me`), read from /proc once: every
/// run's cgroup is named after it, and a batch makes hundreds. Kept with
/// the pid it belongs to, so a forked child reads its own.
fn own_start(me: i32) -> u64 {
    use std::sync::Mutex;
    static OWN: Mutex<Option<(i32, u64)>> = Mutex::new(None);
    let mut own = OWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match *own {
        Some((pid, start)) if pid == me => start,
        _ => {
            let start = super::procfs::entry(me).map_or(0, |e| e.start);
            if start != 0 {
                *own = Some((me, start));
            }
            start
        }
    }
}

/// Whether a cgroup or any cgroup below it holds a process.
fn populated(dir: &Path) -> bool {
    match fs::read_to_string(dir.join("cgroup.events")) {
        Ok(events) => events.lines().any(|l| l == "populated 1"),
        // A cgroup v1 (made for a limit) has no `cgroup.events`: its
        // members, and those of the cgroups below it, say.
        Err(_) => match fs::read_to_string(dir.join("cgroup.procs")) {
            Ok(procs) if procs.trim().is_empty() => fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_type().is_ok_and(|t| t.is_dir()) && populated(&e.path()))
            }),
            // Members, or cannot tell: leave it alone.
            _ => true,
        },
    }
}

/// Removes an empty cgroup and the empty cgroups below it, deepest first.
fn remove_tree(dir: &Path) -> bool {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    fs::remove_dir(dir).is_ok()
}

/// The directory of the cgroup v2 this process is in: the parent of every
/// run cgroup it makes. Read from /proc once (two files, the mount table
/// the longer): each run's start asks, twice, and a batch starts hundreds.
/// Kept with the pid it belongs to, so a forked child reads its own.
pub fn own_cgroup_dir() -> io::Result<PathBuf> {
    use std::sync::Mutex;
    static OWN: Mutex<Option<(i32, PathBuf)>> = Mutex::new(None);
    let me = super::own_pid();
    let mut own = OWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((pid, dir)) = &*own
        && *pid == me
    {
        return Ok(dir.clone());
    }
    let dir = cgroup_dir_of("/proc/self/cgroup")?;
    *own = Some((me, dir.clone()));
    Ok(dir)
}

/// The directory of the cgroup v2 named in a `/proc/PID/cgroup` file.
fn cgroup_dir_of(file: &str) -> io::Result<PathBuf> {
    let cgroups = super::procfs::read_small(file)?;
    let own = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| io::Error::other("this process is in no cgroup v2"))?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
    let (root, mount_point) = mountinfo
        .lines()
        .find_map(cgroup2_mount)
        .ok_or_else(|| io::Error::other("no cgroup v2 file system is mounted"))?;
    let rel = own.strip_prefix(root.as_str()).unwrap_or(own);
    Ok(Path::new(&mount_point).join(rel.trim_start_matches('/')))
}

/// `(root, mount point)` if a mountinfo line is a cgroup2 mount.
fn cgroup2_mount(line: &str) -> Option<(String, String)> {
    let (left, right) = line.split_once(" - ")?;
    if right.split_whitespace().next()? != "cgroup2" {
        return None;
    }
    let mut f = left.split_whitespace();
    let root = f.nth(3)?;
    let mount_point = f.next()?;
    Some((unescape(root), unescape(mount_point)))
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_line_for_cgroup2_is_recognised() {
        let line = "35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw";
        assert_eq!(
            cgroup2_mount(line),
            Some(("/".into(), "/sys/fs/cgroup/unified".into()))
        );
        let v1 = "36 25 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu";
        assert_eq!(cgroup2_mount(v1), None);
    }
}
