//! Starting a run's process tree and acting on it as a whole.
//!
//! [`spawn`] starts the shim (see [`crate::shim`]), which starts the agent;
//! the returned [`RunTree`] is warden's handle on every process of the run:
//! the agent's pipes, the shim's reports, the list of the run's processes,
//! and signals to all of them.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

use crate::os::limits::{LimitError, Mounts, RunLimits};
use crate::os::{self, Signal, Target, cgroup::Cgroup, procfs};
use crate::protocol::{KILL_REQUEST, ShimMessage};
use crate::resources::{Applied, ResourceEvents, ResourceLimits};
use crate::shim::{CONTROL_FD, CONTROL_ON_STDIN, SHIM_ARG, SHIM_ENV};

/// How long a shim may take to report the spawn (or the run's timeout, if
/// that is shorter).
const SHIM_REPORT: Duration = Duration::from_secs(30);

/// How often warden looks at its shim's state, to resume it if the agent
/// stopped it.
const WATCH_SHIM: Duration = Duration::from_millis(100);

/// Which containment to use (the report names the one in force).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainmentChoice {
    /// A cgroup where one can be made, else the subreaper alone.
    #[default]
    Auto,
    /// A cgroup or nothing: fail the spawn if none can be made.
    Cgroup,
    /// The subreaper and process group only.
    Subreaper,
}

/// The containment in force for a run, as named in the report.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Containment {
    /// Its own cgroup v2 (killed with `cgroup.kill`), under a subreaper
    /// shim, in its own process group.
    Cgroup,
    /// A subreaper shim and its own process group.
    Subreaper,
}

impl Containment {
    pub fn as_str(self) -> &'static str {
        match self {
            Containment::Cgroup => "cgroup",
            Containment::Subreaper => "subreaper",
        }
    }
}

/// What to start and how.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    /// Variables set on top of the inherited environment (or of an empty
    /// one, with `env_clear`).
    pub env: Vec<(OsString, OsString)>,
    /// Start from an empty environment: a sandbox passes an allowlist.
    pub env_clear: bool,
    /// Bytes written to the agent's stdin, which is then closed. `None`
    /// gives it /dev/null.
    pub stdin: Option<Vec<u8>>,
    pub containment: ContainmentChoice,
    /// The executable that becomes the shim (it must call
    /// [`crate::run_if_shim`]); usually the running program itself.
    pub shim_exe: PathBuf,
    /// A name for the run's cgroup, unique among running runs.
    pub run_name: String,
    /// The run's timeout: the wait for the shim's first report never
    /// outlasts it.
    pub timeout: Option<Duration>,
    /// Memory, process and CPU limits for every process of the run (see
    /// [`crate::os::limits`]); the spawn fails if one cannot be enforced.
    pub resources: ResourceLimits,
    /// Run by the shim if warden dies before the run ends: what removes
    /// what the run holds outside its process tree (a container that the
    /// engine's daemon runs: `docker rm -f NAME`). Empty: nothing.
    pub if_warden_dies: Vec<OsString>,
}

/// Why a run could not be started.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("`{program}` was not found: {message}")]
    NotFound { program: String, message: String },
    #[error("could not start `{program}`: {message}")]
    Failed { program: String, message: String },
    #[error("could not start the run's shim `{}`: {source}", .exe.display())]
    Shim { exe: PathBuf, source: io::Error },
    #[error("containment `cgroup` was asked for, but no cgroup could be made: {0}")]
    NoCgroup(io::Error),
    /// A resource limit asked for could not be put in place.
    #[error(transparent)]
    Limits(#[from] LimitError),
    #[error(
        "this process was started as a warden shim but did not call \
         warden_process::run_if_shim() first thing in main, so it went on to start a run \
         of its own (and would start itself again, without end); add \
         `warden_process::run_if_shim();` at the top of main"
    )]
    StartedAsShim,
}

/// A process of the run as found in /proc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub cmdline: String,
}

/// warden's handle on one running process tree.
pub struct RunTree {
    shim: Child,
    shim_pid: i32,
    agent_pid: i32,
    messages: Lines<BufReader<OwnedReadHalf>>,
    /// Held open for the life of the run: closing it tells the shim to kill
    /// everything that is left.
    control: Option<OwnedWriteHalf>,
    /// Resumes the shim whenever the agent stops it.
    watchdog: tokio::task::JoinHandle<()>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    pipe_inodes: Vec<u64>,
    cgroup: Option<Cgroup>,
    containment: Containment,
    /// The removal of stale cgroups started with the run.
    stale: Option<tokio::task::JoinHandle<()>>,
    /// The resource limits in force, and the v1 cgroups made for them.
    limits: Option<RunLimits>,
    /// What the kernel did at the limits, as last counted.
    resource_events: ResourceEvents,
}

/// Starts the shim and, through it, the agent. Returns once the agent runs
/// (or could not be started).
pub async fn spawn(spec: SpawnSpec) -> Result<RunTree, SpawnError> {
    // A program that forgot `run_if_shim` runs its own main as the shim:
    // starting a run from there would repeat itself without end.
    if crate::shim::started_as_shim() {
        return Err(SpawnError::StartedAsShim);
    }
    let program = spec.program.to_string_lossy().into_owned();
    // The cgroups that dead wardens left next to this one go while the
    // run goes, off its path ([`RunTree::close`] waits for it): started
    // once the shim is, so that the shim's start does not wait for a
    // second blocking thread to be made.
    let sweep_stale = !matches!(spec.containment, ContainmentChoice::Subreaper);
    let cgroup = match spec.containment {
        ContainmentChoice::Subreaper => None,
        choice => {
            let name = spec.run_name.clone();
            // File system work, kept off the thread that drives the clocks.
            let made = tokio::task::spawn_blocking(move || Cgroup::create(&name))
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e)));
            match (choice, made) {
                (_, Ok(cg)) => Some(cg),
                (ContainmentChoice::Cgroup, Err(e)) => return Err(SpawnError::NoCgroup(e)),
                (_, Err(_)) => None,
            }
        }
    };
    let limits = if spec.resources.any() {
        let resources = spec.resources;
        let v2 = cgroup.as_ref().map(|cg| cg.path().to_path_buf());
        let name = match &v2 {
            Some(dir) => dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            None => os::cgroup::owned_name(&spec.run_name),
        };
        // File system work, off the thread that drives the clocks.
        let made = tokio::task::spawn_blocking(move || {
            let mounts = Mounts::of_this_process();
            let made = RunLimits::apply(&resources, v2.as_deref(), &name, &mounts);
            // Stale v1 cgroups of dead wardens, next to these.
            if let Ok(made) = &made {
                for parent in made.v1_dirs.iter().filter_map(|d| d.parent()) {
                    os::cgroup::remove_stale(parent);
                }
            }
            made
        })
        .await
        .unwrap_or_else(|e| {
            Err(LimitError::Unavailable {
                limit: "the resource limits".into(),
                why: format!("the task setting them failed: {e}"),
            })
        });
        match made {
            Ok(made) => Some(made),
            Err(e) => {
                if let Some(cg) = cgroup {
                    remove_in_background(cg, None);
                }
                return Err(SpawnError::Limits(e));
            }
        }
    } else {
        None
    };
    let shim_err = |source| SpawnError::Shim {
        exe: spec.shim_exe.clone(),
        source,
    };

    // From here every early return hands what was made (the v2 cgroup,
    // the v1 cgroups of the limits) to [`discard`]: nothing else would
    // remove them until a later run found them stale.
    let (ours, theirs) = match std::os::unix::net::UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => {
            discard(cgroup, limits);
            return Err(shim_err(e));
        }
    };
    let mut cmd = Command::new(&spec.shim_exe);
    cmd.arg(SHIM_ARG);
    // Without a prompt to pipe in, the control socket goes in as the
    // shim's stdin, and the shim moves it to CONTROL_FD itself: nothing is
    // then left to do between fork and exec, and the standard library
    // starts the shim with posix_spawn (a vfork), without copying warden's
    // page tables for an exec to throw away, nor the copy-on-write faults
    // warden takes after a fork.
    let control_on_stdin = spec.stdin.is_none();
    if control_on_stdin {
        cmd.arg(CONTROL_ON_STDIN);
    }
    if let Some(cg) = &cgroup {
        cmd.arg("--cgroup").arg(cg.path());
    }
    if let Some(l) = &limits {
        cmd.arg("--limits");
        for dir in &l.v1_dirs {
            cmd.arg("--join").arg(dir);
        }
        // Where each limit counts what the kernel did at it: the run's
        // cgroup v2 has memory.events whenever the controller is enabled,
        // limit or not, so the shim reads only the limits' own cgroups.
        let (memory, pids) = l.counted_dirs();
        for dir in memory {
            cmd.arg("--memory-events").arg(dir);
        }
        for dir in pids {
            cmd.arg("--pids-events").arg(dir);
        }
    }
    for arg in &spec.if_warden_dies {
        cmd.arg("--if-warden-dies").arg(arg);
    }
    cmd.arg("--").arg(&spec.program).args(&spec.args);
    if spec.env_clear {
        cmd.env_clear();
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
        // Marks the shim as one (it removes the mark for the agent): a
        // program that forgets `run_if_shim` then refuses to start a run
        // instead of starting itself again.
        .env(SHIM_ENV, os::own_pid().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so a Ctrl-C at the terminal reaches warden only,
        // and warden decides what the run gets.
        .process_group(0);
    if let Some(dir) = &spec.cwd {
        // Some CLIs (Bun-based ones) take their directory from $PWD, which
        // would otherwise still name warden's own.
        cmd.current_dir(dir).env("PWD", dir);
    }
    let theirs: OwnedFd = theirs.into();
    // Kept open in warden until the shim has it (closed after the spawn).
    let mut kept = None;
    if control_on_stdin {
        cmd.stdin(Stdio::from(theirs));
    } else {
        // The prompt's pipe.
        cmd.stdin(Stdio::piped());
        let raw = theirs.as_raw_fd();
        kept = Some(theirs);
        // SAFETY: runs between fork and exec; makes only raw system calls
        // on descriptors that are open in the child.
        unsafe {
            cmd.pre_exec(move || {
                pass_control_fd(raw)?;
                // Descriptors warden inherited from its own parent stop here.
                os::cloexec_from(CONTROL_FD + 1)
            });
        }
    }
    // The start on a blocking thread: a fork (with a prompt) copies
    // warden's page tables, and either waits on the kernel's cgroup lock
    // while other runs' shims move into their cgroups; the clocks of runs
    // already going must not wait with it.
    let spawned = tokio::task::spawn_blocking(move || cmd.spawn())
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)));
    let mut shim = match spawned {
        Ok(shim) => shim,
        Err(e) => {
            discard(cgroup, limits);
            return Err(shim_err(e));
        }
    };
    drop(kept);
    let stale = sweep_stale.then(|| tokio::task::spawn_blocking(remove_stale_cgroups));
    let shim_pid = shim.id().map_or(0, |p| p as i32);
    let watchdog = tokio::spawn(resume_when_stopped(shim_pid));

    let stdout = shim.stdout.take();
    let stderr = shim.stderr.take();
    let pipe_inodes = [
        stdout.as_ref().map(|s| s.as_fd()),
        stderr.as_ref().map(|s| s.as_fd()),
    ]
    .into_iter()
    .flatten()
    .filter_map(|fd| pipe_inode(fd).ok())
    .collect();
    if let (Some(bytes), Some(mut stdin)) = (spec.stdin, shim.stdin.take()) {
        // Written in the background so a large prompt cannot block the
        // supervisor; the pipe closes when the task ends.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }

    let stream = ours
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(ours));
    let (read, write) = match stream {
        Ok(stream) => stream.into_split(),
        Err(e) => {
            // Its control socket is gone with `ours`: the shim ends the
            // agent; what is left in the cgroup goes with it.
            watchdog.abort();
            let _ = shim.start_kill();
            let _ = shim.wait().await;
            discard(cgroup, limits);
            return Err(shim_err(e));
        }
    };
    let mut messages = BufReader::new(read).lines();
    // A shim reports within milliseconds (the watchdog resumes one the
    // agent stopped); one that says nothing (a program that does not call
    // `run_if_shim` and does not exit) must not hang the run before it has
    // begun, nor outlast the run's timeout.
    let wait = spec.timeout.map_or(SHIM_REPORT, |t| t.min(SHIM_REPORT));
    let mut silent_for = None;
    let first = match tokio::time::timeout(wait, messages.next_line()).await {
        Ok(line) => line.ok().flatten(),
        Err(_) => {
            silent_for = Some(wait);
            let _ = shim.start_kill();
            None
        }
    };
    let fail = |tree_cg: Option<Cgroup>, limits: Option<RunLimits>, e: SpawnError| {
        watchdog.abort();
        discard(tree_cg, limits);
        Err(e)
    };
    match first.as_deref().and_then(ShimMessage::parse) {
        Some(ShimMessage::Spawned {
            pid,
            cgroup: joined,
        }) => {
            let in_v2 = limits.as_ref().is_some_and(|l| {
                l.applied
                    .iter()
                    .any(|a| a.hierarchy == crate::Hierarchy::V2)
            });
            let cgroup = match (cgroup, joined) {
                (Some(cg), true) => Some(cg),
                (Some(cg), false) => {
                    remove_in_background(cg, None);
                    if in_v2 {
                        // Its limits are on the cgroup it is not in.
                        drop(write);
                        watchdog.abort();
                        let _ = shim.wait().await;
                        discard(None, limits);
                        return Err(SpawnError::Limits(LimitError::Unavailable {
                            limit: "the resource limits".into(),
                            why: "the agent could not be started inside the run's cgroup v2, \
                                  where its limits are"
                                .into(),
                        }));
                    }
                    if spec.containment == ContainmentChoice::Cgroup {
                        drop(write);
                        watchdog.abort();
                        let _ = shim.wait().await;
                        discard(None, limits);
                        return Err(SpawnError::NoCgroup(io::Error::other(
                            "the shim could not join the run's cgroup",
                        )));
                    }
                    None
                }
                (None, _) => None,
            };
            let containment = if cgroup.is_some() {
                Containment::Cgroup
            } else {
                Containment::Subreaper
            };
            Ok(RunTree {
                shim,
                shim_pid,
                agent_pid: pid,
                messages,
                control: Some(write),
                watchdog,
                stdout,
                stderr,
                pipe_inodes,
                cgroup,
                containment,
                stale,
                limits,
                resource_events: ResourceEvents::default(),
            })
        }
        Some(ShimMessage::SpawnFailed { not_found, message }) => {
            let _ = shim.wait().await;
            let e = if not_found {
                SpawnError::NotFound { program, message }
            } else {
                SpawnError::Failed { program, message }
            };
            fail(cgroup, limits, e)
        }
        _ => {
            let status = shim.wait().await;
            // Killed by a signal before it could report (the agent can
            // `kill -KILL $PPID` first thing): the agent may well have run
            // and printed. That is a run whose shim died, not a failed
            // spawn: the supervisor reads what it printed, kills what the
            // cgroup still holds, and says the shim died.
            let killed = silent_for.is_none()
                && status
                    .as_ref()
                    .is_ok_and(|s| std::os::unix::process::ExitStatusExt::signal(s).is_some());
            if killed {
                let containment = if cgroup.is_some() {
                    Containment::Cgroup
                } else {
                    Containment::Subreaper
                };
                // Reaped: its pid may be reused, so nothing may signal it.
                watchdog.abort();
                drop(write);
                return Ok(RunTree {
                    shim,
                    shim_pid,
                    agent_pid: 0,
                    messages,
                    control: None,
                    watchdog,
                    stdout,
                    stderr,
                    pipe_inodes,
                    cgroup,
                    containment,
                    stale,
                    limits,
                    resource_events: ResourceEvents::default(),
                });
            }
            let mut what = match silent_for {
                Some(d) => format!("it said nothing for {d:?} and was killed"),
                None => format!("it ended without reporting the spawn (exit: {status:?})"),
            };
            // What it printed says best what went wrong.
            if let Some(said) = first_words(stderr).await {
                what.push_str(&format!("; it printed: {said}"));
            }
            fail(
                cgroup,
                limits,
                SpawnError::Shim {
                    exe: spec.shim_exe.clone(),
                    source: io::Error::other(format!(
                        "{what}; is this program calling warden_process::run_if_shim() at the \
                         top of main?"
                    )),
                },
            )
        }
    }
}

/// The start of what a failed shim wrote to stderr (bounded in size and
/// time: a process it left may hold the pipe open).
async fn first_words(stderr: Option<ChildStderr>) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut limited = stderr?.take(2048);
    let _ = tokio::time::timeout(Duration::from_millis(300), limited.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

/// In the forked child: put the control socket on [`CONTROL_FD`], without
/// close-on-exec.
fn pass_control_fd(raw: i32) -> io::Result<()> {
    // SAFETY: `raw` is open in the child (inherited from the parent).
    let fd = unsafe { BorrowedFd::borrow_raw(raw) };
    if raw == CONTROL_FD {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
    } else {
        // The raw call: CONTROL_FD need not be open here, so it cannot be
        // named by an `OwnedFd` (whose contract is an open descriptor).
        // SAFETY: dup2 takes two plain descriptor numbers and touches no
        // memory; whatever CONTROL_FD was, nothing in this forked child
        // uses it before the exec hands it to the shim.
        if unsafe { libc::dup2(raw, CONTROL_FD) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Removes the run cgroups that dead wardens left behind next to the ones
/// this process makes.
fn remove_stale_cgroups() {
    if let Ok(parent) = os::cgroup::own_cgroup_dir() {
        os::cgroup::remove_stale(&parent);
    }
}

/// Removes a cgroup (and the v1 cgroups of its limits) off the runtime's
/// thread (removal retries while the last killed processes leave).
/// Removes what was made for a run that does not go ahead: its cgroup v2
/// (killing what is in it) and the v1 cgroups of its limits, on a blocking
/// thread (removal retries and sleeps; the clocks of other runs must not
/// wait for it).
fn discard(cgroup: Option<Cgroup>, limits: Option<RunLimits>) {
    match cgroup {
        Some(cg) => remove_in_background(cg, limits),
        None => {
            if let Some(l) = limits {
                drop(tokio::task::spawn_blocking(move || l.remove()));
            }
        }
    }
}

fn remove_in_background(cg: Cgroup, limits: Option<RunLimits>) {
    drop(tokio::task::spawn_blocking(move || {
        if !cg.pids().is_empty() {
            let _ = cg.kill();
        }
        let removed = cg.remove();
        if let Some(l) = limits {
            l.remove();
        }
        removed
    }));
}

/// The agent can SIGSTOP its shim (`kill -STOP $PPID`): the shim would then
/// neither reap nor report, and the run could not end by itself. It is
/// resumed within [`WATCH_SHIM`]. (A shim is never stopped legitimately:
/// it is in no terminal's foreground group.)
async fn resume_when_stopped(shim: i32) {
    let mut tick = tokio::time::interval(WATCH_SHIM);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if stopped(shim) {
            let _ = os::send(Target::Process(shim), Signal::Cont);
        }
    }
}

/// Whether the shim (a child of this process) is stopped by a signal.
/// Asked of the kernel without taking the stop from anyone (`WNOWAIT`),
/// and without a /proc read: every run asks ten times a second, and a
/// batch has hundreds.
fn stopped(shim: i32) -> bool {
    use rustix::process::{WaitId, WaitIdOptions, waitid};
    let Some(pid) = rustix::process::Pid::from_raw(shim) else {
        return false;
    };
    let how = WaitIdOptions::STOPPED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    matches!(waitid(WaitId::Pid(pid), how), Ok(Some(s)) if s.stopped())
}

fn pipe_inode(fd: BorrowedFd<'_>) -> io::Result<u64> {
    Ok(std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))?.ino())
}

impl RunTree {
    /// The agent's pid; 0 if its shim died before it could say.
    pub fn agent_pid(&self) -> i32 {
        self.agent_pid
    }

    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The resource limits in force: each, where, in which cgroup.
    pub fn limits_applied(&self) -> &[Applied] {
        self.limits.as_ref().map_or(&[], |l| &l.applied)
    }

    /// What the kernel did at the run's limits: what the shim reported,
    /// or what the cgroups count now if they are still there.
    pub fn resource_events(&self) -> ResourceEvents {
        match &self.limits {
            Some(l) => self.resource_events.max(l.events()),
            None => self.resource_events,
        }
    }

    /// The next report from the shim; `None` once the shim is gone. The
    /// shim's count of what happened at the limits is kept here (see
    /// [`Self::resource_events`]) as well as returned.
    pub async fn next_message(&mut self) -> Option<ShimMessage> {
        loop {
            match self.messages.next_line().await {
                Ok(Some(line)) => {
                    if let Some(m) = ShimMessage::parse(&line) {
                        if let ShimMessage::Resources {
                            oom_kills,
                            oom_at_limit,
                            pids_max,
                        } = m
                        {
                            self.resource_events = self.resource_events.max(ResourceEvents {
                                oom_kills,
                                oom_at_limit,
                                pids_max,
                            });
                        }
                        return Some(m);
                    }
                }
                _ => return None,
            }
        }
    }

    /// The live processes of the run now (not the shim): the shim's
    /// descendants, the cgroup's members, and, once the shim is dead (the
    /// agent can kill it), the members of the agent's process group, which
    /// are then nobody's descendants (a group's id cannot be reused while
    /// it has members, so these are the run's).
    pub fn pids(&self) -> Vec<i32> {
        let mut pids = procfs::live_descendants(self.shim_pid);
        let mut more = self.cgroup.as_ref().map(Cgroup::pids).unwrap_or_default();
        if self.agent_pid > 0 && !procfs::is_alive(self.shim_pid) {
            more.extend(procfs::group_members(self.agent_pid));
        }
        for p in more {
            if !pids.contains(&p) && procfs::is_alive(p) {
                pids.push(p);
            }
        }
        pids
    }

    /// The live processes of the run with their command lines.
    pub fn processes(&self) -> Vec<ProcessInfo> {
        self.pids()
            .into_iter()
            .map(|pid| ProcessInfo {
                pid,
                cmdline: procfs::cmdline(pid),
            })
            .collect()
    }

    /// Whether `pid` holds the agent's stdout or stderr pipe.
    pub fn holds_output(&self, pid: i32) -> bool {
        procfs::holds_pipe(pid, &self.pipe_inodes)
    }

    /// Every process (of the run or not) that still holds the agent's
    /// output pipes, warden itself excepted.
    pub fn pipe_holders(&self) -> Vec<ProcessInfo> {
        procfs::pipe_holders(&self.pipe_inodes, os::own_pid())
            .into_iter()
            .map(|pid| ProcessInfo {
                pid,
                cmdline: procfs::cmdline(pid),
            })
            .collect()
    }

    /// Sends `signal` to every process of the run, each exactly once;
    /// returns them (named before they were signalled).
    ///
    /// The agent's process group gets it as a group (which also reaches
    /// members forked since the scan, and works after its leader died: a
    /// group's id cannot be reused while any member lives); every other
    /// process found (one that moved to a group or session of its own)
    /// gets it by pid. SIGKILL also goes to the whole cgroup, and has the
    /// shim stop and kill whatever forks faster than a scan can follow.
    pub fn signal_all(&self, signal: Signal) -> Vec<ProcessInfo> {
        let procs: Vec<procfs::ProcEntry> =
            self.pids().into_iter().filter_map(procfs::entry).collect();
        let named = procs
            .iter()
            .map(|p| ProcessInfo {
                pid: p.pid,
                cmdline: procfs::cmdline(p.pid),
            })
            .collect();
        // SIGKILL one by one is left to the shim while it lives: it stops
        // before it kills, so nothing forks away between a scan and the
        // kill, and it can tell which processes left the cgroup.
        let mut by_pid = true;
        if signal == Signal::Kill {
            if let Some(cg) = &self.cgroup {
                // Atomic for the whole cgroup, forks racing the kill included.
                let _ = cg.kill();
            }
            by_pid = !self.request_sweep();
        }
        let group = self.agent_pid;
        // Only while a process of this run is in it: then it is ours.
        let group_alive = procs.iter().any(|p| p.pgid == group);
        if group_alive {
            let _ = os::send(Target::Group(group), signal);
        }
        for p in procs.iter().filter(|_| by_pid) {
            if !(group_alive && p.pgid == group) {
                let _ = os::send(Target::Process(p.pid), signal);
            }
        }
        named
    }

    /// Asks the shim to stop and kill every process of the run now; the
    /// orphans it kills come back as [`ShimMessage::Killed`]. Returns
    /// whether the request went out (the shim lives and was asked).
    pub fn request_sweep(&self) -> bool {
        let Some(control) = &self.control else {
            return false;
        };
        if !procfs::is_alive(self.shim_pid) {
            return false;
        }
        let _ = os::send(Target::Process(self.shim_pid), Signal::Cont);
        control
            .try_write(KILL_REQUEST)
            .is_ok_and(|n| n == KILL_REQUEST.len())
    }

    /// The cgroup `pid` moved itself to, if the run has a cgroup and the
    /// process is no longer in it.
    pub fn outside_cgroup(&self, pid: i32) -> Option<PathBuf> {
        self.cgroup.as_ref()?.outside(pid)
    }

    /// Ends the run's containment: closes the control socket (the shim then
    /// stops and kills whatever is left), waits for the shim to exit
    /// (bounded), and removes the cgroup. Returns the orphans the shim
    /// reported killing since the last message was read, each with
    /// whether it had left the run's cgroup.
    pub async fn close(&mut self) -> Vec<(ProcessInfo, bool)> {
        self.control.take();
        // Longer than the shim's sweep may take (5 s), so it is not cut off.
        match tokio::time::timeout(Duration::from_secs(8), self.shim.wait()).await {
            Ok(_) => {}
            Err(_) => {
                let _ = self.shim.start_kill();
                let _ = self.shim.wait().await;
            }
        }
        self.watchdog.abort();
        let mut killed = Vec::new();
        while let Ok(Some(m)) =
            tokio::time::timeout(Duration::from_millis(200), self.next_message()).await
        {
            if let ShimMessage::Killed {
                pid,
                escaped,
                cmdline,
            } = m
            {
                killed.push((ProcessInfo { pid, cmdline }, escaped));
            }
        }
        if let Some(stale) = self.stale.take() {
            let _ = stale.await;
        }
        // Counted once more where the shim could not (it was killed).
        self.resource_events = self.resource_events();
        if let Some(l) = self.limits.clone() {
            let _ = tokio::task::spawn_blocking(move || l.remove()).await;
        }
        if let Some(cg) = self.cgroup.clone() {
            let _ = tokio::task::spawn_blocking(move || {
                if !cg.pids().is_empty() {
                    let _ = cg.kill();
                }
                cg.remove();
            })
            .await;
        }
        killed
    }
}

impl Drop for RunTree {
    fn drop(&mut self) {
        self.watchdog.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn spec(shim_exe: PathBuf, timeout: Option<Duration>) -> SpawnSpec {
        SpawnSpec {
            program: "true".into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            env_clear: false,
            stdin: None,
            containment: ContainmentChoice::Subreaper,
            shim_exe,
            run_name: "warden-test".into(),
            timeout,
            resources: ResourceLimits::default(),
            if_warden_dies: Vec::new(),
        }
    }

    /// A shim that cannot be started leaves neither the run's cgroup v2 nor
    /// the v1 cgroups of its limits behind.
    #[tokio::test]
    async fn a_failed_start_removes_the_cgroups_made_for_the_run() {
        let mounts = Mounts::of_this_process();
        let Some(pids) = mounts
            .v1_for(crate::Controller::Pids)
            .map(|h| h.own.clone())
            .filter(|d| os::limits::writable_dir(d))
        else {
            eprintln!("skipped: no writable cgroup v1 pids hierarchy");
            return;
        };
        let name = format!("warden-leaktest{}", std::process::id());
        let mut s = spec("/nonexistent/warden-shim".into(), None);
        s.containment = ContainmentChoice::Auto;
        s.run_name = name.clone();
        s.resources = ResourceLimits {
            pids: Some(64),
            ..ResourceLimits::default()
        };
        assert!(matches!(spawn(s).await, Err(SpawnError::Shim { .. })));
        let left = |dir: &std::path::Path| -> Vec<String> {
            std::fs::read_dir(dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.starts_with(&name))
                        .collect()
                })
                .unwrap_or_default()
        };
        let v2 = os::cgroup::own_cgroup_dir().ok();
        let mut found = Vec::new();
        for _ in 0..100 {
            found = left(&pids);
            found.extend(v2.as_deref().map(left).unwrap_or_default());
            if found.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(found.is_empty(), "left behind: {found:?}");
    }

    #[tokio::test]
    async fn a_silent_shim_is_given_up_on_within_the_run_timeout() {
        // A program that never reports (as one that forgot run_if_shim and
        // went on with its own work would).
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("silent");
        std::fs::write(&exe, "#!/bin/sh\nexec sleep 30\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let start = std::time::Instant::now();
        let Err(e) = spawn(spec(exe, Some(Duration::from_millis(300)))).await else {
            panic!("a silent shim was accepted");
        };
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let text = e.to_string();
        assert!(text.contains("said nothing for 300ms"), "{text}");
        assert!(text.contains("run_if_shim"), "{text}");
    }
}
