//! warden as a library: run AI coding agents (or any command) headless,
//! supervised so that a run never hangs, never leaks a process, never
//! loses output, and always says why it ended.
//!
//! - [`RunRequest`]: one run (or session of runs) described as data,
//!   `Serialize + Deserialize`: the agent, the prompt, limits, sandbox,
//!   output, worktree. [`RunRequest::check`] finds what cannot run before
//!   anything starts; [`RunRequest::spec`] gives a run's [`RunSpec`].
//! - [`Run`]: one supervised run; its [`RunHandle`] gives the run's
//!   [`Stamped`] events as they happen and its [`Report`] at the end.
//! - [`session::Session`]: the iterations of a request (a fresh process
//!   each, in a new git worktree if asked, wrong structured output resumed
//!   with a correction, runs that ended by a transient failure tried again
//!   as [`retry::RetryPolicy`] says), ending in a [`session::SessionReport`].
//! - [`batch::Batch`]: many requests, N at a time, cancel-all, one
//!   [`batch_report::BatchReport`].
//! - Sessions and batches say what happens through one typed stream of
//!   [`update::Update`]s; their handles' `wait()` never needs the stream
//!   drained first.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use warden_run::{Agent, Run, RunRequest};
//! let request = RunRequest::agent(Agent::Claude, "Fix the failing test");
//! request.check()?; // the CLI is installed, the prompt is whole, ...
//! let spec = request.spec(&request.iteration_context().await)?;
//! let mut run = Run::new(spec).spawn().await?;
//! while let Some(ev) = run.next_event().await {
//!     println!("{} {:?}", ev.t_ms, ev.event);
//! }
//! let report = run.wait().await; // always returns, with a verdict
//! println!("{:?}: {}", report.verdict, report.reason);
//! # Ok(()) }
//! ```
//!
//! The crate's `examples/` (`agent_run`, `session`, `batch`) are whole
//! programs; the tests run each of them.
//!
//! A program that embeds this crate must call [`run_if_shim`] first thing
//! in `main`: each run's process tree is held by a small shim, which is
//! the program itself started again (see `warden_process::shim`). It
//! never prints to a terminal.
//!
//! # Features
//!
//! None is on by default: a program that supervises runs, sessions or
//! batches and reads their reports builds only that (53 crates, where
//! all of them take 190).
//!
//! - `telemetry`: OpenTelemetry export over OTLP (HTTP/protobuf or gRPC,
//!   with TLS) of spans and metrics, and the metrics as Prometheus text
//!   ([`telemetry::Telemetry`]). Without it the [`telemetry`] module keeps
//!   only its configuration and trace ids, and
//!   [`telemetry::Telemetry::start`] refuses a configuration that asks for
//!   an export, naming the feature.
//! - `junit`: a batch's report as a JUnit XML file (the `junit` module).
//! - `output-schema`: structured output checked against a JSON Schema
//!   ([`OutputRequest::schema`]). Without it, a run whose request has a
//!   schema fails to start with an error naming the feature.
//! - `full`: all of the above (what the `warden` CLI turns on).

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod artifacts;
pub mod batch;
pub mod batch_key;
mod batch_plan;
pub mod batch_report;
pub mod budget;
mod clocks;
pub mod defaults;
pub mod executor;
pub mod gc;
pub mod git;
mod held_dir;
#[cfg(feature = "junit")]
#[cfg_attr(docsrs, doc(cfg(feature = "junit")))]
pub mod junit;
mod keys;
pub mod limits;
mod live;
pub mod logged_lines;
pub mod output;
pub mod outputs;
mod pipe;
/// Reading a file of the work tree without following a link or blocking
/// on a FIFO; for the warden CLI, not part of the library's API.
#[doc(hidden)]
pub mod regular_file;
mod remove;
pub mod report;
pub mod request;
pub mod resources;
pub mod retry;
pub mod session;
mod supervisor;
pub mod telemetry;
pub mod template;
pub mod update;
pub mod verdict;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use held_dir::DirError;
pub use held_dir::new_run_id;
pub use limits::Limits;
pub use report::Report;
pub use request::{OutputRequest, Prompt, RequestError, RunRequest, SessionRequest};
pub use supervisor::Control;
pub use verdict::Verdict;
pub use warden_events::event::Stamped;
pub use warden_events::{Agent, Event};
pub use warden_process::{ContainmentChoice, run_if_shim};
pub use warden_sandbox::env::EnvArg;
pub use warden_sandbox::{Sandbox, SandboxChoice, SandboxOptions};

use artifacts::RunDir;
use held_dir::off_clock;
use supervisor::{Setup, Supervisor};
use warden_sandbox::env::agent_env;
use warden_sandbox::{SandboxError, Target};

/// Everything needed to start one run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The agent: how its output is decoded and judged.
    pub agent: Agent,
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// The working directory of the agent.
    pub cwd: PathBuf,
    /// Where the artifacts go; `<cwd>/.warden/runs/<run-id>` if `None`.
    pub run_dir: Option<PathBuf>,
    pub limits: Limits,
    pub containment: ContainmentChoice,
    /// Variables set for the agent on top of warden's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Written to the agent's stdin, which is then closed; `None` gives it
    /// /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// The program that acts as the run's shim; the running executable if
    /// `None`.
    pub shim_exe: Option<PathBuf>,
    /// Where the agent runs (host by default).
    pub sandbox: SandboxOptions,
    /// `--env NAME` / `--env NAME=VALUE`: passed to the agent (also into a
    /// sandbox) and treated as secrets.
    pub env_args: Vec<EnvArg>,
    /// `--output-tag`: take `<TAG>…</TAG>` from the final text (validated
    /// against the schema, if given) into the report's `output`.
    pub output_tag: Option<String>,
    pub output_schema: Option<(PathBuf, serde_json::Value)>,
    /// Budgets shared with the runs before this one (a session's, a
    /// batch's), with what those spent; the run's own is `limits.budget`.
    pub budgets: Vec<budget::SharedBudget>,
    /// What the earlier attempts at the same step of a session (retries of
    /// a transient failure, output retries) spent: counted against the
    /// run's own budget, which holds for the step, not for each attempt.
    pub run_spent_before: budget::Spent,
    /// The running total of tokens the agent's session to resume had
    /// reported (Codex counts usage over the whole thread): the run's
    /// tokens are what it reports beyond it.
    pub usage_baseline: warden_events::Tokens,
    /// A batch's budget held live with the runs running beside this one
    /// (the local executor's); its runs publish their spending there.
    pub budget_pool: Option<std::sync::Arc<budget::BudgetPool>>,
    /// OpenTelemetry export (off when `None`).
    pub telemetry: Option<RunTelemetry>,
}

impl RunSpec {
    /// A spec for `exec`: any command, with the default limits, in the
    /// current directory.
    pub fn exec<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            agent: Agent::Exec,
            command: command.into_iter().map(Into::into).collect(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            run_dir: None,
            limits: Limits::default(),
            containment: ContainmentChoice::Auto,
            env: Vec::new(),
            stdin: None,
            shim_exe: None,
            sandbox: SandboxOptions::default(),
            env_args: Vec::new(),
            output_tag: None,
            output_schema: None,
            budgets: Vec::new(),
            run_spent_before: budget::Spent::default(),
            usage_baseline: warden_events::Tokens::default(),
            budget_pool: None,
            telemetry: None,
        }
    }
}

/// OpenTelemetry export for one run: the process's telemetry (its spans,
/// its metrics) and the ids of the run's span (chosen before the agent
/// starts, which gets them as `TRACEPARENT` when spans are exported).
#[derive(Debug, Clone)]
pub struct RunTelemetry {
    pub exporter: telemetry::Telemetry,
    pub ids: telemetry::TraceIds,
}

/// What stops a run before it starts: warden cannot keep its promise of
/// writing everything down.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("the command is empty: name a program to run")]
    EmptyCommand,
    #[error("could not use the run directory: {0}")]
    RunDir(#[from] held_dir::DirError),
    #[error("could not find warden's own executable to use as the run's shim: {0}")]
    ShimExe(std::io::Error),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Output(#[from] output::OutputError),
    #[error("could not make the worktree: {0}")]
    Git(git::GitError),
    #[error(transparent)]
    StartedAsShim(warden_process::SpawnError),
    /// A resource limit (`--memory`, `--pids`, `--cpus`) that nothing on
    /// this machine can enforce.
    #[error(transparent)]
    Resources(#[from] warden_process::os::limits::LimitError),
    /// `--otel-agent` for an agent whose CLI warden cannot make export.
    #[error(transparent)]
    Telemetry(#[from] telemetry::TelemetryError),
}

impl SetupError {
    /// Whether the machine, not the request, is at fault (a sandbox that
    /// cannot run here): that is `spawn_failed` (6); the rest is usage (2).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            SetupError::Sandbox(SandboxError::BwrapUnavailable(_) | SandboxError::NoEngine { .. })
        )
    }

    /// warden's exit code for this error: 6 when the machine cannot run
    /// the sandbox, [`report::OUTPUT_LOST_EXIT`] when the file system
    /// cannot keep the run's output (full, read-only, failing), 2 for a
    /// bad request.
    pub fn exit_code(&self) -> u8 {
        use rustix::io::Errno;
        if self.is_unavailable() {
            return 6;
        }
        let storage = [Errno::NOSPC, Errno::DQUOT, Errno::IO, Errno::ROFS];
        match self {
            SetupError::RunDir(e)
                if e.io()
                    .and_then(std::io::Error::raw_os_error)
                    .is_some_and(|code| storage.iter().any(|s| s.raw_os_error() == code)) =>
            {
                report::OUTPUT_LOST_EXIT
            }
            _ => 2,
        }
    }
}

/// A run that has not started yet.
pub struct Run {
    spec: RunSpec,
}

impl Run {
    pub fn new(spec: RunSpec) -> Self {
        Self { spec }
    }

    /// Starts the run under its supervisor. Must be called inside a tokio
    /// runtime. An agent that cannot be started is not an error here: the
    /// run ends at once with the verdict `spawn_failed`.
    ///
    /// Async because starting asks git for the base commit and may probe
    /// bubblewrap: both are bounded and run off the runtime's threads, so
    /// the clocks of other runs in the same process keep time meanwhile.
    pub async fn spawn(self) -> Result<RunHandle, SetupError> {
        let mut spec = self.spec;
        // Before anything is created: in a process started as a shim, a
        // run would start this program again, and again.
        if warden_process::started_as_shim() {
            return Err(SetupError::StartedAsShim(
                warden_process::SpawnError::StartedAsShim,
            ));
        }
        if spec.command.is_empty() {
            return Err(SetupError::EmptyCommand);
        }
        let shim_exe = match spec.shim_exe.clone() {
            Some(p) => p,
            None => std::env::current_exe().map_err(SetupError::ShimExe)?,
        };
        let started_at = SystemTime::now();
        let started = Instant::now();
        let run_id = new_run_id(started_at);
        let run_dir = spec
            .run_dir
            .clone()
            .unwrap_or_else(|| spec.cwd.join(defaults::RUNS_DIR).join(&run_id));
        let run_dir = absolute(&spec.cwd, &run_dir);
        let mut fixed = spec.env.clone();
        if let Some(deadline) = spec.limits.timeout.and_then(|t| {
            started_at
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .checked_add(t)
        }) {
            fixed.push((
                "WARDEN_DEADLINE".into(),
                deadline.as_secs().to_string().into(),
            ));
        }
        fixed.push(("WARDEN_RUN_ID".into(), run_id.clone().into()));
        // The run's span as the agent's parent: an agent that exports its
        // own spans nests them under it.
        // Without spans exported there is no span to nest under.
        if let Some((t, traces)) = spec
            .telemetry
            .as_ref()
            .and_then(|t| Some((t, t.exporter.traces_config()?)))
        {
            fixed.push(("TRACEPARENT".into(), t.ids.traceparent().into()));
            if traces.agent_export {
                let export = telemetry::agent_export(spec.agent, traces)?;
                fixed.extend(export.env.into_iter().map(|(k, v)| (k.into(), v.into())));
                // The user's value, from warden's environment or the
                // request's, wins.
                let defaults: Vec<(OsString, OsString)> = export
                    .env_defaults
                    .into_iter()
                    .filter(|(k, _)| {
                        std::env::var_os(k).is_none() && !fixed.iter().any(|(f, _)| f == k.as_str())
                    })
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect();
                fixed.extend(defaults);
                spec.command.extend(export.args.into_iter().map(Into::into));
            }
        }

        // The agent's environment (an allowlist inside a sandbox) and the
        // command line that starts it there. Checked before anything is
        // created, so a bad request leaves nothing behind.
        let sandbox = spec.sandbox.sandbox;
        let host_env: Vec<(String, String)> = std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        let needs = request::sandbox_needs(spec.agent);
        let home_dir = std::env::var_os("HOME").map(PathBuf::from);
        let env_dropped = warden_sandbox::env::dropped(
            &needs,
            sandbox != Sandbox::Host,
            &host_env,
            &spec.env_args,
            home_dir.as_deref(),
        );
        let agent_env = agent_env(
            &needs,
            sandbox != Sandbox::Host,
            &host_env,
            &fixed,
            &spec.env_args,
        );
        match sandbox {
            Sandbox::Bwrap => {
                // The probe starts bwrap and waits for it: on a blocking
                // thread, never on one that drives clocks.
                tokio::task::spawn_blocking(warden_sandbox::probe::bwrap)
                    .await
                    .unwrap_or_else(|e| Err(format!("the bubblewrap probe failed: {e}")))
                    .map_err(SandboxError::BwrapUnavailable)?;
            }
            Sandbox::Docker | Sandbox::Podman => {
                let engine = if sandbox == Sandbox::Docker {
                    "docker"
                } else {
                    "podman"
                };
                let on_path = std::env::var_os("PATH")
                    .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(engine).is_file()));
                if !on_path {
                    return Err(SandboxError::NoEngine { engine }.into());
                }
            }
            Sandbox::Host => {}
        }
        // Limits nothing here can enforce are refused before anything is
        // made (they are never silently dropped).
        let (resources, sandbox_kind, containment) =
            (spec.limits.resources, sandbox, spec.containment);
        tokio::task::spawn_blocking(move || {
            resources::check(&resources, sandbox_kind, containment)
        })
        .await
        .unwrap_or(Ok(()))?;
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        let container_name = format!("warden-{run_id}");
        let target = SandboxTarget {
            options: spec.sandbox.clone(),
            needs,
            program: spec.command[0].clone(),
            args: spec.command[1..].to_vec(),
            workdir: spec.cwd.clone(),
            home,
            env: agent_env.vars.clone(),
            name: container_name,
            run_dir: run_dir.clone(),
            limits: matches!(sandbox, Sandbox::Docker | Sandbox::Podman)
                .then(|| resources::for_container(&spec.limits.resources)),
        };
        let mut wrapped = target.clone().wrap().await?;

        let output = match &spec.output_tag {
            Some(tag) => Some(supervisor::OutputSpec {
                tag: tag.clone(),
                schema: match &spec.output_schema {
                    Some((path, schema)) => Some(output::Schema::compile(
                        schema,
                        &path.display().to_string(),
                    )?),
                    None => None,
                },
            }),
            None => None,
        };
        let git = if git::in_work_tree(&spec.cwd) {
            Some(supervisor::GitStart {
                dir: spec.cwd.clone(),
                base: git::head(&spec.cwd).await,
            })
        } else {
            None
        };

        // File system work (slow on a busy disk), kept off the thread that
        // drives the clocks of the runs already going.
        let dir = off_clock(&run_dir, RunDir::create).await?;
        let dir_handle = dir.handle();
        let setup = Setup {
            run_id: run_id.clone(),
            agent: spec.agent,
            command: spec
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: spec.cwd.clone(),
            limits: spec.limits.clone(),
            dir,
            started,
            started_at,
            redactor: warden_events::Redactor::new(agent_env.secrets.clone()),
            sandbox,
            containment_extra: wrapped.containment,
            on_kill: wrapped.on_kill.clone(),
            git,
            output,
            env_dropped,
            budgets: spec.budgets.clone(),
            run_spent_before: spec.run_spent_before,
            usage_baseline: spec.usage_baseline,
            pool: spec.budget_pool.clone(),
            telemetry: spec.telemetry.clone(),
        };
        let (event_tx, event_rx) = mpsc::channel(live::CAPACITY);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let supervisor = Supervisor::new(setup, Some(event_tx));
        let fallback = supervisor.report(None, "starting".into());

        // A daemon's socket covered by the command line may have gone
        // since it was built (the run directory, git, the supervisor came
        // in between): built again from what is there now, just before it
        // starts, as the sandbox would fail on it.
        if wrapped.vanished() {
            wrapped = target.wrap().await?;
        }
        let process = warden_process::SpawnSpec {
            program: wrapped.program,
            args: wrapped.args,
            cwd: Some(spec.cwd.clone()),
            env: agent_env.vars,
            env_clear: agent_env.clear,
            stdin: spec.stdin.clone(),
            containment: spec.containment,
            shim_exe,
            run_name: format!("warden-{run_id}"),
            timeout: spec.limits.timeout,
            resources: resources::for_cgroups(&spec.limits.resources, sandbox),
        };
        let task = tokio::spawn(async move {
            match warden_process::spawn(process).await {
                Ok(tree) => supervisor.run(tree, control_rx).await,
                Err(e) => supervisor.spawn_failed(e).await,
            }
        });
        Ok(RunHandle {
            run_id,
            run_dir,
            events: event_rx,
            control: control_tx,
            task,
            fallback,
            dir: dir_handle,
        })
    }
}

/// What the agent's sandbox is built from, owned, so that the command
/// line can be built off the clocks' thread and built again.
#[derive(Clone)]
struct SandboxTarget {
    options: SandboxOptions,
    needs: warden_sandbox::AgentNeeds,
    program: OsString,
    args: Vec<OsString>,
    workdir: PathBuf,
    home: PathBuf,
    env: Vec<(OsString, OsString)>,
    name: String,
    run_dir: PathBuf,
    /// A container's resource limits, for its engine.
    limits: Option<warden_sandbox::container::ContainerLimits>,
}

impl SandboxTarget {
    /// The command line that starts the agent in its sandbox. Building it
    /// reads the file system (every listening socket in /proc, the
    /// records to hide): on a blocking thread, never on the clocks'.
    async fn wrap(mut self) -> Result<warden_sandbox::Wrapped, SandboxError> {
        let workdir = self.workdir.clone();
        // The batches' keys, where HOME (which every sandbox replaces) does
        // not already hide them: an agent that read one could sign a
        // request of its own for a batch to run.
        if let Some(keys) = crate::keys::keys_dir_outside_home()
            && !self.options.records.contains(&keys)
        {
            self.options.records.push(keys);
        }
        tokio::task::spawn_blocking(move || {
            let mut wrapped = warden_sandbox::wrap(
                &self.options,
                Target {
                    needs: self.needs,
                    program: self.program,
                    args: self.args,
                    workdir: &self.workdir,
                    home: &self.home,
                    env: &self.env,
                    name: &self.name,
                    run_dir: Some(&self.run_dir),
                },
            )?;
            if let Some(limits) = &self.limits {
                warden_sandbox::container::add_limits(&mut wrapped, limits);
            }
            Ok(wrapped)
        })
        .await
        .unwrap_or_else(|e| {
            Err(SandboxError::Prepare {
                path: workdir,
                message: format!("the task building the sandbox failed: {e}"),
            })
        })
    }
}

/// A run in progress: its events, a way to stop it, and its report.
///
/// The live events ([`next_event`](Self::next_event)) are a bounded feed
/// that the run never waits on: when the caller falls behind, as under a
/// burst of output, line events (`text`, `stderr`, `thinking`,
/// `oversized_line`) are left out of it and counted in the report's
/// `live_events_dropped`. `events.jsonl` in the run directory has them
/// all. Reading the events is optional: [`wait`](Self::wait) returns as
/// soon as the run has ended, whether or not they were read.
pub struct RunHandle {
    run_id: String,
    run_dir: PathBuf,
    events: mpsc::Receiver<Stamped>,
    control: mpsc::UnboundedSender<Control>,
    task: JoinHandle<Report>,
    fallback: Report,
    dir: held_dir::HeldDir,
}

/// A cloneable way to stop a run, for signal handlers and other tasks.
#[derive(Debug, Clone)]
pub struct Canceller(mpsc::UnboundedSender<Control>);

impl Canceller {
    /// Ends the run gracefully: SIGTERM, the kill grace, SIGKILL.
    pub fn cancel(&self) {
        let _ = self.0.send(Control::Cancel);
    }

    /// Ends the run now: SIGKILL to every process of the run.
    pub fn kill(&self) {
        let _ = self.0.send(Control::Kill);
    }
}

impl RunHandle {
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The next event; `None` once the run has finished and every event
    /// was taken. Line events may be missing from this feed when the
    /// caller falls behind (see [`RunHandle`]); `events.jsonl` has them all.
    pub async fn next_event(&mut self) -> Option<Stamped> {
        self.events.recv().await
    }

    pub fn canceller(&self) -> Canceller {
        Canceller(self.control.clone())
    }

    /// Waits for the end of the run. Always returns a report with a
    /// verdict; `run.json` has it when `written` is true (a full disk can
    /// prevent that: then `output_lost` says why).
    ///
    /// The events need not be read first: the events not taken yet are
    /// given up here, so the run's end never waits on a reader that is
    /// no longer there.
    pub async fn wait(self) -> Report {
        let Self {
            events,
            task,
            fallback,
            dir,
            ..
        } = self;
        // Closing the feed tells the supervisor nobody reads it any more:
        // otherwise, with events still waiting for room, it would give this
        // very caller time to take them before it returns the report.
        drop(events);
        match task.await {
            Ok(report) => report,
            Err(e) => {
                let mut report = fallback;
                report.verdict = Some(Verdict::InternalError);
                report.reason = "warden's supervisor failed".into();
                report.error = Some(format!("the supervisor task failed: {e}"));
                report.written = artifacts::write_report(&dir, &report).is_ok();
                report
            }
        }
    }
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}
