//! The per-run shim: warden re-executed as the parent of one agent.
//!
//! Why a separate process: a Linux process can be the subreaper for only
//! one set of descendants, and it must still be alive to clean up after
//! its parent is SIGKILLed. The shim is both. It
//! - marks itself child subreaper, so every orphan of the agent (double
//!   forks, `setsid` daemons) is re-parented to it and stays attributable
//!   to this run even when one warden supervises many;
//! - starts the agent in its own process group (and the run's cgroup, when
//!   there is one), with a parent-death signal, and reports its pid;
//! - reaps everything, and reports the agent's exit status and the moment
//!   the run has no process left;
//! - watches its control socket: when warden closes it or dies (the kernel
//!   closes it then), the shim SIGKILLs every process of the run, removes
//!   the cgroup and exits. That is what makes "warden was SIGKILLed and
//!   nothing of the run survived" true.
//!
//! The shim holds none of the agent's pipes after the spawn, so a pipe's
//! end of file still means that every writer of the run is gone.
//!
//! An embedding program enables the shim by calling [`run_if_shim`] first
//! thing in `main`; the warden binary does.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{BorrowedFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use rustix::io::{Errno, FdFlags, fcntl_setfd};
use rustix::process::{WaitOptions, getppid, wait};

use crate::os::{self, Signal, Target, cgroup::Cgroup};
use crate::protocol::ShimMessage;

/// The first argument that turns the process into a shim.
pub const SHIM_ARG: &str = "__warden-shim";

/// The file descriptor the control socket is passed on.
pub(crate) const CONTROL_FD: i32 = 3;

/// Becomes the shim and never returns if this process was started as one;
/// returns at once otherwise. Call it first thing in `main`.
pub fn run_if_shim() {
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == SHIM_ARG) {
        let code = shim_main(args.collect());
        std::process::exit(code);
    }
}

struct ShimArgs {
    cgroup: Option<PathBuf>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse_args(mut argv: Vec<OsString>) -> Option<ShimArgs> {
    let mut cgroup = None;
    if argv.first().is_some_and(|a| a == "--cgroup") && argv.len() >= 2 {
        cgroup = Some(PathBuf::from(argv.remove(1)));
        argv.remove(0);
    }
    if argv.first().is_some_and(|a| a == "--") {
        argv.remove(0);
    }
    let program = (!argv.is_empty()).then(|| argv.remove(0))?;
    Some(ShimArgs {
        cgroup,
        program,
        args: argv,
    })
}

fn shim_main(argv: Vec<OsString>) -> i32 {
    // SAFETY: warden passes the control socket on this descriptor, and
    // nothing else in this process owns it.
    let control = unsafe { UnixStream::from_raw_fd(CONTROL_FD) };
    // SAFETY: CONTROL_FD is open (we just took ownership of it above).
    let _ = fcntl_setfd(
        unsafe { BorrowedFd::borrow_raw(CONTROL_FD) },
        FdFlags::CLOEXEC,
    );
    let mut out = control.try_clone().expect("clone the control socket");
    let send = |out: &mut UnixStream, m: ShimMessage| {
        let _ = out.write_all(m.to_line().as_bytes());
    };

    let Some(args) = parse_args(argv) else {
        send(
            &mut out,
            ShimMessage::SpawnFailed {
                not_found: false,
                message: "the shim was given no command".into(),
            },
        );
        return 2;
    };
    let _ = os::become_subreaper();
    // The shim's command line holds the agent's, so a `pkill -f` or a
    // `kill $PPID` from the agent can hit it: it ignores the polite
    // signals (warden never sends it one; it closes the socket instead).
    // The agent gets them back at their defaults before it starts.
    const POLITE: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];
    for sig in POLITE {
        // SAFETY: setting a signal's disposition to ignore has no
        // preconditions.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
        }
    }

    // Join the run's cgroup for the fork, so the agent is born inside it,
    // then step back out: the shim must survive `cgroup.kill`.
    let cgroup = args.cgroup.as_deref().map(Cgroup::open);
    let joined = cgroup.as_ref().is_some_and(|cg| cg.join().is_ok());

    let shim_pid = rustix::process::getpid();
    let mut cmd = Command::new(&args.program);
    cmd.args(&args.args).process_group(0);
    // SAFETY: the closure runs between fork and exec and only makes raw
    // system calls (signal, prctl, getppid): no allocation, no locks.
    unsafe {
        cmd.pre_exec(move || {
            // An ignored signal stays ignored across exec: give the agent
            // the defaults back. signal(2) is async-signal-safe.
            for sig in POLITE {
                libc::signal(sig, libc::SIG_DFL);
            }
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The shim may have died between fork and prctl.
            if getppid() != Some(shim_pid) {
                return Err(std::io::Error::other("the shim exited during spawn"));
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // Back out of the run's cgroup; if that fails the shim is inside it and
    // `cgroup.kill` would kill it too, so the run does without the cgroup.
    let joined = joined
        && cgroup
            .as_ref()
            .and_then(Cgroup::parent)
            .is_some_and(|parent| parent.join().is_ok());
    let agent = match spawned {
        Ok(child) => child.id() as i32,
        Err(e) => {
            send(
                &mut out,
                ShimMessage::SpawnFailed {
                    not_found: e.kind() == std::io::ErrorKind::NotFound,
                    message: e.to_string(),
                },
            );
            return 0;
        }
    };
    send(
        &mut out,
        ShimMessage::Spawned {
            pid: agent,
            cgroup: joined,
        },
    );
    release_stdio();

    let mut watch = control;
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(watch.read(&mut buf), Ok(n) if n > 0) {}
        // warden closed the socket or died: nothing of the run may outlive it.
        kill_everything(cgroup.as_ref());
        std::process::exit(0);
    });

    let mut agent_exited = false;
    loop {
        match wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid.as_raw_nonzero().get() == agent => {
                agent_exited = true;
                send(
                    &mut out,
                    ShimMessage::Exited {
                        code: status.exit_status(),
                        signal: status.terminating_signal(),
                    },
                );
            }
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => {
                // ECHILD: no child left, so no descendant left either (every
                // orphan is re-parented here).
                if agent_exited {
                    send(&mut out, ShimMessage::Empty);
                }
                return 0;
            }
        }
    }
}

/// Points the shim's own stdin, stdout and stderr at /dev/null, so that the
/// agent's pipes reach end of file as soon as the run's processes are gone.
fn release_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}

/// SIGKILLs every process of the run until none is left.
fn kill_everything(cgroup: Option<&Cgroup>) {
    let me = os::own_pid();
    for _ in 0..200 {
        if let Some(cg) = cgroup {
            let _ = cg.kill();
        }
        let left = os::procfs::live_descendants(me);
        if left.is_empty() && cgroup.is_none_or(|cg| cg.pids().is_empty()) {
            break;
        }
        for pid in left {
            let _ = os::send(Target::Process(pid), Signal::Kill);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if let Some(cg) = cgroup {
        cg.remove();
    }
}
