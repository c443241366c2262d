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
        sweep(engine).await;
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
    let alive = |pid: i32, start: u64| {
        warden_process::os::procfs::entry(pid).is_some_and(|e| e.start == start && !e.is_dead())
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
