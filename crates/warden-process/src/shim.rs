//! The per-run shim: warden re-executed as the parent of one agent.
//!
//! Why a separate process: a Linux process can be the subreaper for only
//! one set of descendants, and it must still be alive to clean up after
//! its parent is SIGKILLed. The shim is both. It
//! - marks itself child subreaper, so every orphan of the agent (double
//!   forks, `setsid` daemons) is re-parented to it and stays attributable
//!   to this run even when one warden supervises many;
//! - starts the agent in its own process group with no controlling
//!   terminal, in the run's cgroup when there is one, with a parent-death signal, only stdin,
//!   stdout and stderr open, and reports its pid;
//! - reaps everything, and reports the agent's exit status and the moment
//!   the run has no process left;
//! - on warden's request, and when warden closes the control socket or
//!   dies (the kernel closes it then), stops and kills every process of
//!   the run (see [`crate::sweep`]); on close it then removes the cgroup
//!   and exits. That is what makes "warden was SIGKILLed and nothing of
//!   the run survived" true;
//! - resumes warden if it finds it stopped (the agent can send it
//!   SIGSTOP), unless warden was stopped from its terminal (Ctrl-Z).
//!
//! The shim holds none of the agent's pipes after the spawn, so a pipe's
//! end of file still means that every writer of the run is gone.
//!
//! An embedding program enables the shim by calling [`run_if_shim`] first
//! thing in `main`; the warden binary does. A program that forgets to
//! would start itself again and again (each copy spawning the next): the
//! shim is started with [`SHIM_ENV`] set, and [`crate::spawn()`] refuses to
//! start a run in a process that carries it.

use std::ffi::OsString;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{BorrowedFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use rustix::io::{Errno, FdFlags, fcntl_setfd};
use rustix::process::{WaitOptions, getppid, wait};

use crate::os::clone_into::{self, CloneError, Exec};
use crate::os::{self, Signal, Target, cgroup::Cgroup, procfs};
use crate::protocol::ShimMessage;
use crate::sweep::sweep;

/// Written into a shim executable of its own (`warden-shim`) so that
/// warden can tell, from the file, that it was built from the same
/// sources as itself (see [`shim_file_matches`]).
pub const SHIM_MARK: &str = concat!("warden-shim build ", env!("WARDEN_PROCESS_BUILD"), ";");

/// Whether `file` (the bytes of an executable) carries this build's
/// [`SHIM_MARK`]: a shim executable built from other sources does not.
pub fn shim_file_matches(file: &[u8]) -> bool {
    // A plain scan, not memchr's searcher: building that one detects the
    // CPU's features first, and on a virtual machine each question to the
    // CPU traps to the hypervisor (a tenth of a millisecond, at every
    // run's start). The mark sits a few tens of KiB in.
    let mark = SHIM_MARK.as_bytes();
    let mut from = 0;
    while let Some(at) = file[from..].iter().position(|&b| b == mark[0]) {
        let start = from + at;
        if file[start..].starts_with(mark) {
            return true;
        }
        from = start + 1;
    }
    false
}

/// The first argument that turns the process into a shim.
pub const SHIM_ARG: &str = "__warden-shim";

/// Set in the shim's environment (to warden's pid), never in the agent's:
/// a process that carries it was started as a shim.
pub const SHIM_ENV: &str = "WARDEN_SHIM_OF";

/// The file descriptor the control socket is passed on.
pub(crate) const CONTROL_FD: i32 = 3;

/// The argument (first after [`SHIM_ARG`]) that says the control socket
/// came as the shim's stdin, and the agent's stdin is /dev/null: a shim
/// started so needs nothing done between warden's fork and its exec, so
/// warden can start it without copying its own memory map (see `spawn`).
pub(crate) const CONTROL_ON_STDIN: &str = "--control-on-stdin";

/// How long a sweep may take before the processes left are given up on.
const SWEEP_LIMIT: Duration = Duration::from_secs(5);

/// How often the shim looks at warden's state.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// The signals the shim ignores and the agent gets back at their defaults.
const POLITE: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// Becomes the shim and never returns if this process was started as one;
/// returns at once otherwise. Call it first thing in `main`.
pub fn run_if_shim() {
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == SHIM_ARG) {
        let code = shim_main(args.collect());
        std::process::exit(code);
    }
}

/// Whether this process was started as a run's shim (and so must not start
/// runs of its own: see [`run_if_shim`]).
pub fn started_as_shim() -> bool {
    std::env::var_os(SHIM_ENV).is_some()
}

struct ShimArgs {
    cgroup: Option<PathBuf>,
    /// The cgroup v1 directories made for the run's limits, which the
    /// agent joins before its exec (`--join DIR`, repeated).
    join: Vec<PathBuf>,
    /// Report what the kernel did at the limits (`--limits`).
    limits: bool,
    /// The cgroups of the memory limit and of the process limit, where
    /// what the kernel did at each is counted (`--memory-events DIR`,
    /// `--pids-events DIR`, repeated).
    memory_events: Vec<PathBuf>,
    pids_events: Vec<PathBuf>,
    /// What removes what the run left outside the shim's tree (a
    /// container, which its engine's daemon holds), run when warden is
    /// gone before the run ended (`--if-warden-dies ARG`, repeated).
    if_warden_dies: Vec<OsString>,
    program: OsString,
    args: Vec<OsString>,
}

fn parse_args(mut argv: Vec<OsString>) -> Option<ShimArgs> {
    let mut cgroup = None;
    let mut join = Vec::new();
    let mut limits = false;
    let mut memory_events = Vec::new();
    let mut pids_events = Vec::new();
    let mut if_warden_dies = Vec::new();
    loop {
        match argv.first().and_then(|a| a.to_str()) {
            Some("--cgroup") if argv.len() >= 2 => {
                cgroup = Some(PathBuf::from(argv.remove(1)));
                argv.remove(0);
            }
            Some("--join") if argv.len() >= 2 => {
                join.push(PathBuf::from(argv.remove(1)));
                argv.remove(0);
            }
            Some("--limits") => {
                limits = true;
                argv.remove(0);
            }
            Some("--memory-events") if argv.len() >= 2 => {
                memory_events.push(PathBuf::from(argv.remove(1)));
                argv.remove(0);
            }
            Some("--pids-events") if argv.len() >= 2 => {
                pids_events.push(PathBuf::from(argv.remove(1)));
                argv.remove(0);
            }
            Some("--if-warden-dies") if argv.len() >= 2 => {
                if_warden_dies.push(argv.remove(1));
                argv.remove(0);
            }
            _ => break,
        }
    }
    if argv.first().is_some_and(|a| a == "--") {
        argv.remove(0);
    }
    let program = (!argv.is_empty()).then(|| argv.remove(0))?;
    Some(ShimArgs {
        cgroup,
        join,
        limits,
        memory_events,
        pids_events,
        if_warden_dies,
        program,
        args: argv,
    })
}

/// The shim's state after the spawn. One thread does everything (reaps,
/// answers warden, watches it): a second thread would be a second task
/// in /proc, and a thread that is not the last to exit has the kernel
/// clear its /proc entries after warden was told the shim is gone, while
/// warden's reaping of the shim clears the same ones (the reaper then
/// spins until the thread is done, milliseconds on a busy machine).
struct Shim {
    control: UnixStream,
    cgroup: Option<Cgroup>,
    /// The run's cgroup v1 directories (limits), removed with the cgroup.
    v1: Vec<PathBuf>,
    /// Whether to report what the kernel did at the limits.
    limits: bool,
    /// The cgroups of the memory limit and of the process limit.
    memory_events: Vec<PathBuf>,
    pids_events: Vec<PathBuf>,
    agent: i32,
    agent_exited: bool,
}

impl Shim {
    fn send(&self, m: &ShimMessage) {
        let _ = (&self.control).write_all(m.to_line().as_bytes());
    }

    /// Stops and kills every process of the run; names to warden the ones
    /// that were orphans (alive after the agent exited).
    fn sweep(&self) {
        let me = os::own_pid();
        // Never our own group or warden's (the agent is in neither).
        let mut spare = vec![me];
        spare.extend(procfs::entry(me).map(|e| e.pgid));
        if let Some(p) = getppid() {
            spare.extend(procfs::entry(p.as_raw_nonzero().get()).map(|e| e.pgid));
        }
        let orphans = self.agent_exited;
        let swept = sweep(me, self.cgroup.as_ref(), &spare, SWEEP_LIMIT);
        if orphans {
            for k in swept.killed.into_iter().filter(|k| k.pid != self.agent) {
                if !k.cmdline.is_empty() {
                    self.send(&ShimMessage::Killed {
                        pid: k.pid,
                        escaped: k.escaped,
                        cmdline: k.cmdline,
                    });
                }
            }
        }
    }

    /// Tells warden what the kernel did at the run's limits (before the
    /// cgroups that count it go).
    fn report_resources(&self) {
        if !self.limits {
            return;
        }
        let ev = crate::os::limits::events_at(&self.memory_events, &self.pids_events);
        self.send(&ShimMessage::Resources {
            oom_kills: ev.oom_kills,
            oom_at_limit: ev.oom_at_limit,
            pids_max: ev.pids_max,
        });
    }

    /// Removes the run's cgroup and its v1 cgroups (empty by now; what
    /// they counted was reported first).
    fn remove_cgroup(&self) {
        if let Some(cg) = &self.cgroup {
            cg.remove();
        }
        crate::os::limits::remove_v1(&self.v1);
    }
}

fn shim_main(mut argv: Vec<OsString>) -> i32 {
    if argv.first().is_some_and(|a| a == CONTROL_ON_STDIN) {
        argv.remove(0);
        if let Err(e) = control_from_stdin() {
            eprintln!("warden's shim could not take its control socket from its stdin: {e}");
            return 2;
        }
    }
    // Started by hand, the shim may have nothing on CONTROL_FD.
    // SAFETY: fcntl(F_GETFD) takes a plain descriptor number and touches
    // no memory; on a descriptor that is not open it fails with EBADF.
    if unsafe { libc::fcntl(CONTROL_FD, libc::F_GETFD) } < 0 {
        eprintln!(
            "warden's shim has no control socket on descriptor {CONTROL_FD}: \
             only warden starts it, once per run"
        );
        return 2;
    }
    // SAFETY: CONTROL_FD is open (checked above), and nothing else in this
    // process owns it: warden passes the control socket on it, and
    // nothing in this process has opened a descriptor before.
    let control = unsafe { UnixStream::from_raw_fd(CONTROL_FD) };
    // SAFETY: CONTROL_FD is open (we just took ownership of it above).
    let _ = fcntl_setfd(
        unsafe { BorrowedFd::borrow_raw(CONTROL_FD) },
        FdFlags::CLOEXEC,
    );
    let send = |mut out: &UnixStream, m: ShimMessage| {
        let _ = out.write_all(m.to_line().as_bytes());
    };

    let Some(args) = parse_args(argv) else {
        send(
            &control,
            ShimMessage::SpawnFailed {
                not_found: false,
                message: "the shim was given no command".into(),
            },
        );
        return 2;
    };
    let _ = os::become_subreaper();
    // Not dumpable: a process of the same user can no longer ptrace the
    // shim (attaching would stop it, and would give it the shim's hands)
    // nor read its /proc files; only a privileged one can. The agent gets
    // the usual dumpable state back at its exec.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    // The shim's command line holds the agent's, so a `pkill -f` or a
    // `kill $PPID` from the agent can hit it: it ignores the polite
    // signals (warden never sends it one; it closes the socket instead).
    // The agent gets them back at their defaults before it starts.
    for sig in POLITE {
        // SAFETY: setting a signal's disposition to ignore has no
        // preconditions.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
        }
    }

    // The agent is born in the run's cgroup; the shim stays out of it, as
    // it must survive `cgroup.kill`.
    let cgroup = args.cgroup.as_deref().map(Cgroup::open);
    let shim_pid = rustix::process::getpid();
    // The files the agent writes itself into, made before the fork: the
    // child may not allocate.
    let joins: Vec<std::ffi::CString> = args
        .join
        .iter()
        .filter_map(|d| {
            use std::os::unix::ffi::OsStrExt;
            std::ffi::CString::new(d.join("cgroup.procs").as_os_str().as_bytes()).ok()
        })
        .collect();
    let setup = move || {
        join_cgroups(&joins)?;
        prepare_agent(shim_pid)
    };
    let (spawned, joined) = match cgroup
        .as_ref()
        .and_then(|cg| spawn_into_cgroup(cg, &args, &setup))
    {
        Some(spawned) => (spawned, true),
        None => spawn_by_joining(cgroup.as_ref(), &args, setup),
    };
    let agent = match spawned {
        Ok(pid) => pid,
        Err(e) => {
            send(
                &control,
                ShimMessage::SpawnFailed {
                    not_found: e.kind() == std::io::ErrorKind::NotFound,
                    message: e.to_string(),
                },
            );
            return 0;
        }
    };
    send(
        &control,
        ShimMessage::Spawned {
            pid: agent,
            cgroup: joined,
        },
    );
    release_stdio();

    let mut shim = Shim {
        control,
        cgroup,
        v1: args.join.clone(),
        limits: args.limits,
        memory_events: args.memory_events.clone(),
        pids_events: args.pids_events.clone(),
        agent,
        agent_exited: false,
    };
    let warden = getppid();
    // Whatever happens in the loop, the run must not outlive it.
    let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shim.serve()));
    let ended = ended.unwrap_or(End::WardenGone);
    if ended == End::WardenGone {
        shim.sweep();
        // warden died (the shim was given to another parent): what it
        // would have removed at the run's end is the shim's to remove.
        if getppid() != warden {
            run_bounded(&args.if_warden_dies, WARDEN_GONE_CLEANUP);
        }
    }
    // Counted before warden hears the run is over, and before the cgroups
    // that count it go.
    shim.report_resources();
    if ended == End::NoneLeft && shim.agent_exited {
        shim.send(&ShimMessage::Empty);
    }
    shim.remove_cgroup();
    0
}

/// Why the shim's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// No child left, so no descendant left either (every orphan is
    /// re-parented here): the cgroup is empty and can go, whatever warden
    /// does now (it may be dead).
    NoneLeft,
    /// warden closed the control socket or died (the kernel closes it
    /// then): nothing of the run may outlive it.
    WardenGone,
}

impl Shim {
    /// Reaps, reports the agent's exit, sweeps at warden's request and
    /// keeps warden from staying stopped, until one of the two ends.
    fn serve(&mut self) -> End {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        // Without a signalfd the loop still ends, by looking every tick.
        let exits = os::child_exits::ChildExits::new().ok();
        let mut stopped_seen = 0u32;
        let mut next_watch = Instant::now() + WATCH_EVERY;
        loop {
            if let Some(end) = self.reap() {
                return end;
            }
            let wait = next_watch.saturating_duration_since(Instant::now());
            let timeout = Timespec {
                tv_sec: wait.as_secs() as _,
                tv_nsec: wait.subsec_nanos() as _,
            };
            let mut fds = vec![PollFd::new(&self.control, PollFlags::IN)];
            if let Some(exits) = &exits {
                fds.push(PollFd::new(exits, PollFlags::IN));
            }
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => return End::WardenGone,
            }
            let control_ready = !fds[0].revents().is_empty();
            drop(fds);
            if let Some(exits) = &exits {
                exits.drain();
            }
            if control_ready {
                let mut buf = [0u8; 64];
                match (&self.control).read(&mut buf) {
                    Ok(0) => return End::WardenGone,
                    Ok(_) => self.sweep(),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => return End::WardenGone,
                }
            }
            if Instant::now() >= next_watch {
                stopped_seen = resume_warden(stopped_seen);
                next_watch = Instant::now() + WATCH_EVERY;
            }
        }
    }

    /// Reaps every child that has exited; reports the agent's exit.
    /// `Some` once no child is left.
    fn reap(&mut self) -> Option<End> {
        loop {
            match wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    if pid.as_raw_nonzero().get() == self.agent {
                        self.agent_exited = true;
                        self.send(&ShimMessage::Exited {
                            code: status.exit_status(),
                            signal: status.terminating_signal(),
                        });
                    }
                }
                Ok(None) => return None,
                Err(Errno::INTR) => {}
                Err(_) => return Some(End::NoneLeft),
            }
        }
    }
}

/// Starts the agent with `clone3` straight into the run's cgroup (see
/// [`crate::os::clone_into`]). `None` when that cannot be done here: the
/// caller then joins the cgroup for the fork instead.
fn spawn_into_cgroup(
    cgroup: &Cgroup,
    args: &ShimArgs,
    setup: &dyn Fn() -> std::io::Result<()>,
) -> Option<std::io::Result<i32>> {
    let dir = cgroup.open_dir().ok()?;
    // The marker is the shim's, not the agent's: an agent may run warden.
    let env = std::env::vars_os().filter(|(k, _)| k != SHIM_ENV);
    let exec = Exec::new(&args.program, &args.args, env)?;
    match clone_into::spawn_into(std::os::fd::AsFd::as_fd(&dir), &exec, setup) {
        Ok(pid) => Some(Ok(pid)),
        Err(CloneError::Spawn(e)) => Some(Err(e)),
        Err(CloneError::Unavailable(_)) => None,
    }
}

/// Starts the agent the portable way: the shim joins the run's cgroup for
/// the fork, so the agent is born inside it, then steps back out. Returns
/// the agent's pid and whether the run has its cgroup: if stepping out
/// fails the shim is inside it and `cgroup.kill` would kill it too, so the
/// run does without the cgroup.
fn spawn_by_joining(
    cgroup: Option<&Cgroup>,
    args: &ShimArgs,
    setup: impl Fn() -> std::io::Result<()> + Send + Sync + 'static,
) -> (std::io::Result<i32>, bool) {
    let joined = cgroup.is_some_and(|cg| cg.join().is_ok());
    let mut cmd = Command::new(&args.program);
    // The marker is the shim's, not the agent's: an agent may run warden.
    cmd.args(&args.args).env_remove(SHIM_ENV);
    // SAFETY: `setup` is async-signal-safe (see `prepare_agent`).
    unsafe {
        cmd.pre_exec(setup);
    }
    let spawned = cmd.spawn().map(|child| child.id() as i32);
    let joined = joined
        && cgroup
            .and_then(Cgroup::parent)
            .is_some_and(|parent| parent.join().is_ok());
    (spawned, joined)
}

/// In the agent, between fork and exec: joins each cgroup v1 made for the
/// run's limits by writing `0` (this process) to its `cgroup.procs`, so
/// that the agent's first instruction already runs under them. Raw
/// system calls on strings made before the fork: async-signal-safe.
fn join_cgroups(procs_files: &[std::ffi::CString]) -> std::io::Result<()> {
    for file in procs_files {
        // SAFETY: open, write and close are async-signal-safe system calls
        // on a NUL-terminated path and a static buffer.
        unsafe {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let wrote = libc::write(fd, b"0".as_ptr().cast(), 1);
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if wrote != 1 {
                return Err(err);
            }
        }
    }
    Ok(())
}

/// In the agent, between fork and exec. Only raw system calls (signal,
/// setpgid, open/ioctl/close, prctl, getppid, close_range or fcntl): no
/// allocation, no locks, so it is async-signal-safe.
fn prepare_agent(shim_pid: rustix::process::Pid) -> std::io::Result<()> {
    // An ignored signal stays ignored across exec: give the agent the
    // defaults back. signal(2) is async-signal-safe.
    for sig in POLITE {
        // SAFETY: setting a signal's disposition to its default has no
        // preconditions.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    // A process group of its own, and no controlling terminal: a prompt on
    // /dev/tty fails at once (ENXIO) instead of stopping the agent or
    // writing over warden's status line.
    rustix::process::setpgid(None, None)?;
    os::drop_controlling_terminal();
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    // The shim may have died between fork and prctl (an errno, not a
    // message: nothing may allocate here).
    if getppid() != Some(shim_pid) {
        return Err(Errno::SRCH.into());
    }
    // Only stdin, stdout and stderr reach the agent.
    os::cloexec_from(3)?;
    Ok(())
}

/// How long the shim waits for the clean-up warden's death leaves it
/// (`docker rm -f`): an engine that does not answer is not waited for.
const WARDEN_GONE_CLEANUP: Duration = Duration::from_secs(15);

/// Runs `cmd` (program and arguments; nothing when empty) with no input
/// or output, for at most `limit`, killed after.
fn run_bounded(cmd: &[OsString], limit: Duration) {
    let Some((program, args)) = cmd.split_first() else {
        return;
    };
    let Ok(mut child) = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return;
    };
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// SIGCONTs warden if it was found stopped twice in a row, unless it was
/// stopped by its terminal's job control (then its terminal's foreground
/// is another process group: the user pressed Ctrl-Z, and `fg` resumes
/// it). Returns how many times in a row it was found stopped.
fn resume_warden(seen: u32) -> u32 {
    let Some(parent) = getppid() else {
        return 0;
    };
    let pid = parent.as_raw_nonzero().get();
    let Some(e) = procfs::entry(pid) else {
        return 0;
    };
    if !e.is_stopped() || e.state == b't' {
        return 0;
    }
    let job_control = e.tty != 0 && e.tpgid != e.pgid;
    if job_control {
        return 0;
    }
    if seen >= 1 {
        let _ = os::send(Target::Process(pid), Signal::Cont);
        return 0;
    }
    seen + 1
}

/// Moves the control socket from stdin to [`CONTROL_FD`], gives stdin
/// /dev/null (the agent's), and closes what else the shim inherited from
/// warden (descriptors warden inherited from its own parent stop here).
/// Done first thing: nothing in this process has opened a descriptor yet.
fn control_from_stdin() -> std::io::Result<()> {
    // SAFETY: dup2 takes two plain descriptor numbers and touches no
    // memory; whatever CONTROL_FD was (an inherited descriptor nothing
    // here owns), it becomes the control socket.
    if unsafe { libc::dup2(0, CONTROL_FD) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    drop(null);
    // SAFETY: close_range takes plain integers and touches no memory; no
    // descriptor above CONTROL_FD is owned by anything in this process.
    let closed = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            (CONTROL_FD + 1) as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        )
    };
    if closed != 0 {
        // Kernels before 5.9: closed at the next exec at least, as they
        // were when warden marked them in the fork.
        os::cloexec_from(CONTROL_FD + 1)?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_found_wherever_it_is_and_only_whole() {
        let mark = SHIM_MARK.as_bytes();
        let mut file = vec![b'w'; 5000];
        assert!(!shim_file_matches(&file), "found in a file without it");
        file.extend_from_slice(&mark[..mark.len() - 1]);
        assert!(!shim_file_matches(&file), "found when cut short at the end");
        file.extend_from_slice(mark);
        file.extend_from_slice(b"more");
        assert!(shim_file_matches(&file), "not found after a partial one");
        assert!(shim_file_matches(mark), "not found as the whole file");
        assert!(!shim_file_matches(b""), "found in an empty file");
    }
}
