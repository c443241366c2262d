//! The containers of dead wardens: each run's container is labelled with
//! its run (`warden.run`) and with the warden that started it
//! (`warden.owner`); the first container run of a warden process lists the
//! containers of its engine that carry an owner and removes those whose
//! owner is gone, as the first run removes the cgroups dead wardens left
//! (see `warden_process::os::cgroup::remove_stale`).
//!
//! A container outlives its warden only when the warden and its shim were
//! both killed outright (the shim runs `rm -f` when warden alone dies), or
//! the engine did not answer that `rm -f`.
//!
//! The owner is `MACHINE:BOOT:PIDNS:PID:START`: the machine id, the boot
//! id, the PID namespace, the pid and its start time in clock ticks since
//! boot. A pid alone could name a later process; with its start time it
//! names one. An owner is judged only where its pid means what it means
//! here: on this kernel (same boot id) in this PID namespace, the owner is
//! dead when no process has that pid and start time; on this machine
//! (same machine id) after a reboot (another boot id), it is dead. Any
//! other owner (another machine that shares the engine, a warden in
//! another PID namespace) is left alone: nothing here can tell.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use warden_sandbox::Sandbox;

/// The label that names the run.
pub(crate) const RUN_LABEL: &str = "warden.run";
/// The label that names the warden process that started the container.
pub(crate) const OWNER_LABEL: &str = "warden.owner";

/// How long the listing may take; the removal of what it found gets as
/// long again. An engine that does not answer costs the first run no
/// more than this, at its end (the sweep runs beside the run).
const LIST_LIMIT: Duration = Duration::from_secs(10);

/// Where this warden runs, as an owner label says it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Here {
    machine: String,
    boot: String,
    pidns: String,
}

impl Here {
    fn read() -> Self {
        let first = |paths: &[&str]| {
            paths
                .iter()
                .find_map(|p| std::fs::read_to_string(p).ok())
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let pidns = std::fs::read_link("/proc/self/ns/pid")
            .map(|l| {
                l.to_string_lossy()
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect()
            })
            .unwrap_or_default();
        Self {
            machine: first(&["/etc/machine-id", "/var/lib/dbus/machine-id"]),
            boot: first(&["/proc/sys/kernel/random/boot_id"]),
            pidns,
        }
    }
}

/// This warden process as its containers' `warden.owner` label names it
/// (read once: a batch labels hundreds).
pub(crate) fn owner() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(|| {
        let here = Here::read();
        let pid = std::process::id() as i32;
        let start = warden_process::os::procfs::entry(pid).map_or(0, |e| e.start);
        format!(
            "{}:{}:{}:{pid}:{start}",
            here.machine, here.boot, here.pidns
        )
    })
}

/// Whether the owner a label names is known to be gone. `alive` says
/// whether a process with that pid and start time runs here.
fn owner_is_dead(label: &str, here: &Here, alive: impl Fn(i32, u64) -> bool) -> bool {
    let parts: Vec<&str> = label.split(':').collect();
    let [machine, boot, pidns, pid, start] = parts[..] else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
        return false;
    };
    if boot.is_empty() || here.boot.is_empty() {
        return false;
    }
    if boot != here.boot {
        // This machine, booted since: every process of then is gone.
        return !machine.is_empty() && machine == here.machine;
    }
    if pidns.is_empty() || pidns != here.pidns {
        return false;
    }
    !alive(pid, start)
}

/// What a [`CidDir`]'s name begins with.
const CID_PREFIX: &str = "warden-cid-";

/// This warden in a [`CidDir`]'s name: `PIDNS-PID-START`.
fn owned_by() -> String {
    let parts: Vec<&str> = owner().split(':').collect();
    parts[2..].join("-")
}

/// A directory of warden's own, outside the agent's work tree (under the
/// temporary directory, mode 0700), for the file the engine's client
/// writes the container's id to (`--cidfile`). Not the run's directory:
/// the client writes by path, and warden writes nothing in the work tree
/// by path (a process there could have put a link on the way). Removed
/// with its file when dropped; named after its warden
/// (`warden-cid-PIDNS-PID-START-RANDOM`), so that one a killed warden
/// left is removed by the next container run's sweep
/// ([`remove_stale_cid_dirs`]).
#[derive(Debug)]
pub(crate) struct CidDir(std::path::PathBuf);

impl CidDir {
    /// Makes a new one, named at random (never one that exists), in the
    /// first temporary directory that lies inside none of `mounts` (the
    /// host paths the container gets): in one of them the agent could
    /// remove the file, and have its own failure taken for the engine's.
    pub(crate) fn create(mounts: &[std::path::PathBuf]) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let real =
            |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let mounts: Vec<std::path::PathBuf> = mounts.iter().map(|m| real(m)).collect();
        let base = temp_dirs()
            .into_iter()
            .find(|t| {
                let t = real(t);
                t.is_dir() && !mounts.iter().any(|m| t.starts_with(m))
            })
            .ok_or_else(|| {
                std::io::Error::other(
                    "every temporary directory (TMPDIR, /tmp, /var/tmp, /dev/shm) lies inside what \
                     the container mounts; set TMPDIR to a directory outside the work tree and \
                     the --ro/--rw paths",
                )
            })?;
        let mut last = None;
        for _ in 0..8 {
            let mut bytes = [0u8; 8];
            rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
                .map_err(std::io::Error::from)?;
            let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let dir = base.join(format!("{CID_PREFIX}{}-{name}", owned_by()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(Self(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
    }

    /// The file the client is told to write.
    pub(crate) fn file(&self) -> std::path::PathBuf {
        self.0.join("id")
    }

    /// Whether the client wrote the container's id: the engine created it.
    pub(crate) fn written(&self) -> bool {
        std::fs::metadata(self.file()).is_ok_and(|m| m.len() > 0)
    }
}

impl Drop for CidDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.file());
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Where a [`CidDir`] may be made, in order.
fn temp_dirs() -> Vec<std::path::PathBuf> {
    let mut dirs = vec![std::env::temp_dir()];
    for d in ["/tmp", "/var/tmp", "/dev/shm"] {
        let d = std::path::PathBuf::from(d);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// Removes the [`CidDir`]s of dead wardens of this PID namespace (a
/// warden killed outright leaves its own behind).
fn remove_stale_cid_dirs() {
    let here = Here::read();
    let mine = owned_by();
    for base in temp_dirs() {
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        for entry in entries.flatten() {
            remove_if_stale(&entry, &here, &mine);
        }
    }
}

/// Removes `entry` if it is a [`CidDir`] of a dead warden of this PID
/// namespace. Through the directory itself, never a link put in its
/// place: another user may write the temporary directory.
fn remove_if_stale(entry: &std::fs::DirEntry, here: &Here, mine: &str) {
    let name = entry.file_name();
    let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(CID_PREFIX)) else {
        return;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    let [pidns, pid, start, _] = parts[..] else {
        return;
    };
    if pidns != here.pidns || rest.starts_with(&format!("{mine}-")) {
        return;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
        return;
    };
    if warden_process::os::procfs::entry(pid).is_some_and(|e| e.start == start) {
        return;
    }
    let dir = entry.path();
    use rustix::fs::{AtFlags, CWD, Mode, OFlags, openat, unlinkat};
    let Ok(fd) = openat(
        CWD,
        &dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let _ = unlinkat(&fd, "id", AtFlags::empty());
    let _ = std::fs::remove_dir(&dir);
}

/// Starts the removal of dead owners' containers for `sandbox`'s engine,
/// once per warden process and engine (a batch's later runs start none).
/// The handle is for the run that started it to wait on at its end, so
/// that the process does not exit with it half done.
pub(crate) fn start_once(sandbox: Sandbox) -> Option<tokio::task::JoinHandle<()>> {
    static DOCKER: AtomicBool = AtomicBool::new(false);
    static PODMAN: AtomicBool = AtomicBool::new(false);
    let (engine, done) = match sandbox {
        Sandbox::Docker => ("docker", &DOCKER),
        Sandbox::Podman => ("podman", &PODMAN),
        Sandbox::Host | Sandbox::Bwrap => return None,
    };
    if done.swap(true, Ordering::SeqCst) {
        return None;
    }
    Some(tokio::spawn(async move {
        let dirs = tokio::task::spawn_blocking(remove_stale_cid_dirs);
        sweep(engine).await;
        let _ = dirs.await;
    }))
}

/// Lists `engine`'s containers that carry an owner and removes those of
/// dead owners; returns the ids removed. Failures are silent: this is
/// housekeeping, and the run's own use of the engine says what is wrong
/// with it.
pub(crate) async fn sweep(engine: &str) -> Vec<String> {
    let format = if engine == "podman" {
        format!("{{{{.ID}}}} {{{{index .Labels \"{OWNER_LABEL}\"}}}}")
    } else {
        format!("{{{{.ID}}}} {{{{.Label \"{OWNER_LABEL}\"}}}}")
    };
    let filter = format!("label={OWNER_LABEL}");
    let listed = run(
        engine,
        &[
            "ps",
            "-a",
            "--no-trunc",
            "--filter",
            &filter,
            "--format",
            &format,
        ],
        LIST_LIMIT,
    )
    .await;
    let Some(listed) = listed else {
        return Vec::new();
    };
    let here = Here::read();
    let me = owner();
    // Where /proc hides other users' processes, one not seen may be
    // alive: its containers are left alone.
    let hidden = proc_hides_processes();
    let alive = |pid: i32, start: u64| match warden_process::os::procfs::entry(pid) {
        Some(e) => e.start == start && !e.is_dead(),
        None => hidden,
    };
    let dead: Vec<String> = listed
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, label)| *label != me && owner_is_dead(label, &here, alive))
        .map(|(id, _)| id.to_string())
        .collect();
    if dead.is_empty() {
        return dead;
    }
    let mut args = vec!["rm", "-f"];
    args.extend(dead.iter().map(String::as_str));
    run(engine, &args, LIST_LIMIT).await;
    dead
}

/// Whether this process's /proc is mounted with `hidepid` (1, 2,
/// `noaccess`, `invisible`, `ptraceable`): then another user's process
/// may run without a /proc entry this one can see.
fn proc_hides_processes() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").map_or(true, |info| hides_processes(&info))
}

/// Whether the mount table `info` (`/proc/self/mountinfo`) has /proc with
/// `hidepid` on.
fn hides_processes(info: &str) -> bool {
    info.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            return false;
        };
        fields.get(4) == Some(&"/proc")
            && fields.get(sep + 1) == Some(&"proc")
            && fields.iter().any(|f| {
                f.split(',').any(|o| {
                    o.strip_prefix("hidepid=")
                        .is_some_and(|v| v != "0" && v != "off")
                })
            })
    })
}

/// Runs `engine ARGS` with no input and waits at most `limit`; its
/// stdout, if it exited 0.
async fn run(engine: &str, args: &[&str], limit: Duration) -> Option<String> {
    let child = tokio::process::Command::new(engine)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .ok()?
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_proc_mounted_with_hidepid_is_seen() {
        let plain = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n";
        assert!(!super::hides_processes(plain));
        let hidden = "22 1 0:21 / /proc rw,nosuid,relatime - proc proc rw,hidepid=invisible\n";
        assert!(super::hides_processes(hidden));
        let off = "22 1 0:21 / /proc rw,relatime - proc proc rw,hidepid=0\n";
        assert!(!super::hides_processes(off));
        let elsewhere = "30 22 0:40 / /other rw - proc proc rw,hidepid=2\n";
        assert!(!super::hides_processes(elsewhere));
    }

    use super::*;

    fn here() -> Here {
        Here {
            machine: "m1".into(),
            boot: "b1".into(),
            pidns: "4026531836".into(),
        }
    }

    #[test]
    fn an_owner_is_judged_only_where_its_pid_means_something() {
        let h = here();
        let alive = |pid: i32, start: u64| pid == 10 && start == 500;
        let dead = |l: &str| owner_is_dead(l, &h, alive);
        assert!(!dead("m1:b1:4026531836:10:500"), "alive");
        assert!(dead("m1:b1:4026531836:10:499"), "the pid reused");
        assert!(dead("m1:b1:4026531836:11:500"), "no such pid");
        assert!(dead("m1:b0:4026531836:10:500"), "this machine, rebooted");
        assert!(!dead("m2:b0:4026531836:10:1"), "another machine");
        assert!(!dead(":b0:4026531836:10:1"), "a machine with no id");
        assert!(!dead("m1:b1:4026531999:11:1"), "another PID namespace");
        assert!(!dead("garbage"), "not ours to judge");
        assert!(!dead("m1:b1:4026531836:x:1"), "not ours to judge");
    }

    #[test]
    fn the_id_file_lies_in_a_private_directory_that_goes_with_it() {
        use std::os::unix::fs::PermissionsExt;
        let d = CidDir::create(&[]).unwrap();
        let dir = d.0.clone();
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(!d.written());
        std::fs::write(d.file(), "abc").unwrap();
        assert!(d.written());
        drop(d);
        assert!(!dir.exists());
    }

    #[test]
    fn a_dead_wardens_id_directory_goes_and_a_live_ones_stays() {
        let here = Here::read();
        let tmp = std::env::temp_dir();
        // A warden that had pid 1 once, long after this boot began.
        let dead = tmp.join(format!(
            "{CID_PREFIX}{}-1-{}-feed",
            here.pidns,
            u64::MAX - 1
        ));
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join("id"), "x").unwrap();
        let live = CidDir::create(&[]).unwrap();
        remove_stale_cid_dirs();
        assert!(!dead.exists());
        assert!(live.0.exists());
    }

    #[test]
    fn this_process_is_alive_by_its_own_label() {
        let h = Here::read();
        let me = owner();
        let alive = |pid: i32, start: u64| {
            warden_process::os::procfs::entry(pid).is_some_and(|e| e.start == start)
        };
        assert!(!owner_is_dead(me, &h, alive), "{me}");
        assert_eq!(me.split(':').count(), 5, "{me}");
    }
}
