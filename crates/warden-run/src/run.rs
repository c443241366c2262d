//! One supervised run: [`Run`] starts it from a [`RunRequest`], its
//! [`RunHandle`] gives what happens and, at the end, the report.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use warden_events::event::Stamped;
use warden_sandbox::env::agent_env;
use warden_sandbox::{Sandbox, SandboxError, SandboxOptions, Target};

use crate::artifacts::{self, RunDir};
use crate::held_dir::{self, HeldDir, new_run_id, off_clock};
use crate::outcome::Outcome;
use crate::plan::RunPlan;
use crate::report::Report;
use crate::request::{ErrorKind, RequestError, RunRequest};
use crate::supervisor::{self, Control, Setup, Supervisor};
use crate::telemetry::RunTelemetry;
use crate::update::Update;
use crate::verdict::Verdict;
use crate::{defaults, git, live, output, resources, telemetry};

/// What stops a run (or a session, or a batch's entry) before it starts:
/// the request cannot run, or warden cannot keep its promise of writing
/// everything down.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The request itself (a missing CLI, a bad template, a setting that
    /// does not fit the agent).
    #[error(transparent)]
    Request(#[from] RequestError),
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
    /// A resource limit (`limits.resources`) that nothing on this machine
    /// can enforce.
    #[error(transparent)]
    Resources(#[from] warden_process::os::limits::LimitError),
    /// Telemetry asked of an agent whose CLI warden cannot make export.
    #[error(transparent)]
    Telemetry(#[from] telemetry::TelemetryError),
}

impl SetupError {
    pub fn kind(&self) -> ErrorKind {
        use rustix::io::Errno;
        let storage = [Errno::NOSPC, Errno::DQUOT, Errno::IO, Errno::ROFS];
        match self {
            SetupError::Request(e) => e.kind(),
            SetupError::Sandbox(
                SandboxError::BwrapUnavailable(_) | SandboxError::NoEngine { .. },
            ) => ErrorKind::Unavailable,
            SetupError::RunDir(e)
                if e.io()
                    .and_then(std::io::Error::raw_os_error)
                    .is_some_and(|code| storage.iter().any(|s| s.raw_os_error() == code)) =>
            {
                ErrorKind::Storage
            }
            _ => ErrorKind::Invalid,
        }
    }

    /// Whether the file system cannot keep the run's records (full,
    /// read-only, failing): nothing of the run could be written down.
    pub fn is_storage(&self) -> bool {
        self.kind() == ErrorKind::Storage
    }
}

/// One run, not started yet: a [`RunRequest`] and how to export it.
///
/// The request is run as one run, whatever its session settings say
/// (iterations, retries, a worktree): a [`crate::session::Session`] runs
/// those.
pub struct Run {
    request: RunRequest,
    telemetry: Option<telemetry::Telemetry>,
}

impl Run {
    pub fn new(request: RunRequest) -> Self {
        Self {
            request,
            telemetry: None,
        }
    }

    /// Exports the run's span and metrics through `telemetry`.
    pub fn telemetry(mut self, telemetry: telemetry::Telemetry) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    /// Starts the run under its supervisor. Must be called inside a tokio
    /// runtime. A request that cannot run is an error here (checked as
    /// [`RunRequest::check`] does); an agent that fails to start is not:
    /// the run ends at once with the verdict `spawn_failed`.
    ///
    /// Async because starting asks git for the base commit and may probe
    /// bubblewrap: both are bounded and run off the runtime's threads, so
    /// the clocks of other runs in the same process keep time meanwhile.
    pub async fn start(self) -> Result<RunHandle, SetupError> {
        self.request.check()?;
        let ctx = self.request.iteration_context().await;
        let mut plan = self.request.plan(&ctx)?;
        plan.shared.telemetry = self.telemetry.map(RunTelemetry::top);
        start(plan).await
    }
}

/// Starts the run `plan` describes.
pub(crate) async fn start(mut plan: RunPlan) -> Result<RunHandle, SetupError> {
    // Before anything is created: in a process started as a shim, a run
    // would start this program again, and again.
    if warden_process::started_as_shim() {
        return Err(SetupError::StartedAsShim(
            warden_process::SpawnError::StartedAsShim,
        ));
    }
    if plan.command.is_empty() {
        return Err(SetupError::EmptyCommand);
    }
    let shim_exe = match plan.shim_exe.clone() {
        Some(p) => p,
        None => std::env::current_exe().map_err(SetupError::ShimExe)?,
    };
    let started_at = SystemTime::now();
    let started = crate::clocks::now();
    let run_id = new_run_id(started_at);
    let run_dir = plan.run_dir.clone().unwrap_or_else(|| {
        plan.project
            .as_ref()
            .unwrap_or(&plan.cwd)
            .join(defaults::RUNS_DIR)
            .join(&run_id)
    });
    let run_dir = absolute(&plan.cwd, &run_dir);
    let fixed = warden_env(&mut plan, &run_id, started_at)?;

    // The agent's environment (an allowlist inside a sandbox) and the
    // command line that starts it there. Checked before anything is
    // created, so a bad request leaves nothing behind.
    let sandbox = plan.sandbox.sandbox;
    let needs = crate::request::sandbox_needs(plan.agent);
    let home_dir = std::env::var_os("HOME").map(PathBuf::from);
    let (agent_env, env_dropped) = agent_environment(&plan, &needs, &fixed, home_dir.as_deref());
    let codex_home = (plan.agent == warden_events::Agent::Codex)
        .then(|| crate::codex_thread::home(&agent_env.vars, home_dir.as_deref()))
        .flatten();
    enforceable(&plan).await?;
    let cid_dir = cid_dir(&plan).await?;
    let target = SandboxTarget {
        options: plan.sandbox.clone(),
        needs,
        program: plan.command[0].clone(),
        args: plan.command[1..].to_vec(),
        workdir: plan.cwd.clone(),
        home: home_dir.unwrap_or_else(|| PathBuf::from("/")),
        env: agent_env.vars.clone(),
        name: resources::container_name(&run_id),
        run_dir: run_dir.clone(),
        limits: matches!(sandbox, Sandbox::Docker | Sandbox::Podman)
            .then(|| resources::for_container(&plan.limits.resources)),
        container: cid_dir.as_ref().map(|d| ContainerFlags {
            run_id: run_id.clone(),
            cidfile: d.file(),
        }),
    };
    let mut wrapped = target.clone().wrap().await?;
    let output = output_spec(&plan)?;
    let git = if git::in_work_tree(&plan.cwd) {
        Some(supervisor::GitStart {
            dir: plan.cwd.clone(),
            base: git::head(&plan.cwd).await,
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
        agent: plan.agent,
        command: plan
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: plan.cwd.clone(),
        limits: plan.limits.clone(),
        started,
        started_at,
        redactor: warden_events::Redactor::new(agent_env.secrets.clone()),
        sandbox,
        containment_extra: wrapped.containment,
        on_kill: wrapped.on_kill.clone(),
        git,
        output,
        env_dropped,
        shared: plan.shared,
        container: target.container.as_ref().map(|_| supervisor::ContainerRun {
            sandbox,
            image: plan.sandbox.image.clone().unwrap_or_default(),
            cid: cid_dir,
            sweep: crate::container_sweep::start_once(sandbox),
        }),
        codex_home,
    };
    let (event_tx, event_rx) = mpsc::channel(live::CAPACITY);
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let supervisor = Supervisor::new(setup, dir, Some(event_tx));
    let output_lines = supervisor.output_lines();
    let fallback = supervisor.report(None, "starting".into());

    // A daemon's socket covered by the command line may have gone since
    // it was built (the run directory, git, the supervisor came in
    // between): built again from what is there now, just before it
    // starts, as the sandbox would fail on it.
    if wrapped.vanished() {
        wrapped = target.wrap().await?;
    }
    let mut env = agent_env.vars;
    add_client_vars(&mut env, sandbox);
    let process = warden_process::SpawnSpec {
        program: wrapped.program,
        args: wrapped.args,
        cwd: Some(plan.cwd.clone()),
        env,
        env_clear: agent_env.clear,
        stdin: plan.stdin.clone(),
        containment: plan.containment,
        shim_exe,
        run_name: format!("warden-{run_id}"),
        timeout: plan.limits.timeout,
        resources: resources::for_cgroups(&plan.limits.resources, sandbox),
        // A container is its engine's daemon's, outside the run's tree:
        // if warden is SIGKILLed, the shim removes it.
        if_warden_dies: wrapped.on_kill.clone().unwrap_or_default(),
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
        output_lines,
        events: event_rx,
        control: control_tx,
        task,
        fallback,
        dir: dir_handle,
    })
}

/// What warden itself tells the agent through its environment, on top of
/// what the agent's CLI needs: the run's id, its deadline, the span to
/// nest under and how to export to it (which may add arguments too).
fn warden_env(
    plan: &mut RunPlan,
    run_id: &str,
    started_at: SystemTime,
) -> Result<Vec<(OsString, OsString)>, SetupError> {
    let mut fixed = plan.env.clone();
    if let Some(deadline) = plan.limits.timeout.and_then(|t| {
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
    fixed.push(("WARDEN_RUN_ID".into(), run_id.into()));
    // The run's span as the agent's parent: an agent that exports its own
    // spans nests them under it. Without spans exported there is no span
    // to nest under.
    let Some((t, traces)) = plan
        .shared
        .telemetry
        .as_ref()
        .and_then(|t| Some((t, t.exporter.traces_config()?)))
    else {
        return Ok(fixed);
    };
    fixed.push(("TRACEPARENT".into(), t.ids.traceparent().into()));
    if traces.agent_export {
        let export = telemetry::agent_export(plan.agent, traces)?;
        fixed.extend(export.env.into_iter().map(|(k, v)| (k.into(), v.into())));
        // The user's value, from warden's environment or the request's,
        // wins.
        let defaults: Vec<(OsString, OsString)> = export
            .env_defaults
            .into_iter()
            .filter(|(k, _)| {
                std::env::var_os(k).is_none() && !fixed.iter().any(|(f, _)| f == k.as_str())
            })
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        fixed.extend(defaults);
        plan.command.extend(export.args.into_iter().map(Into::into));
    }
    Ok(fixed)
}

/// The agent's environment from warden's (an allowlist inside a
/// sandbox) and `fixed`, and what the agent's set-up refers to that will
/// not reach it (the report's `env_dropped`).
fn agent_environment(
    plan: &RunPlan,
    needs: &warden_sandbox::SandboxNeeds,
    fixed: &[(OsString, OsString)],
    home: Option<&Path>,
) -> (warden_sandbox::env::AgentEnv, Vec<String>) {
    let sandboxed = plan.sandbox.sandbox != Sandbox::Host;
    let host: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let dropped = warden_sandbox::env::dropped(needs, sandboxed, &host, &plan.env_args, home);
    let env = agent_env(needs, sandboxed, &host, fixed, &plan.env_args);
    (env, dropped)
}

/// What a run of `plan` masks wherever it reports: the secret values of
/// its environment (all of `--env`, and warden's own that look like one),
/// for what is said of the run before it starts or besides its report.
pub(crate) fn redactor_of(plan: &RunPlan) -> warden_events::Redactor {
    let needs = crate::request::sandbox_needs(plan.agent);
    let (env, _) = agent_environment(plan, &needs, &[], None);
    warden_events::Redactor::new(env.secrets)
}

/// Refuses a sandbox this machine cannot run, before anything is made.
async fn sandbox_available(sandbox: Sandbox) -> Result<(), SandboxError> {
    match sandbox {
        Sandbox::Bwrap => {
            // The probe starts bwrap and waits for it: on a blocking
            // thread, never on one that drives clocks.
            tokio::task::spawn_blocking(warden_sandbox::probe::bwrap)
                .await
                .unwrap_or_else(|e| Err(format!("the bubblewrap probe failed: {e}")))
                .map(drop)
                .map_err(SandboxError::BwrapUnavailable)
        }
        Sandbox::Docker | Sandbox::Podman => {
            let engine = sandbox.name();
            let on_path = std::env::var_os("PATH")
                .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(engine).is_file()));
            if on_path {
                Ok(())
            } else {
                Err(SandboxError::NoEngine { engine })
            }
        }
        Sandbox::Host => Ok(()),
    }
}

/// In a container, the directory of warden's own for the file the
/// engine's client writes the container's id to; made off the clocks'
/// The sandbox can be made here, and every resource limit asked for can
/// be enforced: refused before anything is made (a limit is never
/// silently dropped).
async fn enforceable(plan: &RunPlan) -> Result<(), SetupError> {
    let sandbox = plan.sandbox.sandbox;
    sandbox_available(sandbox).await?;
    let (limits, containment) = (plan.limits.resources, plan.containment);
    tokio::task::spawn_blocking(move || resources::check(&limits, sandbox, containment))
        .await
        .unwrap_or(Ok(()))?;
    Ok(())
}

/// thread.
async fn cid_dir(plan: &RunPlan) -> Result<Option<crate::container_sweep::CidDir>, SandboxError> {
    let options = &plan.sandbox;
    if !options.is_container() {
        return Ok(None);
    }
    // What the container mounts from the host (the agent's state
    // directories lie in HOME, never a temporary directory).
    let mut mounts = vec![plan.cwd.clone()];
    mounts.extend(options.ro.iter().cloned());
    mounts.extend(options.rw.iter().cloned());
    mounts.extend(options.allow_sockets.iter().cloned());
    tokio::task::spawn_blocking(move || crate::container_sweep::CidDir::create(&mounts))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        .map(Some)
        .map_err(|e| SandboxError::Prepare {
            path: std::env::temp_dir(),
            message: format!("could not make a directory for the container's id there: {e}"),
        })
}

/// Gives a container engine's client the variables of warden's own
/// environment that say where its engine is (`DOCKER_HOST`,
/// `CONTAINER_HOST`, ...: [`warden_sandbox::container::client_vars`]),
/// which the agent's allowlisted environment leaves out. They reach the
/// client only: the container gets the variables its command line names
/// with `-e`, made before these were added. Always warden's values: the
/// end of the run (`rm -f`, the shim's when warden dies, the limits'
/// `inspect`, the sweep) asks the engine in warden's environment, so a
/// client sent elsewhere by the agent's `--env DOCKER_HOST` would leave
/// its container where nothing removes it; the agent's value goes into
/// the container by value (`-e NAME=VALUE`).
fn add_client_vars(env: &mut Vec<(OsString, OsString)>, sandbox: Sandbox) {
    for name in warden_sandbox::container::client_vars(sandbox) {
        env.retain(|(k, _)| k != name);
        if let Some(v) = std::env::var_os(name) {
            env.push((name.into(), v));
        }
    }
}

/// What names a run's container: its labels and its `--cidfile`.
#[derive(Clone)]
struct ContainerFlags {
    run_id: String,
    cidfile: PathBuf,
}

/// The structured output the run must give, its schema compiled.
fn output_spec(plan: &RunPlan) -> Result<Option<supervisor::OutputSpec>, SetupError> {
    let Some(tag) = &plan.output_tag else {
        return Ok(None);
    };
    let schema = match &plan.output_schema {
        Some((path, schema)) => Some(output::Schema::compile(
            schema,
            &path.display().to_string(),
        )?),
        None => None,
    };
    Ok(Some(supervisor::OutputSpec {
        tag: tag.clone(),
        schema,
    }))
}

/// What the agent's sandbox is built from, owned, so that the command
/// line can be built off the clocks' thread and built again.
#[derive(Clone)]
struct SandboxTarget {
    options: SandboxOptions,
    needs: warden_sandbox::SandboxNeeds,
    program: OsString,
    args: Vec<OsString>,
    workdir: PathBuf,
    home: PathBuf,
    env: Vec<(OsString, OsString)>,
    name: String,
    run_dir: PathBuf,
    /// A container's resource limits, for its engine.
    limits: Option<warden_sandbox::container::ContainerLimits>,
    /// A container's labels and `--cidfile`.
    container: Option<ContainerFlags>,
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
            if let Some(c) = &self.container {
                use crate::container_sweep::{OWNER_LABEL, RUN_LABEL, owner};
                let labels = [
                    (RUN_LABEL, c.run_id.clone()),
                    (OWNER_LABEL, owner().to_string()),
                ];
                warden_sandbox::container::add_run_flags(&mut wrapped, &labels, &c.cidfile);
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
/// The live events ([`next_update`](Self::next_update)) are a bounded
/// feed that the run never waits on: when the caller falls behind, as
/// under a burst of output, line events (`text`, `stderr`, `thinking`,
/// `oversized_line`) are left out of it, and other events too once a
/// backlog of them is full (never the run's start, exit, ending, end or
/// result), all counted in the report's `live_events_dropped`.
/// `events.jsonl` in the run directory has them all. Reading the updates is optional: [`wait`](Self::wait) returns as
/// soon as the run has ended, whether or not they were read.
pub struct RunHandle {
    run_id: String,
    run_dir: PathBuf,
    /// Whether the feed carries the output's lines.
    output_lines: std::sync::Arc<std::sync::atomic::AtomicBool>,
    events: mpsc::Receiver<Stamped>,
    control: mpsc::UnboundedSender<Control>,
    task: JoinHandle<Report>,
    fallback: Report,
    dir: HeldDir,
}

/// A cloneable way to stop a run, a session or a batch, for signal
/// handlers and other tasks.
#[derive(Clone)]
pub struct Canceller(pub(crate) std::sync::Arc<dyn Cancel>);

/// What can be stopped: a run, and above it a session or a batch, which
/// pass it on to their runs.
pub(crate) trait Cancel: Send + Sync {
    /// Ends it gracefully: SIGTERM to the running agents, the kill grace,
    /// SIGKILL; a session or batch starts no more runs.
    fn cancel(&self);
    /// [`cancel`](Self::cancel), saying why: `why` completes "cancelled
    /// …" in the runs' reasons.
    fn cancel_because(&self, why: &str) {
        let _ = why;
        self.cancel();
    }
    /// Ends it now: SIGKILL to every process of its runs.
    fn kill(&self);
    /// What it is, for `Debug`.
    fn what(&self) -> &'static str;
}

impl Cancel for mpsc::UnboundedSender<Control> {
    fn cancel(&self) {
        let _ = self.send(Control::Cancel);
    }

    fn cancel_because(&self, why: &str) {
        let _ = self.send(Control::CancelBecause(why.to_string()));
    }

    fn kill(&self) {
        let _ = self.send(Control::Kill);
    }

    fn what(&self) -> &'static str {
        "run"
    }
}

impl std::fmt::Debug for Canceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Canceller({})", self.0.what())
    }
}

impl Canceller {
    /// Ends it gracefully: SIGTERM to the running agents, the kill grace,
    /// SIGKILL; a session or batch starts no more runs.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// [`cancel`](Self::cancel), saying why: `why` completes the sentence
    /// "cancelled …" in the reason of each run it ends (`because the
    /// reader of the output went away`); without it the reason says a
    /// signal to warden did it.
    pub fn cancel_because(&self, why: &str) {
        self.0.cancel_because(why);
    }

    /// Ends it now: SIGKILL to every process of its runs.
    pub fn kill(&self) {
        self.0.kill();
    }
}

impl RunHandle {
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The next event, as an update of a run on its own; `None` once the
    /// run has finished and every event was taken. Events may be missing
    /// from this feed when the caller falls behind (see
    /// [`RunHandle`]); `events.jsonl` has them all.
    pub async fn next_update(&mut self) -> Option<Update> {
        let event = self.next_event().await?;
        Some(Update::Event { entry: None, event })
    }

    /// The next event itself (see [`next_update`](Self::next_update)).
    pub async fn next_event(&mut self) -> Option<Stamped> {
        self.events.recv().await
    }

    /// Leaves the output's lines (`text`, `stderr` and `thinking` events)
    /// out of the live feed from now on, for a caller that shows none of them (it
    /// passes the output on itself, or wants only the other events). They
    /// are not counted in `live_events_dropped`, and an `exec` run then
    /// makes no event for a line at all, however fast its output comes:
    /// the logs and `events.jsonl` keep every line as before.
    pub fn without_output_lines(&self) {
        self.output_lines
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn canceller(&self) -> Canceller {
        Canceller(std::sync::Arc::new(self.control.clone()))
    }

    /// Waits for the end of the run. Always returns, with a verdict;
    /// `run.json` has the report when its `written` is true (a full disk
    /// can prevent that: then `output_lost` says why).
    ///
    /// The events need not be read first: the events not taken yet are
    /// given up here, so the run's end never waits on a reader that is
    /// no longer there.
    pub async fn wait(self) -> Outcome<Report> {
        Outcome::of_run(self.report().await)
    }

    /// [`wait`](Self::wait)'s report.
    pub(crate) async fn report(self) -> Report {
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
