//! What the kernel did at a container's limits, read from the cgroups its
//! engine made for it.
//!
//! The container's processes are the engine's, in cgroups warden did not
//! make and cannot keep: the engine removes them as the container stops,
//! and with them their counters. So the counters are read while the
//! container lives. Its init's pid comes from the engine (`inspect`), its
//! cgroups from `/proc/PID/cgroup` and this process's mountinfo (no path
//! is guessed: a cgroup namespace, a systemd driver or a hybrid host all
//! say where they are there), taken only if they are named after the
//! container's id, as both engines name them (warden in a pid namespace of
//! its own would otherwise read some other process's). Then:
//!
//! - the memory limit's OOM kills (`memory.oom_control` on v1,
//!   `memory.events` on v2) are read when the kernel says an OOM happened
//!   (v1: an eventfd on `memory.oom_control`, which fires as the OOM
//!   starts, just before the kill; v2: inotify on `memory.events`), and
//!   again every few milliseconds until the count moves or the cgroup is
//!   gone. An OOM kill of the container's last process ends the container
//!   a few tens of milliseconds later (measured: 25-75 ms under Docker,
//!   200-280 ms under Podman), well after that read;
//! - refused forks (`pids.events`, key `max`) are read every
//!   [`PIDS_EVERY`] (v1's file tells no one when it changes), on each
//!   wake-up, and a last time before warden removes the container.
//!
//! Nothing of this runs unless a memory or process limit was asked for.
//! What was never read (the container ended before its cgroups were
//! found) is not known: the report says `null`, not 0.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warden_process::os::limits::{Mounts, events_at};
use warden_process::resources::{Controller, ResourceLimits};

/// How often refused forks are read while the container runs.
const PIDS_EVERY: Duration = Duration::from_millis(100);
/// How often the memory counters are read without a wake-up from the
/// kernel (only if none could be set up, or as a safety net).
const MEMORY_EVERY: Duration = Duration::from_secs(1);
/// After an OOM wake-up: how often, and for how long, the kill is looked for.
const AFTER_WAKE_EVERY: Duration = Duration::from_millis(2);
const AFTER_WAKE_FOR: Duration = Duration::from_millis(300);
/// The engine's `inspect` may be asked before the container exists:
/// asked again after this, doubling, up to [`FIND_AT_MOST`].
const FIND_FIRST: Duration = Duration::from_millis(50);
const FIND_AT_MOST: Duration = Duration::from_millis(500);
/// One `inspect` of a daemon that hangs is given up after this.
const INSPECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What was counted at a container's limits; `None` where the limit's
/// cgroup was never read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    /// OOM kills, and those of them at the container's own limit.
    pub memory: Option<(u64, u64)>,
    /// Forks refused at the process limit.
    pub pids: Option<u64>,
}

/// The watch of one container's limits: a thread of its own (it waits on
/// the engine and on the kernel, never on the run's clocks).
pub(crate) struct ContainerWatch {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
    /// Readable once the watch is to stop: wakes its thread at once.
    stop_fd: Option<OwnedFd>,
}

impl Shared {
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(fd) = &self.stop_fd {
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Waits at most `timeout` for `wake` to be readable (`true`) or for
    /// the watch to stop.
    fn wait(&self, wake: Option<&OwnedFd>, timeout: Duration) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = Vec::with_capacity(2);
        if let Some(fd) = wake {
            fds.push(PollFd::new(fd, PollFlags::IN));
        }
        if let Some(fd) = &self.stop_fd {
            fds.push(PollFd::new(fd, PollFlags::IN));
        }
        if fds.is_empty() {
            std::thread::sleep(timeout);
            return false;
        }
        let timeout = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let _ = poll(&mut fds, Some(&timeout));
        wake.is_some() && !fds[0].revents().is_empty()
    }
}

#[derive(Default)]
struct State {
    /// The container's memory and pids cgroups, once found.
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
    counted: Counted,
}

impl State {
    /// Reads the counters now; what cannot be read (the cgroup went)
    /// changes nothing. Returns whether a cgroup is still there.
    fn sample(&mut self) -> bool {
        let mut there = false;
        if let Some(dir) = &self.memory
            && dir.is_dir()
        {
            let ev = events_at(std::slice::from_ref(dir), &[]);
            if dir.is_dir() {
                there = true;
                let (kills, at) = self.counted.memory.unwrap_or_default();
                let kills = kills.max(ev.oom_kills);
                let at = at.max(ev.oom_at_limit.min(ev.oom_kills));
                self.counted.memory = Some((kills, at));
            }
        }
        if let Some(dir) = &self.pids
            && dir.is_dir()
        {
            let ev = events_at(&[], std::slice::from_ref(dir));
            if dir.is_dir() {
                there = true;
                self.counted.pids = Some(self.counted.pids.unwrap_or(0).max(ev.pids_max));
            }
        }
        there
    }
}

impl ContainerWatch {
    /// Starts watching the container `name` of `engine` (`docker`,
    /// `podman`) for the limits in `limits`; `None` without a memory or
    /// process limit (then nothing is counted, nothing costs).
    pub(crate) fn start(
        engine: &'static str,
        name: String,
        limits: &ResourceLimits,
    ) -> Option<Self> {
        let memory = limits.memory.is_some();
        let pids = limits.pids.is_some();
        if !memory && !pids {
            return None;
        }
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            stop: AtomicBool::new(false),
            stop_fd: rustix::event::eventfd(
                0,
                rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
            )
            .ok(),
        });
        let inner = shared.clone();
        let thread = std::thread::Builder::new()
            .name("container-limits".into())
            .spawn(move || watch(&inner, engine, &name, memory, pids))
            .ok();
        Some(Self { shared, thread })
    }

    /// Reads the counters now (before warden stops or removes the
    /// container, which takes its cgroups with it).
    pub(crate) fn sample(&self) {
        if let Ok(mut s) = self.shared.state.lock() {
            s.sample();
        }
    }

    /// Reads the counters a last time, stops the watch and says what was
    /// counted. Waits a moment for a read in progress (after an OOM); not
    /// for an `inspect` still looking for the container, which can only
    /// find it gone.
    pub(crate) async fn finish(mut self) -> Counted {
        self.sample();
        self.shared.stop();
        let found = self
            .shared
            .state
            .lock()
            .is_ok_and(|s| s.memory.is_some() || s.pids.is_some());
        if let Some(thread) = self.thread.take().filter(|_| found) {
            let join = tokio::task::spawn_blocking(move || thread.join());
            let _ = tokio::time::timeout(AFTER_WAKE_FOR + PIDS_EVERY * 2, join).await;
        }
        self.shared
            .state
            .lock()
            .map(|s| s.counted)
            .unwrap_or_default()
    }
}

impl Drop for ContainerWatch {
    fn drop(&mut self) {
        self.shared.stop();
    }
}

/// The watch's thread: finds the container's cgroups, then reads them
/// until they are gone or the run ends.
fn watch(shared: &Shared, engine: &str, name: &str, memory: bool, pids: bool) {
    let mut wait = FIND_FIRST;
    let pid = loop {
        if shared.stopped() {
            return;
        }
        if let Some(found) = init_pid(engine, name) {
            break found;
        }
        shared.wait(None, wait);
        wait = (wait * 2).min(FIND_AT_MOST);
    };
    let (pid, id) = pid;
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let Ok(proc_cgroup) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return;
    };
    let dirs = CgroupDirs::parse(&read("/proc/self/mountinfo"), &proc_cgroup);
    // The engine's pid is in its own pid namespace: from another (warden
    // in a container of its own) it is some other process, whose cgroups
    // are not the container's. Both engines name a container's cgroups
    // after its id.
    let of = |c: Controller| {
        dirs.of(c)
            .filter(|d| d.to_string_lossy().contains(id.as_str()))
    };
    let memory_dir = memory.then(|| of(Controller::Memory)).flatten();
    let pids_dir = pids.then(|| of(Controller::Pids)).flatten();
    let wake = memory_dir.as_deref().and_then(oom_wake_up);
    {
        let Ok(mut s) = shared.state.lock() else {
            return;
        };
        s.memory = memory_dir;
        s.pids = pids_dir.clone();
        if !s.sample() {
            return;
        }
    }
    let every = if pids_dir.is_some() {
        PIDS_EVERY
    } else {
        MEMORY_EVERY
    };
    let mut last_read = Instant::now();
    let mut oom_events = memory_dir_events(shared);
    loop {
        let woken = shared.wait(wake.as_ref(), every);
        if shared.stopped() {
            return;
        }
        let Ok(mut s) = shared.state.lock() else {
            return;
        };
        if woken {
            drain(wake.as_ref());
            // v1 says so as the OOM starts, before the kill: the kill is
            // looked for until it shows or the cgroup goes. v2's
            // `memory.events` also changes at `max` and `high`, which a
            // run at its limit reaches often: looked for only when its
            // `oom` moved.
            let oom_now = s.memory.as_deref().and_then(v2_oom_events);
            let oom_started = oom_now.is_none() || oom_now != oom_events;
            oom_events = oom_now;
            let before = s.counted;
            let until = Instant::now()
                + if oom_started {
                    AFTER_WAKE_FOR
                } else {
                    Duration::ZERO
                };
            loop {
                if !s.sample() {
                    return;
                }
                if s.counted != before || Instant::now() > until {
                    break;
                }
                drop(s);
                std::thread::sleep(AFTER_WAKE_EVERY);
                s = match shared.state.lock() {
                    Ok(s) => s,
                    Err(_) => return,
                };
            }
            last_read = Instant::now();
        } else if last_read.elapsed() >= every {
            if !s.sample() {
                return;
            }
            last_read = Instant::now();
        }
    }
}

/// v2's count of OOMs in the memory cgroup `dir` (`memory.events`, key
/// `oom`); `None` on v1.
fn v2_oom_events(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("memory.events")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("oom "))
        .and_then(|n| n.trim().parse().ok())
}

/// [`v2_oom_events`] of the watched memory cgroup, if any.
fn memory_dir_events(shared: &Shared) -> Option<u64> {
    let s = shared.state.lock().ok()?;
    s.memory.as_deref().and_then(v2_oom_events)
}

/// What `engine ARGS` printed, if it exited 0 within `limit` (killed
/// after it: a daemon that hangs must not hang the caller). Blocking: for
/// threads of their own. The answer is expected to be small (it is read
/// once the client has exited).
pub(super) fn engine_output(engine: &str, args: &[&str], limit: Duration) -> Option<String> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(engine)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    Some(out)
}

/// The pid of the container's init, in the engine's pid namespace, once
/// it runs, and the container's id.
fn init_pid(engine: &str, name: &str) -> Option<(i32, String)> {
    let out = engine_output(
        engine,
        &["inspect", "--format", "{{.State.Pid}} {{.Id}}", name],
        INSPECT_TIMEOUT,
    )?;
    let (pid, id) = out.trim().split_once(' ')?;
    let pid: i32 = pid.parse().ok().filter(|&pid| pid > 0)?;
    // A full id (64 hex digits for both engines), never a short prefix
    // that any path could contain.
    (id.len() >= 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| (pid, id.to_string()))
}

/// Where a process's cgroups are, as this process sees them.
#[derive(Debug, Default, PartialEq, Eq)]
struct CgroupDirs {
    /// The v1 hierarchies mounted here, with the process's cgroup in each.
    v1: Mounts,
    /// Its cgroup v2 directory, if the unified hierarchy is mounted here.
    v2: Option<PathBuf>,
}

impl CgroupDirs {
    /// From this process's mountinfo and the other's `/proc/PID/cgroup`
    /// (whose paths are relative to this process's cgroup namespace, as
    /// the mounts' roots are).
    fn parse(mountinfo: &str, proc_cgroup: &str) -> Self {
        let v1 = Mounts::parse(mountinfo, proc_cgroup);
        let unified = proc_cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map(str::trim);
        let v2 = unified.and_then(|path| {
            mountinfo.lines().find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                if right.split_whitespace().next() != Some("cgroup2") {
                    return None;
                }
                let mut f = left.split_whitespace();
                let (root, mount_point) = (f.nth(3)?, f.next()?);
                let rel = Path::new(path).strip_prefix(root).ok()?;
                Some(Path::new(mount_point).join(rel))
            })
        });
        Self { v1, v2 }
    }

    /// The cgroup that holds `c`'s counters: the v1 hierarchy of `c` where
    /// one is mounted, else the v2 directory if it has the controller.
    fn of(&self, c: Controller) -> Option<PathBuf> {
        if let Some(h) = self.v1.v1_for(c) {
            return Some(h.own.clone());
        }
        let dir = self.v2.as_ref()?;
        dir.join(format!("{}.events", c.name()))
            .exists()
            .then(|| dir.clone())
    }
}

/// A descriptor that becomes readable when the memory cgroup `dir` has an
/// OOM: v1's eventfd on `memory.oom_control` (registered through
/// `cgroup.event_control`), or an inotify watch on v2's `memory.events`.
fn oom_wake_up(dir: &Path) -> Option<OwnedFd> {
    use rustix::fs::inotify;
    if dir.join("memory.oom_control").exists() {
        let efd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .ok()?;
        let control = std::fs::File::open(dir.join("memory.oom_control")).ok()?;
        let line = format!("{} {}", efd.as_raw_fd(), control.as_raw_fd());
        std::fs::write(dir.join("cgroup.event_control"), line).ok()?;
        // The kernel keeps the eventfd, not the file it was registered on.
        return Some(efd);
    }
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
    inotify::add_watch(&fd, dir.join("memory.events"), inotify::WatchFlags::MODIFY).ok()?;
    Some(fd)
}

/// Empties the wake-up descriptor (an eventfd's count, inotify's events).
fn drain(fd: Option<&OwnedFd>) {
    let Some(fd) = fd else { return };
    let mut buf = [0u8; 1024];
    while matches!(rustix::io::read(fd.as_fd(), &mut buf), Ok(n) if n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_s_cgroups_are_found_through_the_mounts() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
33 30 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
36 30 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
37 30 0:33 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
";
        let proc_cgroup = "\
8:pids:/docker/abc
4:memory:/docker/abc
0::/docker/abc
";
        let d = CgroupDirs::parse(mountinfo, proc_cgroup);
        assert_eq!(
            d.of(Controller::Memory),
            Some(PathBuf::from("/sys/fs/cgroup/memory/docker/abc"))
        );
        assert_eq!(
            d.of(Controller::Pids),
            Some(PathBuf::from("/sys/fs/cgroup/pids/docker/abc"))
        );
        assert_eq!(
            d.v2,
            Some(PathBuf::from("/sys/fs/cgroup/unified/docker/abc"))
        );

        // v2 only, seen from inside a cgroup namespace rooted at /ci.
        let mountinfo = "29 23 0:26 /ci /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let d = CgroupDirs::parse(mountinfo, "0::/ci/machine.slice/libpod-1.scope\n");
        assert_eq!(
            d.v2,
            Some(PathBuf::from("/sys/fs/cgroup/machine.slice/libpod-1.scope"))
        );
        assert!(d.v1.v1.is_empty());
        // A v2 directory without the controller's files holds no counters.
        assert_eq!(d.of(Controller::Pids), None);
    }

    #[test]
    fn counters_only_grow_and_a_gone_cgroup_changes_nothing() {
        let mem = tempfile::tempdir().unwrap();
        let pids = tempfile::tempdir().unwrap();
        std::fs::write(
            mem.path().join("memory.events"),
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
        )
        .unwrap();
        std::fs::write(pids.path().join("pids.events"), "max 4\n").unwrap();
        let mut s = State {
            memory: Some(mem.path().to_path_buf()),
            pids: Some(pids.path().to_path_buf()),
            counted: Counted::default(),
        };
        assert!(s.sample());
        assert_eq!(
            s.counted,
            Counted {
                memory: Some((1, 1)),
                pids: Some(4)
            }
        );
        let (m, p) = (mem.path().to_path_buf(), pids.path().to_path_buf());
        drop((mem, pids));
        assert!(!s.sample(), "both gone");
        assert_eq!(s.counted.memory, Some((1, 1)));
        assert_eq!(s.counted.pids, Some(4));
        assert!(!m.exists() && !p.exists());

        let mut never = State {
            memory: Some(m),
            ..State::default()
        };
        assert!(!never.sample());
        assert_eq!(never.counted, Counted::default(), "never read: unknown");
    }
}
